// Making the previews that reconcile-voice-previews.ts asked for: a worker claims one with a
// lease (a conditional update: of several racing workers exactly one gets it), speaks the
// preview's sentence through the voice's profile, stores the clip as a blob and marks it ready.
// A failure (engine offline or failing, the org's storage full) is recorded on the row and tried
// again later, waiting longer each time; it never fails anything else. Free: nothing is
// reserved or debited, whoever asks for the preview and whatever their balance.
import type { Prisma } from '../../db/database.ts';
import { storeBlob } from '../blobs/blob-store.ts';
import { isServiceError, ServiceError } from '../errors.ts';
import { previewStamp, previewTextFor } from './preview-stamp.ts';
import { dropClip } from './reconcile-voice-previews.ts';
import { isUsableProfile } from './usable-profile.ts';
import type { VoiceEngines } from './voice-deps.ts';

/** A failure waits this long before the next attempt, doubling each time up to MAX_RETRY_MS. */
export const FIRST_RETRY_MS = 30_000;
const MAX_RETRY_MS = 3600_000;

export interface PreviewMakerDeps {
  prisma: Prisma;
  dataDir: string;
  engines: Pick<VoiceEngines, 'speak'>;
}

type PreviewRow = NonNullable<Awaited<ReturnType<Prisma['voicePreview']['findFirst']>>>;

/** When a preview that failed `attempts` times is tried next. */
export function nextAttemptAt(attempts: number, now: Date): Date {
  return new Date(now.getTime() + Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1)));
}

/** The next preview due (pending, or failed and waited long enough) that no live lease holds, now held by `workerId` for `leaseMs`; null when none. */
export async function claimVoicePreview(prisma: Prisma, workerId: string, leaseMs: number, now = new Date()): Promise<PreviewRow | null> {
  const free = { OR: [{ lockedUntil: null }, { lockedUntil: { lt: now } }] };
  const candidates = await prisma.voicePreview.findMany({
    where: { status: { in: ['pending', 'failed'] }, runAfter: { lte: now }, ...free },
    orderBy: [{ runAfter: 'asc' }, { id: 'asc' }],
    take: 5,
  });
  for (const candidate of candidates) {
    const lockedUntil = new Date(now.getTime() + leaseMs);
    const claimed = await prisma.voicePreview.updateMany({
      where: { id: candidate.id, stamp: candidate.stamp, status: { in: ['pending', 'failed'] }, ...free },
      data: { lockedBy: workerId, lockedUntil },
    });
    if (claimed.count === 1) return { ...candidate, lockedBy: workerId, lockedUntil };
  }
  return null;
}

/**
 * Makes a claimed preview: `ready` with its clip, `failed` (recorded, tried again later), or
 * `stale` when its voice or profile changed since it was asked for (the next reconcile pass
 * decides what is wanted now; nothing is kept).
 */
export async function makeVoicePreview(
  deps: PreviewMakerDeps,
  preview: PreviewRow,
  signal: AbortSignal,
  now = () => new Date(),
): Promise<'ready' | 'failed' | 'stale'> {
  const { prisma } = deps;
  const mine = { id: preview.id, stamp: preview.stamp, lockedBy: preview.lockedBy };
  const release = { lockedBy: null, lockedUntil: null };
  const profile = await prisma.voiceProfile.findUnique({
    where: { voiceId_modelId: { voiceId: preview.voiceId, modelId: preview.modelId } },
    include: { voice: { select: { orgId: true, language: true, deletedAt: true } } },
  });
  if (!profile || profile.voice.deletedAt || !isUsableProfile(profile, now().getTime()) || previewStamp(profile, profile.voice.language) !== preview.stamp) {
    await prisma.voicePreview.updateMany({ where: mine, data: release });
    return 'stale';
  }
  const { language, orgId } = profile.voice;
  try {
    const clip = await deps.engines.speak([profile], previewTextFor(language), language, signal);
    if (!clip) throw new ServiceError('model_offline', `The model '${profile.modelId}' has no engine online to speak the preview.`);
    const blob = await storeBlob(prisma, deps.dataDir, { orgId, contentType: 'audio/wav', bytes: clip.wav, durationMs: clip.durationMs });
    const done = await prisma.voicePreview.updateMany({ where: mine, data: { status: 'ready', blobId: blob.id, error: null, ...release } });
    if (done.count === 1) return 'ready';
    // Asked for again (or dropped) while it was being made: this clip is of no use.
    await dropClip(deps, blob.id);
    return 'stale';
  } catch (err) {
    const attempts = preview.attempts + 1;
    const error = isServiceError(err) ? `${err.code}: ${err.message}` : `internal_error: ${(err as Error).message}`;
    await prisma.voicePreview.updateMany({
      where: mine,
      data: { status: 'failed', attempts, error: error.slice(0, 500), runAfter: nextAttemptAt(attempts, now()), ...release },
    });
    return 'failed';
  }
}
