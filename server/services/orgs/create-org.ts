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

/** How many orgs one account may belong to: the cap on orgs made from the dashboard. */
export const MAX_ORGS_PER_USER = 50;

/** A new org made by a signed-in user (the dashboard's "New organization"): they are its owner. */
export async function createOrgForUser(db: Database, input: { userId: string; name: string }): Promise<{ id: string; name: string }> {
  const name = input.name.trim();
  if (!name || name.length > 200) throw new ServiceError('invalid_request', 'Organization name must be 1-200 characters.', 'name');
  return db.prisma.$transaction(async (tx) => {
    if ((await tx.membership.count({ where: { userId: input.userId } })) >= MAX_ORGS_PER_USER) {
      throw new ServiceError('invalid_request', `An account can belong to at most ${MAX_ORGS_PER_USER} organizations: leave one first.`, 'name');
    }
    const org = await tx.org.create({ data: { id: newId('org'), name } });
    await tx.membership.create({ data: { userId: input.userId, orgId: org.id, role: 'owner' } });
    return { id: org.id, name: org.name };
  });
}
