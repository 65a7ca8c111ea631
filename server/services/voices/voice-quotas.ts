// The caps on an org's voices and on its clones through engines that bill (SVC_MAX_VOICES_PER_ORG,
// SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY; trial orgs SVC_TRIAL_MAX_ENGINE_CLONES_PER_ORG_PER_DAY):
// a voice cloned through Cartesia, ElevenLabs or any engine outside this process may be paid for
// and takes one of the operator's voice slots at the engine. Both are checked in the transaction
// that makes the voice or queues its job, after the org's row is write-locked (lockOrg, or
// admitJob), so concurrent requests of one org, from any gateway, count one after another
// (PostgreSQL's row lock; SQLite has one writer) and the caps are exact.
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import type { Tx } from '../jobs/job-queue.ts';

export interface VoiceLimits {
  maxVoicesPerOrg: number;
  /** Clones through engines that bill in any 24 hours, per org. */
  maxEngineClonesPerDay: number;
  trialMaxEngineClonesPerDay: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Write-locks the org's row until the transaction ends. */
export async function lockOrg(tx: Tx, orgId: string): Promise<void> {
  await tx.org.updateMany({ where: { id: orgId }, data: { updatedAt: new Date() } });
}

/** Refuses (403 voice_quota_exceeded) a new voice of an org that has as many as it may. */
export async function admitNewVoice(tx: Tx, orgId: string, limits: VoiceLimits): Promise<void> {
  const voices = await tx.voice.count({ where: { orgId, deletedAt: null } });
  if (voices >= limits.maxVoicesPerOrg) {
    throw new ServiceError(
      'voice_quota_exceeded',
      `This organization has ${voices} voices, the most it may have (${limits.maxVoicesPerOrg}); delete voices it no longer needs.`,
    );
  }
}

/**
 * Records a clone through an engine that bills, or refuses it (429 clone_quota_exceeded) when the
 * org made as many in the last 24 hours as it may; Retry-After: until the oldest of them is a day old.
 */
export async function takeEngineClone(tx: Tx, orgId: string, modelId: string, limits: VoiceLimits, now = new Date()): Promise<void> {
  // Clones older than a day count no more: dropped, so the org's rows stay few.
  await tx.engineClone.deleteMany({ where: { orgId, createdAt: { lte: new Date(now.getTime() - DAY_MS) } } });
  const org = await tx.org.findUnique({ where: { id: orgId }, select: { isTrial: true } });
  const max = org?.isTrial ? limits.trialMaxEngineClonesPerDay : limits.maxEngineClonesPerDay;
  const made = await tx.engineClone.count({ where: { orgId } });
  if (made >= max) {
    const oldest = await tx.engineClone.findFirst({ where: { orgId }, orderBy: { createdAt: 'asc' }, select: { createdAt: true } });
    const retryAfterSeconds = oldest ? Math.max(1, Math.ceil((oldest.createdAt.getTime() + DAY_MS - now.getTime()) / 1000)) : undefined;
    throw new ServiceError(
      'clone_quota_exceeded',
      max === 0
        ? `This organization may not clone voices through '${modelId}', whose engine bills${org?.isTrial ? ' (trial organizations may not)' : ''}; clone with a model the gateway runs itself.`
        : `This organization cloned ${made} voices through engines that bill in the last 24 hours, the most it may (${max}); try again later, or clone with a model the gateway runs itself.`,
      'model_id',
      { retryAfterSeconds },
    );
  }
  await tx.engineClone.create({ data: { id: newId('ecl'), orgId, modelId, createdAt: now } });
}
