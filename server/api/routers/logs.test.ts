// The logs router over a real database (SQLite, or PostgreSQL with TEST_DB=postgresql), rows
// written as the gateway writes them (the request-log store): a member sees the org it acts for
// and nothing of another org, whatever it asks; the session detail with its turns; exports;
// counts and latency; the content and retention settings, which only owners change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newTimeOrderedId } from '../../db/ids.ts';
import { openRequestLogStore } from '../../db/request-log-store-open.ts';
import type { RequestLogRow, RequestLogTurnRow } from '../../db/request-log-store.ts';
import { createApiKey } from '../../services/keys/create-api-key.ts';
import { upsertModel } from '../../services/models/upsert-model.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let admin: TestUser;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let aliceKey: string;
let bobKey: string;
const rows: Record<string, RequestLogRow> = {};

function row(orgId: string, apiKeyId: string, over: Partial<RequestLogRow>): RequestLogRow {
  return {
    id: newTimeOrderedId('log'),
    orgId,
    requestId: newTimeOrderedId('req'),
    apiKeyId,
    apiKeyName: 'k',
    kind: 'http',
    method: 'POST',
    route: '/v1/chat/completions',
    modelId: 'chat-model',
    status: 200,
    errorCode: null,
    upstreams: null,
    servedBy: null,
    failoverReason: null,
    userAgent: 'curl/8',
    traceId: null,
    ttfbMs: 20,
    firstAudioMs: null,
    firstAudibleMs: null,
    totalMs: 40,
    inputTokens: 3,
    outputTokens: 4,
    characters: 0,
    audioMillis: 0,
    costMicros: 12n,
    requestContent: null,
    responseContent: null,
    createdAt: Date.now(),
    ...over,
  };
}

const turn = (requestLogId: string, orgId: string, turnIndex: number): RequestLogTurnRow => ({
  id: newTimeOrderedId('turn'),
  requestLogId,
  orgId,
  turnIndex,
  startMs: turnIndex * 4000,
  speechEndMs: 800,
  endOfTurnMs: 1100,
  llmFirstTokenMs: 1400,
  ttsFirstAudioMs: 1600,
  firstAudibleMs: 1650,
  bargeInMs: null,
  failoverReason: null,
  userText: null,
  assistantText: null,
  createdAt: Date.now(),
});

beforeAll(async () => {
  h = await createApiHarness();
  admin = await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
  carol = await h.signUpUser('carol@example.com');
  await alice.caller.orgs.addMember({ email: carol.user.email });
  aliceKey = (await createApiKey(h.db.prisma, { orgId: alice.orgId, name: 'alice key' })).id;
  bobKey = (await createApiKey(h.db.prisma, { orgId: bob.orgId, name: 'bob key' })).id;
  const t = Date.now();
  rows.aliceOk = row(alice.orgId, aliceKey, { createdAt: t - 3000 });
  rows.aliceFailed = row(alice.orgId, aliceKey, { status: 502, errorCode: 'upstream_error', ttfbMs: 900, totalMs: 900, createdAt: t - 2000 });
  rows.aliceSession = row(alice.orgId, aliceKey, {
    kind: 'session',
    route: '/v1/realtime',
    method: 'GET',
    status: 101,
    modelId: 'voice-agent',
    ttfbMs: null,
    totalMs: 60_000,
    createdAt: t - 1000,
  });
  rows.bobOk = row(bob.orgId, bobKey, { modelId: 'chat-model', createdAt: t - 500 });
  const store = openRequestLogStore(h.url);
  await store.insert(Object.values(rows), [turn(rows.aliceSession.id, alice.orgId, 1), turn(rows.aliceSession.id, alice.orgId, 0)]);
  await store.close();
});

afterAll(async () => {
  await h?.drop();
});

const ridsOf = (page: { data: { request_id: string }[] }) => page.data.map((r) => r.request_id).sort();

describe('logs.list and logs.get', () => {
  it("a member sees the org it acts for, and never another org's rows whatever it filters by", async () => {
    const mine = await alice.caller.logs.list({});
    expect(ridsOf(mine)).toEqual([rows.aliceOk!.requestId, rows.aliceFailed!.requestId, rows.aliceSession!.requestId].sort());
    expect(ridsOf(await bob.caller.logs.list({}))).toEqual([rows.bobOk!.requestId]);
    // The page's infinite query adds the direction it pages in.
    expect(ridsOf(await bob.caller.logs.list({ direction: 'forward' }))).toEqual([rows.bobOk!.requestId]);
    expect((await alice.caller.logs.list({ key: bobKey })).data).toEqual([]);
    expect((await alice.caller.logs.list({ request_id: rows.bobOk!.requestId })).data).toEqual([]);
    // Carol is a member of Alice's org: she sees Alice's rows when acting for it.
    expect(ridsOf(await h.callerFor(carol.user, alice.orgId).logs.list({}))).toEqual(ridsOf(mine));
  });

  it('filters as GET /v1/logs does', async () => {
    expect(ridsOf(await alice.caller.logs.list({ status: 'error' }))).toEqual([rows.aliceFailed!.requestId]);
    expect(ridsOf(await alice.caller.logs.list({ kind: 'session' }))).toEqual([rows.aliceSession!.requestId]);
    expect(ridsOf(await alice.caller.logs.list({ model: 'voice-agent', key: aliceKey }))).toEqual([rows.aliceSession!.requestId]);
  });

  it("a session's row with its turns in order; another org's row is NOT_FOUND", async () => {
    const detail = await alice.caller.logs.get({ id: rows.aliceSession!.id });
    expect(detail).toMatchObject({ kind: 'session', status: 101, route: '/v1/realtime', timings: { ttfb_ms: null, total_ms: 60_000 } });
    expect(detail.turns.map((t) => t.turn_index)).toEqual([0, 1]);
    expect(detail.turns[1]).toMatchObject({ start_ms: 4000, end_of_turn_ms: 1100, tts_first_audio_ms: 1600, barge_in_ms: null });
    await expect(alice.caller.logs.get({ id: rows.bobOk!.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(h.callerFor(null).logs.list({})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it("exports the org's filtered rows only", async () => {
    const csv = await alice.caller.logs.export({ format: 'csv' });
    expect(csv).toMatchObject({ filename: 'svc-logs.csv', contentType: 'text/csv', rows: 3 });
    expect(csv.text).toContain(rows.aliceFailed!.requestId);
    expect(csv.text).not.toContain(rows.bobOk!.requestId);
    const jsonl = await alice.caller.logs.export({ format: 'jsonl', status: 'error' });
    expect(
      jsonl.text
        .trimEnd()
        .split('\n')
        .map((l) => (JSON.parse(l) as { request_id: string }).request_id),
    ).toEqual([rows.aliceFailed!.requestId]);
  });
});

describe('logs.stats', () => {
  it('counts requests and errors per model and key; latency from HTTP requests only, null where none was measured', async () => {
    const stats = await alice.caller.logs.stats({ days: 7 });
    const chat = stats.byModel.find((m) => m.modelId === 'chat-model')!;
    expect(chat).toMatchObject({ requests: 2, errors: 1, errorRate: 0.5 });
    expect(chat.p50Ms).toBeGreaterThan(10);
    expect(chat.p95Ms).toBeGreaterThan(500);
    expect(chat.p95Ms).toBeLessThanOrEqual(1000);
    expect(stats.byModel.find((m) => m.modelId === 'voice-agent')).toMatchObject({ requests: 1, errors: 0, p50Ms: null, p95Ms: null });
    expect(stats.byKey).toEqual([expect.objectContaining({ keyId: aliceKey, name: 'alice key', requests: 3, errors: 1 })]);
    expect((await bob.caller.logs.stats({ days: 7 })).byModel).toEqual([expect.objectContaining({ modelId: 'chat-model', requests: 1, errors: 0 })]);
  });
});

describe('logs.settings', () => {
  it('content off and the gateway retention by default; owners change them, within the gateway retention; members cannot', async () => {
    expect(await alice.caller.logs.settings()).toEqual({ logContent: false, logRetentionDays: null, gatewayRetentionDays: 30, canManage: true });
    expect(await h.callerFor(carol.user, alice.orgId).logs.settings()).toMatchObject({ canManage: false });
    expect(await alice.caller.logs.updateSettings({ logContent: true, logRetentionDays: 7 })).toEqual({
      logContent: true,
      logRetentionDays: 7,
      gatewayRetentionDays: 30,
    });
    await expect(alice.caller.logs.updateSettings({ logRetentionDays: 31 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(h.callerFor(carol.user, alice.orgId).logs.updateSettings({ logContent: false })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await bob.caller.logs.settings()).toMatchObject({ logContent: false, logRetentionDays: null });
  });
});

describe('models.upstreamHistory', () => {
  it("each upstream's last 24 hours: calls and failures as counted, latency of the requests it served, null where none was measured", async () => {
    const prisma = h.db.prisma;
    await upsertModel(prisma, checkProtocol, {
      id: 'hist-llm',
      modality: 'llm',
      prices: {},
      upstream: { url: 'http://engine-a.invalid/v1', protocol: 'openai' },
    });
    await upsertModel(prisma, checkProtocol, {
      id: 'hist-llm',
      modality: 'llm',
      prices: {},
      upstream: { url: 'http://engine-b.invalid/v1', protocol: 'openai' },
    });
    const [a, b] = await prisma.upstream.findMany({ where: { modelId: 'hist-llm' }, orderBy: { url: 'asc' } });
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    await prisma.upstreamStat.createMany({
      data: [
        { upstreamId: a!.id, minute, requests: 10, errors: 1 },
        { upstreamId: b!.id, minute, requests: 4, errors: 4 },
      ],
    });
    const store = openRequestLogStore(h.url);
    await store.insert(
      Array.from({ length: 10 }, () => row(alice.orgId, aliceKey, { servedBy: a!.id, ttfbMs: 40, totalMs: 60 })),
      [],
    );
    await store.close();
    const history = await admin.caller.models.upstreamHistory();
    const lastA = history[a!.id]!.at(-1)!;
    const lastB = history[b!.id]!.at(-1)!;
    expect(history[a!.id]).toHaveLength(24);
    expect(lastA).toMatchObject({ requests: 10, errors: 1, errorRate: 0.1 });
    expect(lastA.p95Ms).toBeGreaterThan(25);
    expect(lastA.p95Ms).toBeLessThanOrEqual(50);
    expect(lastB).toMatchObject({ requests: 4, errors: 4, errorRate: 1, p50Ms: null, p95Ms: null });
    expect(history[a!.id]![0]).toMatchObject({ requests: 0, errorRate: null, p95Ms: null });
    await expect(alice.caller.models.upstreamHistory()).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });
});
