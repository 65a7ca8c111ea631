// Localize (POST /voices/{id}/localize): a new voice of the org that keeps a visible voice's
// character in another language, made by a job.
import { queueVoiceJob, type QueuedVoiceJob, type VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { getVisibleVoiceOrThrow } from './get-voice.ts';
import type { VoiceDeps } from './voice-deps.ts';

export interface LocalizeVoiceInput {
  orgId: string;
  voiceId: string;
  language: string;
  /** The new voice's name; "<parent's name> (<language>)" when none. */
  name: string | undefined;
  /** The model the caller named; else the parent's own model, else the default. */
  modelId: string | undefined;
  profileVersion: string;
}

export async function localizeVoice(deps: VoiceDeps, input: LocalizeVoiceInput): Promise<QueuedVoiceJob> {
  const { orgId } = input;
  const parent = await getVisibleVoiceOrThrow(deps.prisma, orgId, input.voiceId);
  const modelId = deps.engines.chooseCloneModel(input.modelId ?? (parent.modelFamily || undefined));
  // Only the org's own voices lend their clip; a platform voice's stays its own.
  const parentClip = parent.orgId ? parent.sourceAudioBlobId : null;
  const payload: VoiceJobPayload = { modelId, mode: 'similarity', profileVersion: input.profileVersion, apiKind: 'localize' };
  // A parent without a clip (a platform voice): the job has it speak a sample and measures that.
  if (!parentClip) payload.sampleFromVoiceId = parent.id;
  return queueVoiceJob(deps, {
    orgId,
    kind: 'localize',
    modelId,
    payload,
    engineClone: deps.engines.clonesBill(modelId),
    voice: {
      orgId,
      name: input.name ?? `${parent.name} (${input.language})`,
      language: input.language,
      kind: 'localized',
      parentVoiceId: parent.id,
      sourceAudioBlobId: parentClip,
      sourceTranscript: null,
      sourceMetadata: { localized_from: parent.id, from_language: parent.language },
      sourceVersion: parent.sourceVersion,
      gender: parent.gender,
      tags: parent.tags as string[],
      modelId,
    },
  });
}
