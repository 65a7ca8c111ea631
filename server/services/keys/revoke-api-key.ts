import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/**
 * Revokes a key. Effective on the gateway's very next request from any process: the gateway
 * reads the key's status from the database on every request (see verify-api-key.ts).
 * When orgId is given, the key must belong to it (dashboard); the operator CLI omits it.
 */
export async function revokeApiKey(prisma: Prisma, input: { id: string; orgId?: string }): Promise<{ id: string; status: 'revoked' }> {
  const { count } = await prisma.apiKey.updateMany({
    where: { id: input.id, ...(input.orgId ? { orgId: input.orgId } : {}) },
    data: { status: 'revoked', revokedAt: new Date() },
  });
  if (count === 0) throw new ServiceError('key_not_found', `No API key with id ${input.id}.`);
  return { id: input.id, status: 'revoked' };
}
