import type { Prisma } from '../../db/database.ts';
import { getOwnedVoiceOrThrow } from './get-voice.ts';

/** Soft delete: the voice disappears from every listing and lookup; its rows stay for audit. */
export async function deleteVoice(prisma: Prisma, orgId: string, voiceId: string): Promise<{ id: string; deleted: true }> {
  const voice = await getOwnedVoiceOrThrow(prisma, orgId, voiceId);
  await prisma.voice.updateMany({ where: { id: voice.id, deletedAt: null }, data: { deletedAt: new Date() } });
  return { id: voice.id, deleted: true };
}
