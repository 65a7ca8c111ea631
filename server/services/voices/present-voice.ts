// The API's Voice record (snake_case, ISO timestamps), one shape for the gateway and dashboard.
import type { Prisma } from '../../db/database.ts';
import { readyPreviewModels } from './preview-stamp.ts';

/** What to load with a voice to present it to an org. */
export const voiceInclude = (orgId: string) => ({
  profiles: { orderBy: [{ cachedAt: 'asc' as const }, { id: 'asc' as const }] },
  saves: { where: { orgId }, select: { orgId: true } },
  previews: { select: { modelId: true, stamp: true, status: true, blobId: true, error: true, runAfter: true } },
});

type VoiceRow = NonNullable<Awaited<ReturnType<Prisma['voice']['findFirst']>>>;
type ProfileRow = NonNullable<Awaited<ReturnType<Prisma['voiceProfile']['findFirst']>>>;
type PreviewRow = Pick<NonNullable<Awaited<ReturnType<Prisma['voicePreview']['findFirst']>>>, 'modelId' | 'stamp' | 'status' | 'blobId' | 'error' | 'runAfter'>;
export type VoiceWithRelations = VoiceRow & { profiles: ProfileRow[]; saves: { orgId: string }[]; previews: PreviewRow[] };

export interface VoiceProfileRecord {
  model_id: string;
  upstream_id: string;
  profile_version: string;
  source_version: string;
  cached_at: string;
  expires_at: string | null;
  status: 'queued' | 'ready' | 'failed';
}

export interface VoiceRecord {
  id: string;
  name: string;
  description: string;
  language: string;
  gender: string;
  tags: string[];
  featured: boolean;
  /** The enumerated kind of the spec: library | instant_clone | pro_clone | localized. */
  kind: 'library' | 'instant_clone' | 'pro_clone' | 'localized';
  parent_voice_id: string | null;
  source_audio_blob_id: string | null;
  source_transcript: string | null;
  source_metadata: Record<string, unknown> | null;
  source_version: string;
  profiles: VoiceProfileRecord[];
  model_family: string;
  /** An own voice's preview on its first usable profile, as a blob of the org; null for platform voices and until it is made. */
  sample_blob_id: string | null;
  /** The models the voice's preview is ready on (GET /voices/{id}/preview?model_id=), in the order of `profiles`. */
  preview_models: string[];
  is_owner: boolean;
  saved: boolean;
  created_at: string;
}

export function presentProfile(p: ProfileRow): VoiceProfileRecord {
  return {
    model_id: p.modelId,
    // The engine's identifier for the voice; for cloned voices on remote engines, their voice id.
    upstream_id: p.upstreamId,
    profile_version: p.profileVersion,
    source_version: p.sourceVersion,
    cached_at: p.cachedAt.toISOString(),
    expires_at: p.expiresAt ? p.expiresAt.toISOString() : null,
    status: p.status,
  };
}

export function presentVoice(v: VoiceWithRelations, orgId: string): VoiceRecord {
  const previews = readyPreviewModels(v);
  const previewModels = v.profiles.map((p) => p.modelId).filter((m) => previews.has(m));
  return {
    id: v.id,
    name: v.name,
    description: v.description,
    language: v.language,
    gender: v.gender,
    tags: Array.isArray(v.tags) ? (v.tags as string[]) : [],
    featured: v.featured,
    kind: v.kind,
    parent_voice_id: v.parentVoiceId,
    source_audio_blob_id: v.sourceAudioBlobId,
    source_transcript: v.sourceTranscript,
    source_metadata: (v.sourceMetadata as Record<string, unknown> | null) ?? null,
    source_version: v.sourceVersion,
    profiles: v.profiles.map(presentProfile),
    model_family: v.modelFamily,
    // A platform voice's preview belongs to no org: heard through GET /voices/{id}/preview only.
    sample_blob_id: v.orgId !== null && previewModels[0] ? previews.get(previewModels[0])! : null,
    preview_models: previewModels,
    is_owner: v.orgId !== null && v.orgId === orgId,
    saved: v.saves.some((s) => s.orgId === orgId),
    created_at: v.createdAt.toISOString(),
  };
}
