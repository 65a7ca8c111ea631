import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { presentProfile, type VoiceProfileRecord } from './present-voice.ts';
import type { PreparedProfile } from './voice-deps.ts';

/** Stores what an engine prepared as the voice's ready profile for the model (replacing any other). */
export async function saveVoiceProfile(
  prisma: Prisma,
  input: { voiceId: string; modelId: string; prepared: PreparedProfile; profileVersion: string; sourceVersion: string },
): Promise<VoiceProfileRecord> {
  const { voiceId, modelId, prepared } = input;
  const data = {
    upstreamId: prepared.upstreamId,
    params: (prepared.params ?? undefined) as object | undefined,
    status: 'ready' as const,
    error: null,
    profileVersion: input.profileVersion,
    sourceVersion: input.sourceVersion,
    cachedAt: new Date(),
    expiresAt: prepared.expiresAt,
  };
  const row = await prisma.voiceProfile.upsert({
    where: { voiceId_modelId: { voiceId, modelId } },
    create: { id: newId('vpr'), voiceId, modelId, ...data },
    update: data,
  });
  return presentProfile(row);
}
