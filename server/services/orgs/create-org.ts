import type { Database } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { grantCredits } from '../credits/grant-credits.ts';

export async function createOrg(
  db: Database,
  input: { name: string; creditsMicros?: bigint; isTrial?: boolean },
): Promise<{ id: string; name: string; balanceMicros: bigint }> {
  const name = input.name.trim();
  if (!name || name.length > 200) throw new ServiceError('invalid_request', 'Organization name must be 1-200 characters.', 'name');
  const org = await db.prisma.org.create({ data: { id: newId('org'), name, isTrial: input.isTrial ?? false } });
  let balanceMicros = 0n;
  if (input.creditsMicros && input.creditsMicros !== 0n) {
    balanceMicros = (await grantCredits(db, { orgId: org.id, amountMicros: input.creditsMicros, description: 'initial credits' })).balanceMicros;
  }
  return { id: org.id, name: org.name, balanceMicros };
}
