// Prepare a voice for a model (POST /voices/{id}/profiles): its ready cached profile when it has
// one (of the version asked for), else a job that makes it from the voice's source.
import { ServiceError } from '../errors.ts';
import { queueVoiceJob, type QueuedVoiceJob, type VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { getVisibleVoiceOrThrow } from './get-voice.ts';
import { presentProfile, type VoiceProfileRecord } from './present-voice.ts';
import { isUsableProfile } from './usable-profile.ts';
import type { CloneMode, VoiceDeps } from './voice-deps.ts';

export interface PrepareVoiceProfileInput {
  orgId: string;
  voiceId: string;
  modelId: string;
  /** A cached profile of another version is made again; none: any ready one will do. */
  profileVersion: string | undefined;
}

export type PreparedVoiceProfile = { voice_id: string; status: 'ready'; profile: VoiceProfileRecord } | QueuedVoiceJob;

export async function prepareVoiceProfile(deps: VoiceDeps, input: PrepareVoiceProfileInput): Promise<PreparedVoiceProfile> {
  const { prisma, engines } = deps;
  const { orgId } = input;
  const voice = await getVisibleVoiceOrThrow(prisma, orgId, input.voiceId);
  const modelId = engines.resolveModel(input.modelId);
  const cached = await prisma.voiceProfile.findUnique({ where: { voiceId_modelId: { voiceId: voice.id, modelId } } });
  if (cached && isUsableProfile(cached) && (input.profileVersion === undefined || input.profileVersion === cached.profileVersion)) {
    return { voice_id: voice.id, status: 'ready', profile: presentProfile(cached) };
  }
  if (voice.orgId === null) {
    throw new ServiceError(
      'voice_read_only',
      `Voice '${voice.id}' is a platform voice: its profiles come with it and cannot be prepared for other models. Localize or clone it into your organization first.`,
      'id',
    );
  }
  engines.requireCloneCapable(modelId);
  // The job reports the kind of work it does on the voice.
  const apiKind = voice.kind === 'pro_clone' ? 'pro_clone' : voice.kind === 'localized' ? 'localize' : 'instant_clone';
  const source = (voice.sourceMetadata as { mode?: CloneMode; blob_ids?: string[] } | null) ?? {};
  const payload: VoiceJobPayload = {
    modelId,
    mode: source.mode ?? 'similarity',
    profileVersion: input.profileVersion ?? cached?.profileVersion ?? '1',
    apiKind,
    ...(source.blob_ids ? { blobIds: source.blob_ids } : {}),
  };
  return queueVoiceJob(deps, { orgId, voice: voice.id, kind: 'prepare_profile', modelId, payload, engineClone: engines.clonesBill(modelId) });
}
