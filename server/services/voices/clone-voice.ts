// Instant clone (POST /voices/clone): a voice from one clip of at least MIN_CLIP_SECONDS, made
// now when an engine that can clone is online (the voice), else by a job (the job).
import { createHash } from 'node:crypto';
import { deleteBlob, storeBlob } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import { queueVoiceJob, type QueuedVoiceJob, type VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { createVoice, type NewVoice } from './create-voice.ts';
import { queueEngineCopyDeletion } from './delete-engine-copies.ts';
import { getVoice } from './get-voice.ts';
import type { VoiceRecord } from './present-voice.ts';
import { saveVoiceProfile } from './save-voice-profile.ts';
import type { CloneMode, VoiceClip, VoiceDeps } from './voice-deps.ts';
import { admitNewVoice, lockOrg, takeEngineClone } from './voice-quotas.ts';

export const MIN_CLIP_SECONDS = 10;

export interface CloneVoiceInput {
  orgId: string;
  name: string;
  language: string;
  mode: CloneMode;
  transcript: string | null;
  description?: string;
  tags?: string[];
  /** The model the caller named, if any. */
  modelId: string | undefined;
  profileVersion: string;
  clip: VoiceClip;
  /** The org's blob the clip was read from; null when it came with the request (it is stored here). */
  blobId: string | null;
  /** The request field that carried the clip, named by refusals. */
  clipParam: string;
}

export type CloneVoiceResult = { status: 'created'; voice: VoiceRecord } | { status: 'queued'; job: QueuedVoiceJob };

export function requireClipLength(clip: { durationMs: number }, minSeconds: number, param: string): void {
  if (clip.durationMs < minSeconds * 1000) {
    throw new ServiceError(
      'clip_too_short',
      `The clip is ${(clip.durationMs / 1000).toFixed(1)} s long (measured from the audio); a voice needs at least ${minSeconds} s of audio.`,
      param,
    );
  }
}

/** The version of a voice's source: changes when its audio does. */
export const sourceVersionOf = (wav: Buffer) => createHash('sha256').update(wav).digest('hex').slice(0, 16);

export async function cloneVoice(deps: VoiceDeps, input: CloneVoiceInput, signal: AbortSignal): Promise<CloneVoiceResult> {
  const { prisma, dataDir, engines } = deps;
  const { orgId, clip } = input;
  requireClipLength(clip, MIN_CLIP_SECONDS, input.clipParam);
  const modelId = engines.chooseCloneModel(input.modelId); // a bad model is refused before the clip is stored
  const engineClone = engines.clonesBill(modelId);
  const now = engines.canCloneNow(modelId);
  // Made now: the caps are checked (and the clone counted) before the clip is stored or the engine asked.
  if (now) {
    await prisma.$transaction(async (tx) => {
      await lockOrg(tx, orgId);
      await admitNewVoice(tx, orgId, deps.voiceLimits);
      if (engineClone) await takeEngineClone(tx, orgId, modelId, deps.voiceLimits);
    });
  }
  const uploaded = input.blobId === null;
  const blobId = input.blobId ?? (await storeBlob(prisma, dataDir, { orgId, contentType: 'audio/wav', bytes: clip.wav, durationMs: clip.durationMs })).id;
  const sourceVersion = sourceVersionOf(clip.wav);
  const newVoice: NewVoice = {
    orgId,
    name: input.name,
    language: input.language,
    kind: 'instant_clone',
    sourceAudioBlobId: blobId,
    sourceTranscript: input.transcript,
    sourceMetadata: { mode: input.mode, clip_seconds: clip.durationMs / 1000, clip_sample_rate: clip.sampleRate },
    sourceVersion,
    description: input.description,
    tags: input.tags,
    modelId,
  };

  // The clip uploaded with this request is a blob nobody knows of until a voice refers to it:
  // deleted again if the request fails before that.
  const dropUploadedClip = async (err: unknown): Promise<never> => {
    if (uploaded) await deleteBlob(prisma, dataDir, orgId, blobId).catch(() => undefined);
    throw err;
  };
  if (now) {
    const prepared = await engines
      .prepare(modelId, clip, { name: input.name, language: input.language, transcript: input.transcript }, input.mode, signal)
      .catch(dropUploadedClip);
    // Counted again as it is made: a concurrent clone may have taken the last place meanwhile,
    // and then the engine's new voice is deleted again.
    const voiceId = await prisma
      .$transaction(async (tx) => {
        await lockOrg(tx, orgId);
        await admitNewVoice(tx, orgId, deps.voiceLimits);
        return createVoice(tx, {
          ...newVoice,
          description: input.description || prepared.description,
          gender: prepared.gender,
          sourceMetadata: { ...newVoice.sourceMetadata, ...prepared.metadata },
        });
      })
      .catch(async (err: unknown) => {
        await queueEngineCopyDeletion(prisma, orgId, null, [{ modelId, upstreamId: prepared.upstreamId }]);
        deps.jobQueued?.();
        return dropUploadedClip(err);
      });
    await saveVoiceProfile(prisma, { voiceId, modelId, prepared, profileVersion: input.profileVersion, sourceVersion });
    // Its preview is made by a worker, off this request.
    deps.previewsWanted?.();
    return { status: 'created', voice: await getVoice(prisma, orgId, voiceId) };
  }
  const payload: VoiceJobPayload = { modelId, mode: input.mode, profileVersion: input.profileVersion, apiKind: 'instant_clone' };
  // Refused (too many jobs): the uploaded clip goes too.
  const job = await queueVoiceJob(deps, { orgId, voice: newVoice, kind: 'instant_clone', modelId, payload, engineClone }).catch(dropUploadedClip);
  return { status: 'queued', job };
}
