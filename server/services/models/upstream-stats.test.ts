// Counts from several gateways add up per minute; the health view shows the rate over 15 min.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { listModelHealth } from './list-model-health.ts';
import { upsertModel } from './upsert-model.ts';
import { recentUpstreamCounts, UpstreamStatsRecorder } from './upstream-stats.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';

let t: TestDatabase;
let upstreamId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  await upsertModel(t.db.prisma, checkProtocol, { id: 'm', modality: 'llm', prices: {}, upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' } });
  upstreamId = (await t.db.prisma.upstream.findFirstOrThrow({ where: { modelId: 'm' } })).id;
});
afterAll(async () => t?.drop());

it('adds the counts of several replicas, per minute, and reports the recent error rate', async () => {
  const now = Date.now();
  const a = new UpstreamStatsRecorder(t.db.prisma, () => now);
  const b = new UpstreamStatsRecorder(t.db.prisma, () => now);
  for (let i = 0; i < 30; i++) a.record(upstreamId, i % 10 !== 0); // 3 failures
  for (let i = 0; i < 10; i++) b.record(upstreamId, i !== 0); // 1 failure
  await Promise.all([a.flush(), b.flush()]);
  a.record(upstreamId, false);
  await a.flush();
  expect(await recentUpstreamCounts(t.db.prisma, 15 * 60_000, now)).toEqual(new Map([[upstreamId, { requests: 41, errors: 5 }]]));
  const [model] = await listModelHealth(t.db.prisma);
  expect(model!.upstreams[0]).toMatchObject({ recentRequests: 41, recentErrors: 5, errorRate: 5 / 41 });

  // Old minutes fall out of the window, and out of the table after a week.
  const old = new UpstreamStatsRecorder(t.db.prisma, () => now - 8 * 24 * 3600_000);
  old.record(upstreamId, false);
  await old.flush();
  expect((await recentUpstreamCounts(t.db.prisma, 15 * 60_000, now)).get(upstreamId)).toEqual({ requests: 41, errors: 5 });
  await a.flush();
  expect(await t.db.prisma.upstreamStat.count({ where: { minute: { lt: new Date(now - 7 * 24 * 3600_000) } } })).toBe(0);
});
