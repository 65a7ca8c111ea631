import type { Database } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { countOwners, lockOrg, memberNotFound } from './org-lock.ts';

/**
 * Takes a user out of an org; effective on their next request (every dashboard procedure reads
 * the membership). The last owner cannot be removed. Keys the org has stay the org's.
 */
export async function removeMember(db: Database, input: { orgId: string; userId: string }): Promise<{ userId: string; removed: true }> {
  return db.prisma.$transaction(async (tx) => {
    await lockOrg(tx, input.orgId);
    const membership = await tx.membership.findUnique({ where: { userId_orgId: { userId: input.userId, orgId: input.orgId } }, select: { role: true } });
    if (!membership) throw memberNotFound();
    if (membership.role === 'owner' && (await countOwners(tx, input.orgId)) <= 1) {
      throw new ServiceError('conflict', 'The last owner of an organization cannot be removed. Make another member an owner first.', 'userId');
    }
    await tx.membership.delete({ where: { userId_orgId: { userId: input.userId, orgId: input.orgId } } });
    return { userId: input.userId, removed: true as const };
  });
}
