// The job queue on a real database (SQLite, or PostgreSQL with TEST_DB=postgresql): racing
// workers claim each job exactly once; a job whose worker died (its lease ran out) is claimed
// again and the dead worker can no longer finish it; after MAX_JOB_ATTEMPTS deaths it fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { createOrg } from '../orgs/create-org.ts';
import { claimNextJob, completeJob, enqueueJob, failJob, getJob, MAX_JOB_ATTEMPTS, presentJob, renewJobLease, retryJobLater } from './job-queue.ts';

let t: TestDatabase;
let orgId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  orgId = (await createOrg(t.db, { name: 'jobs', creditsMicros: 0n })).id;
});
afterAll(async () => t?.drop());

/** The lease of the workers that die: the tests claim at times they choose, so no test waits for one to run out. */
const LEASE_MS = 1_000;

const enqueue = () => enqueueJob(t.db.prisma, { orgId, kind: 'instant_clone', voiceId: null, payload: { modelId: 'm' } });

describe('job queue', () => {
  it('gives each job to exactly one of several racing workers', async () => {
    await t.db.prisma.job.deleteMany();
    const ids = new Set<string>();
    for (let i = 0; i < 24; i++) ids.add((await enqueue()).id);
    const claims: string[] = [];
    await Promise.all(
      ['w1', 'w2', 'w3', 'w4'].map(async (worker) => {
        for (;;) {
          const job = await claimNextJob(t.db.prisma, worker, 60_000);
          if (!job) {
            if ((await t.db.prisma.job.count({ where: { status: 'queued' } })) === 0) return;
            continue;
          }
          expect(job.lockedBy).toBe(worker);
          claims.push(job.id);
          expect(await completeJob(t.db.prisma, job.id, worker, { ok: true })).toBe(true);
        }
      }),
    );
    expect(claims.length).toBe(ids.size);
    expect(new Set(claims)).toEqual(ids);
    expect(await t.db.prisma.job.count({ where: { status: 'succeeded', attempts: 1 } })).toBe(ids.size);
  });

  it('re-runs a job whose worker died, and the dead worker cannot finish it', async () => {
    await t.db.prisma.job.deleteMany();
    const job = await enqueue();
    const start = Date.now();
    const first = await claimNextJob(t.db.prisma, 'dead', LEASE_MS, new Date(start));
    expect(first?.id).toBe(job.id);
    expect((await getJob(t.db.prisma, orgId, job.id)).status).toBe('running');
    expect(await claimNextJob(t.db.prisma, 'alive', 60_000, new Date(start + LEASE_MS))).toBeNull(); // not while the dead worker's lease holds
    const second = await claimNextJob(t.db.prisma, 'alive', 60_000, new Date(start + LEASE_MS + 1));
    expect(second).toMatchObject({ id: job.id, lockedBy: 'alive', attempts: 2 });
    expect(await renewJobLease(t.db.prisma, job.id, 'dead', 60_000)).toBe(false);
    expect(await completeJob(t.db.prisma, job.id, 'dead', { from: 'dead' })).toBe(false);
    expect(await completeJob(t.db.prisma, job.id, 'alive', { from: 'alive' })).toBe(true);
    const done = await getJob(t.db.prisma, orgId, job.id);
    expect(done).toMatchObject({ status: 'succeeded', result: { from: 'alive' } });
    expect(done.error).toBeUndefined();
  });

  it(`fails a job with worker_lost after ${MAX_JOB_ATTEMPTS} dead workers instead of running it forever`, async () => {
    await t.db.prisma.job.deleteMany();
    const job = await enqueue();
    // Each worker claims it once the lease before it has run out, and dies.
    let at = Date.now();
    for (let i = 0; i < MAX_JOB_ATTEMPTS; i++) {
      expect((await claimNextJob(t.db.prisma, `dead-${i}`, LEASE_MS, new Date(at)))?.id).toBe(job.id);
      at += LEASE_MS + 1;
    }
    expect(await claimNextJob(t.db.prisma, 'late', 60_000, new Date(at))).toBeNull();
    const failed = await getJob(t.db.prisma, orgId, job.id);
    expect(failed).toMatchObject({ status: 'failed', error: 'worker_lost' });
    expect(failed.result).toBeUndefined();
  });

  it('retries later and fails with an error string; result only on success, error only on failure', async () => {
    await t.db.prisma.job.deleteMany();
    const job = await enqueue();
    const claimed = (await claimNextJob(t.db.prisma, 'w', 60_000))!;
    expect(await retryJobLater(t.db.prisma, job.id, 'w', 60_000, 'model_offline')).toBe(true);
    const waiting = await getJob(t.db.prisma, orgId, job.id);
    expect(waiting.status).toBe('queued');
    expect(waiting.error).toBeUndefined();
    expect(await claimNextJob(t.db.prisma, 'w', 60_000)).toBeNull(); // not due yet
    await t.db.prisma.job.update({ where: { id: job.id }, data: { runAfter: new Date(0) } });
    const again = (await claimNextJob(t.db.prisma, 'w', 60_000))!;
    expect(await failJob(t.db.prisma, again, 'w', 'model_offline')).toBe(true);
    const failed = presentJob(await t.db.prisma.job.findUniqueOrThrow({ where: { id: claimed.id } }));
    expect(failed).toMatchObject({ status: 'failed', error: 'model_offline', kind: 'instant_clone', operation: 'clone' });
    expect('result' in failed).toBe(false);
  });

  it('keeps jobs to their org', async () => {
    const job = await enqueue();
    const stranger = (await createOrg(t.db, { name: 'stranger', creditsMicros: 0n })).id;
    await expect(getJob(t.db.prisma, stranger, job.id)).rejects.toMatchObject({ code: 'job_not_found' });
  });
});
