import { ServiceError } from '../errors.ts';
import type { Tx } from './invitations.ts';

/**
 * Serializes changes to an org's memberships. Touching the org row first takes its row lock
 * on PostgreSQL (READ COMMITTED: later statements then see what the previous holder
 * committed) and the write lock on SQLite, so two owners demoting or removing each other at
 * once cannot both pass the "someone else is still an owner" check and leave no owner.
 */
export async function lockOrg(tx: Tx, orgId: string): Promise<{ id: string; name: string }> {
  const { count } = await tx.org.updateMany({ where: { id: orgId }, data: { updatedAt: new Date() } });
  if (count === 0) throw new ServiceError('org_not_found', `No organization with id ${orgId}.`);
  return tx.org.findUniqueOrThrow({ where: { id: orgId }, select: { id: true, name: true } });
}

export async function countOwners(tx: Tx, orgId: string): Promise<number> {
  return tx.membership.count({ where: { orgId, role: 'owner' } });
}

export const memberNotFound = () => new ServiceError('not_found', 'No such member in this organization.', 'userId');
