import type { Database } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/** Adds (or, with a negative amount, removes) credit, with its ledger row, atomically. */
export async function grantCredits(
  db: Database,
  input: { orgId: string; amountMicros: bigint; description?: string },
): Promise<{ orgId: string; balanceMicros: bigint }> {
  const balance = await db.hot.applyLedgerChange({
    orgId: input.orgId,
    amountMicros: input.amountMicros,
    kind: input.amountMicros >= 0n ? 'grant' : 'adjustment',
    description: input.description ?? (input.amountMicros >= 0n ? 'credit grant' : 'credit adjustment'),
  });
  if (balance === null) throw new ServiceError('org_not_found', `No organization with id ${input.orgId}.`);
  return { orgId: input.orgId, balanceMicros: balance };
}
