// The job queue on a real database (SQLite, or PostgreSQL with TEST_DB=postgresql): racing
// workers claim each job exactly once; a job whose worker died (its lease ran out) is claimed
// again and the dead worker can no longer finish it; after MAX_JOB_ATTEMPTS deaths it fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { newId } from '../../db/ids.ts';
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

/** While on, the database refuses to mark any voice profile failed (a trigger, in either dialect). */
async function refuseProfileFailures(on: boolean): Promise<void> {
  const run = (sql: string) => t.db.prisma.$executeRawUnsafe(sql);
  if (t.dialect === 'sqlite') {
    await run(
      on
        ? `CREATE TRIGGER refuse_profile_failure BEFORE UPDATE ON "VoiceProfile" WHEN NEW.status = 'failed' BEGIN SELECT RAISE(ABORT, 'refused by test'); END`
        : 'DROP TRIGGER refuse_profile_failure',
    );
    return;
  }
  if (!on) {
    await run('DROP TRIGGER refuse_profile_failure ON "VoiceProfile"');
    await run('DROP FUNCTION refuse_profile_failure()');
    return;
  }
  await run(`CREATE FUNCTION refuse_profile_failure() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by test'; END $$`);
  await run(
    `CREATE TRIGGER refuse_profile_failure BEFORE UPDATE ON "VoiceProfile" FOR EACH ROW WHEN (NEW.status = 'failed') EXECUTE FUNCTION refuse_profile_failure()`,
  );
}

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

  it("fails the job and its voice's queued profile in one transaction: neither is failed without the other", async () => {
    await t.db.prisma.job.deleteMany();
    const modelId = 'm-profile';
    await t.db.prisma.model.upsert({ where: { id: modelId }, create: { id: modelId, modality: 'tts' }, update: {} });
    const voice = await t.db.prisma.voice.create({ data: { id: newId('voice'), orgId, name: 'v', tags: [] } });
    await t.db.prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: voice.id, modelId, upstreamId: '', status: 'queued' } });
    const job = await enqueueJob(t.db.prisma, { orgId, kind: 'instant_clone', voiceId: voice.id, payload: { modelId } });
    const claimed = (await claimNextJob(t.db.prisma, 'w', 60_000))!;
    expect(claimed.id).toBe(job.id);
    const profileStatus = async () => (await t.db.prisma.voiceProfile.findFirstOrThrow({ where: { voiceId: voice.id } })).status;
    // The database refuses the profile's update (as a full disk or a lost connection would):
    // the job's failure goes with it, so no reader ever sees the job failed and the profile queued.
    await refuseProfileFailures(true);
    try {
      await expect(failJob(t.db.prisma, claimed, 'w', 'model_offline')).rejects.toThrow();
    } finally {
      await refuseProfileFailures(false);
    }
    expect((await getJob(t.db.prisma, orgId, job.id)).status).toBe('running');
    expect(await profileStatus()).toBe('queued');
    expect(await failJob(t.db.prisma, claimed, 'w', 'model_offline')).toBe(true);
    expect(await getJob(t.db.prisma, orgId, job.id)).toMatchObject({ status: 'failed', error: 'model_offline' });
    expect(await profileStatus()).toBe('failed');
  });

  it('keeps jobs to their org', async () => {
    const job = await enqueue();
    const stranger = (await createOrg(t.db, { name: 'stranger', creditsMicros: 0n })).id;
    await expect(getJob(t.db.prisma, stranger, job.id)).rejects.toMatchObject({ code: 'job_not_found' });
  });
});
