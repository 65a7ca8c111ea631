import type { Prisma } from '../../db/database.ts';
import { dictNotFound } from './dict-record.ts';

/**
 * Soft-deletes one of the org's dictionaries: from then on it is 404 dict_not_found on every
 * route, TTS included. Deleting it again is also 404 (there is nothing left to delete).
 */
export async function deleteDict(prisma: Prisma, input: { orgId: string; dictId: string }): Promise<{ id: string; deleted: true }> {
  const { count } = await prisma.pronunciationDict.updateMany({
    where: { id: input.dictId, orgId: input.orgId, deletedAt: null },
    data: { deletedAt: new Date() },
  });
  if (count === 0) throw dictNotFound(input.dictId);
  return { id: input.dictId, deleted: true };
}
