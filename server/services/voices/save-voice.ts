// Saving bookmarks a visible voice (platform or own) for the org: the `saved` scope of GET /voices.
import type { Prisma } from '../../db/database.ts';
import { getVisibleVoiceOrThrow, getVoice } from './get-voice.ts';
import type { VoiceRecord } from './present-voice.ts';

export async function setVoiceSaved(prisma: Prisma, orgId: string, voiceId: string, saved: boolean): Promise<VoiceRecord> {
  const voice = await getVisibleVoiceOrThrow(prisma, orgId, voiceId);
  if (saved) {
    await prisma.voiceSave.upsert({ where: { voiceId_orgId: { voiceId: voice.id, orgId } }, create: { voiceId: voice.id, orgId }, update: {} });
  } else {
    await prisma.voiceSave.deleteMany({ where: { voiceId: voice.id, orgId } });
  }
  return getVoice(prisma, orgId, voice.id);
}
