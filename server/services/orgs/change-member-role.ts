import type { Database } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { countOwners, lockOrg, memberNotFound } from './org-lock.ts';

/** Makes a member an owner or an owner a member. The last owner cannot be demoted. */
export async function changeMemberRole(
  db: Database,
  input: { orgId: string; userId: string; role: 'owner' | 'member' },
): Promise<{ userId: string; role: 'owner' | 'member' }> {
  return db.prisma.$transaction(async (tx) => {
    await lockOrg(tx, input.orgId);
    const membership = await tx.membership.findUnique({ where: { userId_orgId: { userId: input.userId, orgId: input.orgId } }, select: { role: true } });
    if (!membership) throw memberNotFound();
    if (membership.role === input.role) return { userId: input.userId, role: input.role };
    if (membership.role === 'owner' && (await countOwners(tx, input.orgId)) <= 1) {
      throw new ServiceError('conflict', 'This is the last owner of the organization. Make another member an owner first.', 'role');
    }
    await tx.membership.update({ where: { userId_orgId: { userId: input.userId, orgId: input.orgId } }, data: { role: input.role } });
    return { userId: input.userId, role: input.role };
  });
}
