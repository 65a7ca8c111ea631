import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/** Where a voice is visible: platform voices (no org) and the caller's org's own, not deleted. */
export const visibleVoiceWhere = (orgId: string) => ({ deletedAt: null, OR: [{ orgId: null }, { orgId }] });

/**
 * The voice's ready, unexpired profile for a model, as the engine needs it.
 * 404 voice_not_found for voices the org cannot see; 409 voice_profile_missing otherwise.
 */
interface ProfileRow {
  id: string;
  language: string;
  upstreamId: string | null;
  status: string | null;
  params: unknown;
  expiresAt: Date | string | number | null;
}

export async function resolveVoiceProfile(prisma: Prisma, input: { orgId: string; voiceId: string; modelId: string }) {
  // One indexed join, on every synthesis before the engine is called: a third of what Prisma's
  // nested read (two queries) takes. Raw values differ by database (SQLite: JSON and times as
  // text; PostgreSQL: objects and Dates), read alike below.
  const [voice] = await prisma.$queryRaw<ProfileRow[]>`
    SELECT v."id", v."language", p."upstreamId", p."status", p."params", p."expiresAt"
      FROM "Voice" v LEFT JOIN "VoiceProfile" p ON p."voiceId" = v."id" AND p."modelId" = ${input.modelId}
     WHERE v."id" = ${input.voiceId} AND v."deletedAt" IS NULL AND (v."orgId" IS NULL OR v."orgId" = ${input.orgId})
     LIMIT 1`;
  if (!voice) throw new ServiceError('voice_not_found', `No voice with id '${input.voiceId}' is visible to this organization.`, 'voice.id');
  const expired = voice.expiresAt !== null && utcTime(voice.expiresAt) <= Date.now();
  if (voice.upstreamId === null || voice.status !== 'ready' || expired) {
    throw new ServiceError(
      'voice_profile_missing',
      `Voice '${voice.id}' has no ready profile for model '${input.modelId}'. Prepare one with POST /voices/${voice.id}/profiles {"model_id":"${input.modelId}"}.`,
      'voice.id',
    );
  }
  const params = typeof voice.params === 'string' ? (JSON.parse(voice.params) as unknown) : voice.params;
  return { voiceId: voice.id, language: voice.language, upstreamId: voice.upstreamId, params: (params as Record<string, unknown> | null) ?? null };
}

/** A stored timestamp read raw: a Date, epoch milliseconds, or text in UTC with or without its zone. */
function utcTime(value: Date | string | number): number {
  if (typeof value !== 'string') return new Date(value).getTime();
  return new Date(/(Z|[+-]\d\d:?\d\d)$/i.test(value) ? value : `${value.replace(' ', 'T')}Z`).getTime();
}
