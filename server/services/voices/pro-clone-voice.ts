// Professional clone (POST /voices/pro-clone): a voice from several of the org's clips, between
// MIN_PRO_CLIP_SECONDS and MAX_PRO_CLIP_SECONDS in all (their stored durations: nothing is
// decoded here), always made by a job.
import { createHash } from 'node:crypto';
import { getBlobOrThrow } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import { queueVoiceJob, type QueuedVoiceJob } from '../jobs/queue-voice-job.ts';
import type { VoiceDeps } from './voice-deps.ts';

export const MIN_PRO_CLIP_SECONDS = 30;
export const MAX_PRO_CLIP_SECONDS = 600;
/** Clips of one professional clone at most: the job decodes and joins every one. */
export const MAX_PRO_CLIPS = 10;

export interface ProCloneVoiceInput {
  orgId: string;
  name: string;
  language: string;
  /** Distinct ids of the org's blobs, at most MAX_PRO_CLIPS. */
  blobIds: string[];
  transcript: string | null;
  description?: string;
  tags?: string[];
  /** The model the caller named, if any. */
  modelId: string | undefined;
  profileVersion: string;
}

export async function proCloneVoice(deps: VoiceDeps, input: ProCloneVoiceInput): Promise<QueuedVoiceJob> {
  const { orgId } = input;
  const modelId = deps.engines.chooseCloneModel(input.modelId);
  let totalMs = 0;
  const hash = createHash('sha256');
  for (const [i, blobId] of input.blobIds.entries()) {
    const blob = await getBlobOrThrow(deps.prisma, orgId, blobId).catch(() => {
      throw new ServiceError('blob_not_found', `No blob with id '${blobId}' in this organization.`, `blob_ids[${i}]`);
    });
    if (blob.durationMs === null) throw new ServiceError('unsupported_audio_format', `Blob '${blobId}' is not audio.`, `blob_ids[${i}]`);
    totalMs += blob.durationMs;
    hash.update(blob.sha256);
  }
  if (totalMs < MIN_PRO_CLIP_SECONDS * 1000) {
    throw new ServiceError(
      'clip_too_short',
      `The clips hold ${(totalMs / 1000).toFixed(1)} s of audio; a professional clone needs at least ${MIN_PRO_CLIP_SECONDS} s.`,
      'blob_ids',
    );
  }
  if (totalMs > MAX_PRO_CLIP_SECONDS * 1000) {
    throw new ServiceError(
      'invalid_request',
      `The clips hold ${(totalMs / 1000).toFixed(1)} s of audio; a professional clone takes at most ${MAX_PRO_CLIP_SECONDS / 60} minutes.`,
      'blob_ids',
    );
  }
  return queueVoiceJob(deps, {
    orgId,
    kind: 'pro_clone',
    modelId,
    engineClone: deps.engines.clonesBill(modelId),
    voice: {
      orgId,
      name: input.name,
      language: input.language,
      kind: 'pro_clone',
      sourceAudioBlobId: input.blobIds[0]!,
      sourceTranscript: input.transcript,
      sourceMetadata: { mode: 'similarity', clip_seconds: totalMs / 1000, blob_ids: input.blobIds },
      sourceVersion: hash.digest('hex').slice(0, 16),
      description: input.description,
      tags: input.tags,
      modelId,
    },
    payload: { modelId, mode: 'similarity', profileVersion: input.profileVersion, apiKind: 'pro_clone', blobIds: input.blobIds },
  });
}
