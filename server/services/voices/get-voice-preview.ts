// A voice's preview as the org hears it (GET /voices/{id}/preview): free, at any balance. Any voice
// the org can see has one per usable profile (platform voices: every org's; an org's own: only its
// own), once a preview worker has made it.
import type { Prisma } from '../../db/database.ts';
import { readBlobBytes } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import { getVisibleVoiceOrThrow } from './get-voice.ts';
import { readyPreviewModels } from './preview-stamp.ts';
import { isUsableProfile } from './usable-profile.ts';

/** What a client is told to wait before asking again for a preview that is being made. */
export const PREVIEW_RETRY_AFTER_SECONDS = 5;

export interface VoicePreviewAudio {
  modelId: string;
  contentType: string;
  bytes: Buffer;
  durationMs: number | null;
  sha256: string;
}

/**
 * The preview of the voice on `modelId`, or on the first of its usable profiles (in the order the
 * voice lists them). 404 voice_not_found for a voice the org cannot see; 409
 * voice_profile_missing when it has no usable profile (for that model); 404 preview_not_ready
 * (retry after a few seconds) while the preview is being made or waits for another attempt.
 */
export async function getVoicePreview(prisma: Prisma, dataDir: string, orgId: string, voiceId: string, modelId?: string): Promise<VoicePreviewAudio> {
  const voice = await getVisibleVoiceOrThrow(prisma, orgId, voiceId);
  const usable = voice.profiles.filter((p) => isUsableProfile(p) && (modelId === undefined || p.modelId === modelId));
  const profile = usable[0];
  if (!profile) {
    throw new ServiceError(
      'voice_profile_missing',
      modelId === undefined
        ? `Voice '${voice.id}' has no ready profile, so it has no preview yet.`
        : `Voice '${voice.id}' has no ready profile for the model '${modelId}', so it has no preview there.`,
      modelId === undefined ? 'id' : 'model_id',
    );
  }
  const blobId = readyPreviewModels(voice).get(profile.modelId);
  const blob = blobId ? await prisma.blob.findFirst({ where: { id: blobId, deletedAt: null } }) : null;
  if (!blob) {
    const preview = voice.previews.find((p) => p.modelId === profile.modelId);
    const failed =
      preview?.status === 'failed'
        ? ` The last attempt failed (${preview.error ?? 'unknown error'}); it is tried again by ${preview.runAfter.toISOString()}.`
        : '';
    throw new ServiceError(
      'preview_not_ready',
      `The preview of voice '${voice.id}' on '${profile.modelId}' is being made.${failed} Try again in a few seconds.`,
      'id',
      { retryAfterSeconds: PREVIEW_RETRY_AFTER_SECONDS },
    );
  }
  return {
    modelId: profile.modelId,
    contentType: blob.contentType,
    bytes: await readBlobBytes(dataDir, blob),
    durationMs: blob.durationMs,
    sha256: blob.sha256,
  };
}
