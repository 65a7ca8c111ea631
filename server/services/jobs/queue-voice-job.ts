// Queues the making of a voice's profile for a model (clone, localize, prepare a profile): a
// queued profile row and a job, with the new voice when the job makes one.
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { createVoice, type NewVoice } from '../voices/create-voice.ts';
import { isUsableProfile } from '../voices/usable-profile.ts';
import { admitNewVoice, takeEngineClone, type VoiceLimits } from '../voices/voice-quotas.ts';
import { admitJob, enqueueJob, type ApiJobKind, type JobKind } from './job-queue.ts';

export interface JobQueueDeps {
  prisma: Prisma;
  /** Jobs an org may have queued or running at once (SVC_MAX_JOBS_PER_ORG). */
  maxJobsPerOrg: number;
  /** Told after a job is queued, so that a worker in this process looks at once rather than at its next poll. */
  jobQueued?: () => void;
  /** The caps on the org's voices and engine clones (SVC_MAX_VOICES_PER_ORG, ...). */
  voiceLimits: VoiceLimits;
}

/** Read by the worker: what a job needs besides its voice. */
export interface VoiceJobPayload {
  modelId: string;
  mode: 'stability' | 'similarity';
  profileVersion: string;
  apiKind?: ApiJobKind;
  /** Pro clones: every clip; otherwise the voice's source clip is used. */
  blobIds?: string[];
  /** Voices without a clip (localized from a platform voice): this voice speaks a sample. */
  sampleFromVoiceId?: string;
}

export interface QueuedVoiceJob {
  job_id: string;
  voice_id: string;
  status: 'queued';
}

/**
 * `voice` is an existing voice's id, or a new voice to create with the job. Refused with
 * rate_limit_exceeded when the org has maxJobsPerOrg jobs in flight, voice_quota_exceeded when
 * a new voice would pass its voices, clone_quota_exceeded when `engineClone` (the job clones
 * through an engine that bills) would pass its clones of the day; one transaction, so a refusal
 * leaves nothing.
 */
export async function queueVoiceJob(
  deps: JobQueueDeps,
  input: { orgId: string; voice: string | NewVoice; kind: JobKind; modelId: string; payload: VoiceJobPayload; engineClone: boolean },
): Promise<QueuedVoiceJob> {
  const queued = await deps.prisma.$transaction(async (tx) => {
    await admitJob(tx, input.orgId, deps.maxJobsPerOrg);
    if (typeof input.voice !== 'string') await admitNewVoice(tx, input.orgId, deps.voiceLimits);
    if (input.engineClone) await takeEngineClone(tx, input.orgId, input.modelId, deps.voiceLimits);
    const voiceId = typeof input.voice === 'string' ? input.voice : await createVoice(tx, input.voice);
    const where = { voiceId_modelId: { voiceId, modelId: input.modelId } };
    const existing = await tx.voiceProfile.findUnique({ where });
    // A ready, unexpired profile keeps serving until the new one replaces it.
    if (!existing || !isUsableProfile(existing)) {
      await tx.voiceProfile.upsert({
        where,
        create: { id: newId('vpr'), voiceId, modelId: input.modelId, upstreamId: '', status: 'queued', profileVersion: input.payload.profileVersion },
        update: { status: 'queued', error: null },
      });
    }
    const job = await enqueueJob(tx, { orgId: input.orgId, kind: input.kind, voiceId, payload: input.payload as unknown as Record<string, unknown> });
    return { job_id: job.id, voice_id: voiceId, status: 'queued' as const };
  });
  deps.jobQueued?.();
  return queued;
}
