import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/** Withdraws a pending invitation; another org's invitation id is "not found". */
export async function revokeInvitation(prisma: Prisma, input: { orgId: string; id: string }): Promise<{ id: string; revoked: true }> {
  const { count } = await prisma.invitation.deleteMany({ where: { id: input.id, orgId: input.orgId } });
  if (count === 0) throw new ServiceError('not_found', 'No such pending invitation in this organization.', 'id');
  return { id: input.id, revoked: true };
}
