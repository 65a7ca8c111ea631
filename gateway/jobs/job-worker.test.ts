// A job that was running when its process died is finished by the next process: gateway A
// (no worker) queues a profile job, a worker claims it and dies; gateway B starts on the same
// database, reclaims the job when the dead worker's lease runs out, and completes it. With the
// queue empty B's poll backs off, and still finds the next job A queues.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../server/config/env.ts';
import { claimNextJob } from '../../server/services/jobs/job-queue.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startTtsGateway } from '../../test/support/tts-routes.ts';
import { until } from '../../test/support/poll.ts';
import { call, cloneMultipart, speak, waitForJob } from '../../test/support/voice-routes.ts';
import { createGatewayRuntime, type GatewayRuntime } from '../runtime.ts';
import { IDLE_POLL_BACKOFF, type JobWorker } from './job-worker.ts';

let a: GatewayHarness;
let b: GatewayRuntime | undefined;

beforeAll(async () => {
  a = await startTtsGateway({ env: { SVC_WORKER: 'off' } });
}, 60_000);

afterAll(async () => {
  await b?.close();
  await a?.close();
});

it('finishes a job whose worker died, after a restart', async () => {
  const clone = await cloneMultipart(a, speak('flite', 'awb'), { name: 'Restart', model_id: 'local-flite' });
  expect(clone.status).toBe(201);
  const queued = await call(a, 'POST', `/voices/${clone.body.id}/profiles`, { model_id: 'local-espeak' });
  expect(queued.status).toBe(202);
  // No worker in A: the job waits. A worker claims it and dies (never renews, never finishes).
  expect((await call(a, 'GET', `/jobs/${queued.body.job_id}`)).body.status).toBe('queued');
  const claimed = await claimNextJob(a.testDb.db.prisma, 'worker-that-died', 300);
  expect(claimed?.id).toBe(queued.body.job_id);
  expect((await call(a, 'GET', `/jobs/${queued.body.job_id}`)).body.status).toBe('running');

  const config = loadConfig({
    SVC_DATA_DIR: a.testDb.dataDir,
    DATABASE_URL: a.testDb.url,
    LOG_LEVEL: 'silent',
    SVC_MODELS_FILE: '/nonexistent',
    SVC_JOB_POLL_MS: '50',
    SVC_JOB_LEASE_SECONDS: '5',
  });
  b = await createGatewayRuntime(config, { logger: false });
  await b.ctx.health.checkAll();
  const job = await waitForJob(a, queued.body.job_id);
  expect(job).toMatchObject({ status: 'succeeded', result: { voice_id: clone.body.id, profile: { model_id: 'local-espeak', status: 'ready' } } });
  const row = await a.testDb.db.prisma.job.findUniqueOrThrow({ where: { id: queued.body.job_id } });
  expect(row.attempts).toBe(2);
  expect(row.lockedBy).toBeNull();
});

it('backs its poll off while the queue is empty, and still finds a job queued by another process', async () => {
  const worker = b!.ctx.jobs as JobWorker;
  // B polls every 50 ms at most; empty polls double the wait up to the cap.
  await until('the poll to back off to its cap', () => (worker.pollDelayMs === 50 * IDLE_POLL_BACKOFF ? true : undefined), { timeoutMs: 10_000 });
  const clone = await cloneMultipart(a, speak('flite', 'awb'), { name: 'Backed off', model_id: 'local-flite' });
  expect(clone.status).toBe(201);
  // Queued in A, which has no worker and cannot tell B: B's next poll finds it.
  const queued = await call(a, 'POST', `/voices/${clone.body.id}/profiles`, { model_id: 'local-espeak' });
  expect(queued.status).toBe(202);
  const job = await waitForJob(a, queued.body.job_id);
  expect(job).toMatchObject({ status: 'succeeded', result: { voice_id: clone.body.id } });
  const row = await a.testDb.db.prisma.job.findUniqueOrThrow({ where: { id: queued.body.job_id } });
  expect(row.attempts).toBe(1);
});
