import type { Prisma } from '../../db/database.js';
import { ServiceError } from '../errors.js';

/** Where a voice is visible: platform voices (no org) and the caller's org's own, not deleted. */
export const visibleVoiceWhere = (orgId: string) => ({ deletedAt: null, OR: [{ orgId: null }, { orgId }] });

/**
 * The voice's ready, unexpired profile for a model, as the engine needs it.
 * 404 voice_not_found for voices the org cannot see; 409 voice_profile_missing otherwise.
 */
export async function resolveVoiceProfile(prisma: Prisma, input: { orgId: string; voiceId: string; modelId: string }) {
  const voice = await prisma.voice.findFirst({
    where: { id: input.voiceId, ...visibleVoiceWhere(input.orgId) },
    select: { id: true, language: true, profiles: { where: { modelId: input.modelId } } },
  });
  if (!voice) throw new ServiceError('voice_not_found', `No voice with id '${input.voiceId}' is visible to this organization.`, 'voice.id');
  const profile = voice.profiles[0];
  if (!profile || profile.status !== 'ready' || (profile.expiresAt && profile.expiresAt.getTime() <= Date.now())) {
    throw new ServiceError(
      'voice_profile_missing',
      `Voice '${voice.id}' has no ready profile for model '${input.modelId}'. Prepare one with POST /voices/${voice.id}/profiles {"model_id":"${input.modelId}"}.`,
      'voice.id',
    );
  }
  return { voiceId: voice.id, language: voice.language, upstreamId: profile.upstreamId, params: (profile.params as Record<string, unknown> | null) ?? null };
}
