import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/**
 * Revokes a phone token: new calls with it are refused (401), and its calls in progress end
 * within a second (the gateway's watch of live calls, gateway/phone/phone-token-watch.ts).
 * When orgId is given, the token must belong to it (dashboard); the operator CLI omits it.
 * Revoking a revoked token keeps its first revocation time.
 */
export async function revokePhoneToken(prisma: Prisma, input: { id: string; orgId?: string }): Promise<{ id: string; status: 'revoked' }> {
  const where = { id: input.id, ...(input.orgId ? { orgId: input.orgId } : {}) };
  const { count } = await prisma.phoneToken.updateMany({ where: { ...where, revokedAt: null }, data: { revokedAt: new Date() } });
  if (count === 0 && (await prisma.phoneToken.count({ where })) === 0) throw new ServiceError('not_found', `No phone token with id ${input.id}.`);
  return { id: input.id, status: 'revoked' };
}
