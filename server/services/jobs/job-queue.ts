// The async job queue, in the database so that it survives restarts and is shared by every
// worker on PostgreSQL. A worker claims a job by a conditional update (exactly one of several
// racing workers sees its update succeed) and holds a lease it renews while it works; a job
// whose lease ran out (its worker died) is claimed again, up to MAX_JOB_ATTEMPTS, then failed.
// Never stuck in `running`.
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';

export const MAX_JOB_ATTEMPTS = 3;

export type JobKind = 'instant_clone' | 'pro_clone' | 'localize' | 'prepare_profile' | 'delete_engine_copies';
/** Housekeeping the org did not ask for as such: never listed, never counted against its jobs in flight. */
const HOUSEKEEPING: JobKind[] = ['delete_engine_copies'];
const listed = { kind: { notIn: HOUSEKEEPING } };
/** The spec's job kinds; profile preparation reports the kind of work it does on the voice. */
export type ApiJobKind = 'instant_clone' | 'pro_clone' | 'localize';

type JobRow = NonNullable<Awaited<ReturnType<Prisma['job']['findFirst']>>>;
type JobWhere = NonNullable<Parameters<Prisma['job']['updateMany']>[0]>['where'];
export type Job = JobRow;

export interface JobRecord {
  id: string;
  object: 'job';
  kind: ApiJobKind;
  /** What the job does: clone a new voice, localize one, or prepare a profile for a model. */
  operation: 'clone' | 'localize' | 'prepare_profile';
  status: 'queued' | 'running' | 'succeeded' | 'failed';
  voice_id: string | null;
  model_id: string | null;
  created_at: string;
  updated_at: string;
  result?: Record<string, unknown>;
  error?: string;
}

/** A job the org asked for (housekeeping jobs are never presented). */
export function presentJob(job: JobRow): JobRecord {
  const input = (job.input ?? {}) as { apiKind?: ApiJobKind; modelId?: string };
  const kind: ApiJobKind = job.kind === 'prepare_profile' || job.kind === 'delete_engine_copies' ? (input.apiKind ?? 'instant_clone') : job.kind;
  const operation = job.kind === 'prepare_profile' ? 'prepare_profile' : job.kind === 'localize' ? 'localize' : 'clone';
  return {
    id: job.id,
    object: 'job',
    kind,
    operation,
    status: job.status,
    voice_id: job.voiceId,
    model_id: input.modelId ?? null,
    created_at: job.createdAt.toISOString(),
    updated_at: job.updatedAt.toISOString(),
    // The spec: result only on success, error only on failure.
    ...(job.status === 'succeeded' && job.result ? { result: job.result as Record<string, unknown> } : {}),
    ...(job.status === 'failed' ? { error: job.error ?? 'internal_error' } : {}),
  };
}

export type Tx = Parameters<Parameters<Prisma['$transaction']>[0]>[0];

/** What a refused job is told to wait before trying again: about one job's run. */
export const JOB_RETRY_AFTER_SECONDS = 5;

export async function enqueueJob(
  prisma: Prisma | Tx,
  input: { orgId: string; kind: JobKind; voiceId: string | null; payload: Record<string, unknown>; runAfter?: Date },
): Promise<JobRow> {
  return prisma.job.create({
    data: {
      id: newId('job'),
      orgId: input.orgId,
      kind: input.kind,
      voiceId: input.voiceId,
      input: input.payload as object,
      runAfter: input.runAfter ?? new Date(),
    },
  });
}

/**
 * Refuses a new job (rate_limit_exceeded, retry after JOB_RETRY_AFTER_SECONDS) when the org already has
 * `maxInFlight` jobs queued or running. Call it first in the transaction that enqueues: it
 * write-locks the org's row, so concurrent enqueues of one org, from any gateway, count one
 * after another (PostgreSQL's row lock; SQLite has one writer) and the cap is exact.
 */
export async function admitJob(tx: Tx, orgId: string, maxInFlight: number): Promise<void> {
  await tx.org.updateMany({ where: { id: orgId }, data: { updatedAt: new Date() } });
  const inFlight = await tx.job.count({ where: { orgId, status: { in: ['queued', 'running'] }, ...listed } });
  if (inFlight >= maxInFlight) {
    throw new ServiceError(
      'rate_limit_exceeded',
      `This organization has ${inFlight} voice jobs queued or running, the most it may have at once (${maxInFlight}); wait for one to finish (GET /jobs) and try again.`,
      null,
      { retryAfterSeconds: JOB_RETRY_AFTER_SECONDS },
    );
  }
}

/** A job of the org; another org's job is indistinguishable from a missing one. */
export async function getJob(prisma: Prisma, orgId: string, jobId: string): Promise<JobRecord> {
  const job = await prisma.job.findFirst({ where: { id: jobId, orgId, ...listed } });
  if (!job) throw new ServiceError('job_not_found', `No job with id '${jobId}' in this organization.`, 'id');
  return presentJob(job);
}

export async function listJobs(prisma: Prisma, orgId: string, options: { limit: number; voiceId?: string }): Promise<JobRecord[]> {
  const jobs = await prisma.job.findMany({
    where: { orgId, ...listed, ...(options.voiceId ? { voiceId: options.voiceId } : {}) },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: options.limit,
  });
  return jobs.map(presentJob);
}

/**
 * Claims the next runnable job for `workerId`: a queued job due now, or a running job whose
 * worker's lease expired. Returns null when there is none (or others won every race).
 */
export async function claimNextJob(prisma: Prisma, workerId: string, leaseMs: number, now = new Date()): Promise<JobRow | null> {
  const candidates = await prisma.job.findMany({
    where: {
      OR: [
        { status: 'queued', runAfter: { lte: now } },
        { status: 'running', lockedUntil: { lt: now } },
      ],
    },
    orderBy: [{ runAfter: 'asc' }, { id: 'asc' }],
    take: 8,
  });
  for (const job of candidates) {
    if (job.status === 'running' && job.attempts >= MAX_JOB_ATTEMPTS) {
      // Its worker died on the last allowed attempt: fail it rather than run it again.
      await failJobWhere(prisma, job, { id: job.id, status: 'running', lockedBy: job.lockedBy, lockedUntil: job.lockedUntil }, 'worker_lost');
      continue;
    }
    // The WHERE repeats what we saw: on PostgreSQL the row lock makes a racing worker's update
    // re-check it and match nothing; SQLite serializes writers.
    const claimed = await prisma.job.updateMany({
      where:
        job.status === 'queued' ? { id: job.id, status: 'queued' } : { id: job.id, status: 'running', lockedBy: job.lockedBy, lockedUntil: job.lockedUntil },
      data: { status: 'running', lockedBy: workerId, lockedUntil: new Date(now.getTime() + leaseMs), attempts: { increment: 1 } },
    });
    if (claimed.count === 1) return prisma.job.findUnique({ where: { id: job.id } });
  }
  return null;
}

/** Extends the lease; false when the job is no longer this worker's (it should stop). */
export async function renewJobLease(prisma: Prisma, jobId: string, workerId: string, leaseMs: number): Promise<boolean> {
  const r = await prisma.job.updateMany({ where: { id: jobId, lockedBy: workerId, status: 'running' }, data: { lockedUntil: new Date(Date.now() + leaseMs) } });
  return r.count === 1;
}

export async function completeJob(prisma: Prisma, jobId: string, workerId: string, result: Record<string, unknown>): Promise<boolean> {
  const r = await prisma.job.updateMany({
    where: { id: jobId, lockedBy: workerId, status: 'running' },
    data: { status: 'succeeded', result: result as object, error: null, lockedBy: null, lockedUntil: null },
  });
  return r.count === 1;
}

export function failJob(prisma: Prisma, job: JobRow, workerId: string, error: string): Promise<boolean> {
  return failJobWhere(prisma, job, { id: job.id, lockedBy: workerId, status: 'running' }, error);
}

/** Puts the job back in the queue to run after `delayMs` (an engine offline, for instance). */
export async function retryJobLater(prisma: Prisma, jobId: string, workerId: string, delayMs: number, reason: string): Promise<boolean> {
  const r = await prisma.job.updateMany({
    where: { id: jobId, lockedBy: workerId, status: 'running' },
    data: { status: 'queued', runAfter: new Date(Date.now() + delayMs), lockedBy: null, lockedUntil: null, error: reason },
  });
  return r.count === 1;
}

/**
 * Fails the job if it still matches `where`, and its voice's queued profile with it, so TTS says
 * why; one transaction, so whoever reads the failed job reads the failed profile too.
 */
async function failJobWhere(prisma: Prisma, job: JobRow, where: JobWhere, error: string): Promise<boolean> {
  const modelId = (job.input as { modelId?: string } | null)?.modelId;
  return prisma.$transaction(async (tx) => {
    const r = await tx.job.updateMany({ where, data: { status: 'failed', error, lockedBy: null, lockedUntil: null } });
    if (r.count === 1 && job.voiceId && modelId) {
      await tx.voiceProfile.updateMany({ where: { voiceId: job.voiceId, modelId, status: 'queued' }, data: { status: 'failed', error } });
    }
    return r.count === 1;
  });
}
