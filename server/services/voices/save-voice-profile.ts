import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { queueEngineCopyDeletion } from './delete-engine-copies.ts';
import { presentProfile, type VoiceProfileRecord } from './present-voice.ts';
import type { PreparedProfile } from './voice-deps.ts';

/**
 * Stores what an engine prepared (a clone) as the voice's ready profile for the model, replacing
 * any other; the engine voice of a clone it replaces is deleted at its engine.
 */
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
    madeByClone: true,
  };
  const where = { voiceId_modelId: { voiceId, modelId } };
  const row = await prisma.$transaction(async (tx) => {
    const replaced = await tx.voiceProfile.findUnique({ where, select: { upstreamId: true, madeByClone: true, voice: { select: { orgId: true } } } });
    const saved = await tx.voiceProfile.upsert({ where, create: { id: newId('vpr'), voiceId, modelId, ...data }, update: data });
    if (replaced?.madeByClone && replaced.voice.orgId && replaced.upstreamId !== prepared.upstreamId) {
      await queueEngineCopyDeletion(tx, replaced.voice.orgId, voiceId, [{ modelId, upstreamId: replaced.upstreamId }]);
    }
    return saved;
  });
  return presentProfile(row);
}
