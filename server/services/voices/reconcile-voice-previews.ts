// Which previews should exist (docs/voices.md, "Previews"): one per live voice and usable profile
// (ready, not expired), stamped with what it is made of (preview-stamp.ts). A gateway's preview
// worker runs this, then makes the pending ones (make-voice-preview.ts). Whatever wrote the
// profile (seeding, `svc voices import`, the dashboard's import, a clone, a job), the voice gets
// its preview the same way; a preview whose profile changed is dropped and made again, and one
// whose profile or voice is gone is dropped. Safe to run in several gateways at once, and while
// previews are being made: each change is conditional on the row as read (stamp and clip), only
// the one that changes it drops its clip, and a clip made for a stamp that changed meanwhile is
// dropped by its maker.
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { dropBlob } from '../blobs/blob-store.ts';
import { previewStamp } from './preview-stamp.ts';
import { isUsableProfile } from './usable-profile.ts';

/** Voices read per query. */
const PAGE = 200;

export interface PreviewReconcileDeps {
  prisma: Prisma;
  dataDir: string;
}

export interface ReconcileOutcome {
  /** Previews asked for: a voice's new profile, or a changed one. */
  queued: number;
  /** Previews dropped: their profile or voice is gone. */
  dropped: number;
}

/**
 * What the profiles and voices look like, cheaply: when it has not moved since the last pass,
 * the pass has nothing to do (profiles expiring meanwhile are caught by the next full pass).
 */
export async function previewSourcesVersion(prisma: Prisma): Promise<string> {
  const [voices, profiles] = await Promise.all([
    prisma.voice.aggregate({ _count: { _all: true }, _max: { updatedAt: true } }),
    prisma.voiceProfile.aggregate({ _count: { _all: true }, _max: { updatedAt: true } }),
  ]);
  return JSON.stringify([voices._count._all, voices._max.updatedAt, profiles._count._all, profiles._max.updatedAt]);
}

export async function reconcileVoicePreviews(deps: PreviewReconcileDeps, now = new Date()): Promise<ReconcileOutcome> {
  const { prisma } = deps;
  const outcome: ReconcileOutcome = { queued: 0, dropped: 0 };
  let cursor: string | undefined;
  for (;;) {
    const voices = await prisma.voice.findMany({
      where: { deletedAt: null },
      select: {
        id: true,
        language: true,
        profiles: { select: { modelId: true, upstreamId: true, params: true, profileVersion: true, sourceVersion: true, status: true, expiresAt: true } },
        previews: { select: { id: true, modelId: true, stamp: true, blobId: true } },
      },
      orderBy: { id: 'asc' },
      take: PAGE,
      ...(cursor ? { cursor: { id: cursor }, skip: 1 } : {}),
    });
    for (const voice of voices) {
      const wanted = new Map(voice.profiles.filter((p) => isUsableProfile(p, now.getTime())).map((p) => [p.modelId, previewStamp(p, voice.language)] as const));
      for (const preview of voice.previews) {
        const stamp = wanted.get(preview.modelId);
        if (stamp === undefined) {
          if (await dropPreview(deps, preview)) outcome.dropped++;
        } else if (stamp !== preview.stamp) {
          if (await restamp(deps, preview, stamp, now)) outcome.queued++;
        }
        wanted.delete(preview.modelId);
      }
      for (const [modelId, stamp] of wanted) {
        // Another gateway may make the same row at the same moment: the unique (voice, model) keeps one.
        const made = await prisma.voicePreview
          .create({ data: { id: newId('vpv'), voiceId: voice.id, modelId, stamp, runAfter: now } })
          .then(() => true)
          .catch(() => false);
        if (made) outcome.queued++;
      }
    }
    if (voices.length < PAGE) break;
    cursor = voices.at(-1)!.id;
  }
  // Deleted voices: their previews go (an org's clips give their storage back).
  const orphans = await prisma.voicePreview.findMany({ where: { voice: { deletedAt: { not: null } } }, select: { id: true, stamp: true, blobId: true } });
  for (const preview of orphans) if (await dropPreview(deps, preview)) outcome.dropped++;
  return outcome;
}

type PreviewRow = { id: string; stamp: string; blobId: string | null };

/** The preview asked for again with the new stamp, its old clip dropped (by the pass that changed it). */
async function restamp(deps: PreviewReconcileDeps, preview: PreviewRow, stamp: string, now: Date): Promise<boolean> {
  const changed = await deps.prisma.voicePreview.updateMany({
    where: { id: preview.id, stamp: preview.stamp, blobId: preview.blobId },
    data: { stamp, status: 'pending', blobId: null, attempts: 0, error: null, runAfter: now, lockedBy: null, lockedUntil: null },
  });
  if (changed.count === 1) await dropClip(deps, preview.blobId);
  return changed.count === 1;
}

async function dropPreview(deps: PreviewReconcileDeps, preview: PreviewRow): Promise<boolean> {
  const deleted = await deps.prisma.voicePreview.deleteMany({ where: { id: preview.id, stamp: preview.stamp, blobId: preview.blobId } });
  if (deleted.count === 1) await dropClip(deps, preview.blobId);
  return deleted.count === 1;
}

export async function dropClip(deps: PreviewReconcileDeps, blobId: string | null): Promise<void> {
  if (!blobId) return;
  const blob = await deps.prisma.blob.findUnique({ where: { id: blobId } });
  if (blob) await dropBlob(deps.prisma, deps.dataDir, blob);
}
