import type { Prisma } from '../../db/database.ts';
import { queueEngineCopyDeletion } from './delete-engine-copies.ts';
import { getOwnedVoiceOrThrow } from './get-voice.ts';

/**
 * Soft delete: the voice disappears from every listing and lookup; its rows stay for audit. The
 * engine voices cloned for it are deleted at their engines (a gateway's job worker does it:
 * `jobQueued` tells one in this process to look now).
 */
export async function deleteVoice(prisma: Prisma, orgId: string, voiceId: string, jobQueued?: () => void): Promise<{ id: string; deleted: true }> {
  const voice = await getOwnedVoiceOrThrow(prisma, orgId, voiceId);
  const queued = await prisma.$transaction(async (tx) => {
    const r = await tx.voice.updateMany({ where: { id: voice.id, deletedAt: null }, data: { deletedAt: new Date() } });
    // Only the delete that took the voice out queues its copies: two racing deletes queue them once.
    if (r.count === 0) return false;
    const cloned = await tx.voiceProfile.findMany({ where: { voiceId: voice.id, madeByClone: true }, select: { modelId: true, upstreamId: true } });
    await queueEngineCopyDeletion(tx, orgId, voice.id, cloned);
    return cloned.length > 0;
  });
  if (queued) jobQueued?.();
  return { id: voice.id, deleted: true };
}
