// Voice jobs in flight per org (SVC_MAX_JOBS_PER_ORG): clone, pro-clone, localize and profile
// jobs cost the worker real time and are free, so an org may have only so many queued or
// running. Past it: 429 rate_limit_exceeded with Retry-After, and nothing created (no voice,
// no job, no orphan clip). Counted in the database: two gateways on one database share the cap.
// The worker is off here, so jobs stay queued until the test finishes them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config/env.ts';
import { claimNextJob, completeJob } from '../../server/services/jobs/job-queue.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { deadUrl, startTtsGateway } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart, otherOrg, speak, uploadBlob, type OtherOrg } from '../../test/support/voice-routes.ts';
import { createGatewayRuntime, type GatewayRuntime } from '../runtime.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const MAX_JOBS = 3;
const env = { SVC_WORKER: 'off', SVC_MAX_JOBS_PER_ORG: String(MAX_JOBS) };

let h: GatewayHarness;
let replica: GatewayRuntime;
let replicaUrl: string;
let org: OtherOrg;
let clip: Buffer;

beforeAll(async () => {
  h = await startTtsGateway({ env });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'xtts-offline',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: await deadUrl(), protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  // A second gateway on the same database, as another replica would be.
  replica = await createGatewayRuntime(
    loadConfig({
      SVC_DATA_DIR: h.testDb.dataDir,
      DATABASE_URL: h.testDb.url,
      LOG_LEVEL: 'silent',
      SVC_MODELS_FILE: '/nonexistent',
      SVC_HEALTH_CHECK_SECONDS: '3600',
      ...env,
    }),
    { logger: false },
  );
  replicaUrl = await replica.app.listen({ host: '127.0.0.1', port: 0 });
  await replica.ctx.registry.refresh();
  await replica.ctx.health.checkAll();
  org = await otherOrg(h);
  clip = speak('flite', 'rms');
}, 60_000);

afterAll(async () => {
  await replica?.close();
  await h?.close();
});

function localize(url: string, headers: Record<string, string>) {
  return fetch(`${url}/voices/flite-slt/localize`, { method: 'POST', headers, body: JSON.stringify({ language: 'fr', model_id: 'local-espeak' }) });
}

async function inFlight(orgId: string) {
  const prisma = h.testDb.db.prisma;
  return {
    jobs: await prisma.job.count({ where: { orgId, status: { in: ['queued', 'running'] } } }),
    voices: await prisma.voice.count({ where: { orgId } }),
  };
}

async function expect429(res: Response | { status: number; body: any; res: Response }): Promise<void> {
  const r = res instanceof Response ? { status: res.status, body: await res.json(), res } : res;
  expect(r.status).toBe(429);
  expect(r.body.error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error', param: null });
  expect(r.res.headers.get('retry-after')).toBe('5');
}

describe('voice jobs in flight per org', () => {
  it('racing requests on two gateways: exactly the cap is queued, the rest 429 with Retry-After, nothing left behind', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => localize(i % 2 ? replicaUrl : h.url, org.headers)));
    const accepted = results.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(MAX_JOBS);
    for (const r of results.filter((r) => r.status !== 202)) await expect429(r);
    expect(await inFlight(org.orgId)).toEqual({ jobs: MAX_JOBS, voices: MAX_JOBS });
    // Another org has its own allowance.
    expect((await localize(h.url, h.headers)).status).toBe(202);
  });

  it('every job-making route is refused at the cap: pro-clone, profiles, and a clone that would queue (its clip is not kept)', async () => {
    const before = await inFlight(org.orgId);
    expect(before.jobs).toBe(MAX_JOBS);
    const blobs = [];
    for (let i = 0; i < 3; i++) blobs.push((await uploadBlob(h, clip, org.headers)).body.id);
    await expect429(await call(h, 'POST', '/voices/pro-clone', { name: 'Pro', blob_ids: blobs, model_id: 'local-flite' }, org.headers));
    const owned = (await h.testDb.db.prisma.voice.findFirstOrThrow({ where: { orgId: org.orgId } })).id;
    await expect429(await call(h, 'POST', `/voices/${owned}/profiles`, { model_id: 'local-flite' }, org.headers));
    const blobBytes = async () => (await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: org.orgId } })).blobBytes;
    const bytesBefore = await blobBytes();
    const clone = await cloneMultipart(h, clip, { name: 'Queued clone', model_id: 'xtts-offline' }, org.headers);
    expect(clone.status).toBe(429);
    expect(clone.body.error).toMatchObject({ code: 'rate_limit_exceeded' });
    expect(await blobBytes()).toBe(bytesBefore);
    expect(await h.testDb.db.prisma.blob.count({ where: { orgId: org.orgId, deletedAt: null } })).toBe(3);
    expect(await inFlight(org.orgId)).toEqual(before);
  });

  it('a finished job makes room for the next', async () => {
    const prisma = h.testDb.db.prisma;
    // Finish one of the org's jobs as a worker would.
    for (;;) {
      const job = await claimNextJob(prisma, 'test-worker', 60_000);
      expect(job).not.toBeNull();
      await completeJob(prisma, job!.id, 'test-worker', {});
      if (job!.orgId === org.orgId) break;
    }
    expect((await inFlight(org.orgId)).jobs).toBe(MAX_JOBS - 1);
    expect((await localize(replicaUrl, org.headers)).status).toBe(202);
    await expect429(await localize(h.url, org.headers));
  });
});
