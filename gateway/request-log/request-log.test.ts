// The request log over real HTTP and WebSockets: the real gateway runtime (its log on, written
// only when the test flushes it), a throw-away SQLite or PostgreSQL database, a scripted
// OpenAI-compatible upstream and the local flite engine. A row per keyed request and session,
// usage and cost as debited, refusals in their key's org, no content unless the org opted in
// and never a key, rows written in batches and never while a request waits, the API sessions
// call for turns, retention and the size cap.
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sqlitePath } from '../../server/db/dialect.ts';
import { newTimeOrderedId } from '../../server/db/ids.ts';
import { openRequestLogStore } from '../../server/db/request-log-store-open.ts';
import type { RequestLogRow } from '../../server/db/request-log-store.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { startGateway } from '../../test/support/gateway-harness.ts';
import { startTtsGateway } from '../../test/support/tts-routes.ts';
import { openTtsSocket } from '../../test/support/tts-socket.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import type { RequestLog } from './request-log.ts';

let h: GatewayHarness;
let up: ScriptedUpstream;
let slow: ScriptedUpstream;
let log: RequestLog;
const MODEL = 'log-chat';
let seq = 0;
const rid = (label: string) => `log-${label}-${++seq}-${Date.now()}`;

beforeAll(async () => {
  // A minute between flushes: nothing is written unless a test flushes (or a batch fills).
  h = await startTtsGateway({ env: { SVC_LOG_FLUSH_MS: '60000', SVC_LOG_BATCH_ROWS: '1000' } });
  up = await startScriptedUpstream({ kind: 'ok', text: 'The plan is ready.', usage: { prompt_tokens: 11, completion_tokens: 5 } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: MODEL,
    modality: 'llm',
    prices: { inputPicoPerToken: 150_001n, outputPicoPerToken: 600_003n },
    upstream: { url: up.url, protocol: 'openai' },
  });
  // A stream that sends a chunk every 2 s: a client leaves it half-way.
  slow = await startScriptedUpstream({ kind: 'stream', chunks: ['one', ' two', ' three', ' four'], delayMs: 2000 });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'log-slow-stream',
    modality: 'llm',
    prices: { outputPicoPerToken: 600_003n },
    upstream: { url: slow.url, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  log = h.runtime.ctx.requestLog!;
}, 60_000);

afterAll(async () => {
  await up?.close();
  await slow?.close();
  await h?.close();
});

async function chat(requestId: string, options: { key?: string; model?: string; prompt?: string; userAgent?: string } = {}): Promise<Response> {
  return fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${options.key ?? h.key}`,
      'content-type': 'application/json',
      'x-request-id': requestId,
      'user-agent': options.userAgent ?? 'log-test/1.0',
    },
    body: JSON.stringify({ model: options.model ?? MODEL, messages: [{ role: 'user', content: options.prompt ?? 'hello' }] }),
  });
}

/** Every debit committed, then every buffered row written; the rows of `requestId`. */
async function logged(requestId: string) {
  await h.settled();
  await log.flush();
  return h.testDb.db.prisma.requestLog.findMany({ where: { requestId } });
}

describe('one row per keyed request', () => {
  it('a chat completion: its ids, key and key name, route, model, status, usage and cost as debited, timings and user agent; no content', async () => {
    const id = rid('chat');
    const res = await chat(id, { userAgent: 'OpenAI/JS 4.77.0' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe(id);
    await res.text();
    const [row, ...more] = await logged(id);
    expect(more).toEqual([]);
    const [debit] = await usageRows(h.testDb.db.prisma, { requestId: id });
    expect(row).toMatchObject({
      orgId: h.orgId,
      requestId: id,
      apiKeyId: h.keyId,
      apiKeyName: 'test',
      kind: 'http',
      method: 'POST',
      route: '/v1/chat/completions',
      modelId: MODEL,
      status: 200,
      errorCode: null,
      userAgent: 'OpenAI/JS 4.77.0',
      inputTokens: 11,
      outputTokens: 5,
      costMicros: debit!.costMicros,
      requestContent: null,
      responseContent: null,
      traceId: null,
    });
    expect(debit!.costMicros).toBeGreaterThan(0n);
    expect(row!.totalMs).toBeGreaterThan(0);
    expect(row!.ttfbMs).not.toBeNull();
    expect(row!.ttfbMs!).toBeLessThanOrEqual(row!.totalMs);
    expect(row!.id).toMatch(/^log_/);
  });

  it('a refused request: its status and the code of the envelope it was answered with', async () => {
    const id = rid('missing-model');
    const res = await chat(id, { model: 'no-such-model' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
    const [row] = await logged(id);
    expect(row).toMatchObject({ status: 404, errorCode: 'model_not_found', apiKeyId: h.keyId, costMicros: 0n, inputTokens: 0 });
  });

  it("a request refused at admission after its key was found (rate limit, no credit) is in its key's org's log", async () => {
    const limited = await createApiKey(h.testDb.db.prisma, { orgId: h.orgId, name: 'one a minute', rateLimitRpm: 1 });
    const broke = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
    const brokeKey = await createApiKey(h.testDb.db.prisma, { orgId: broke.id, name: 'empty' });
    const first = rid('limited-1');
    const second = rid('limited-2');
    const noCredit = rid('no-credit');
    expect((await chat(first, { key: limited.key })).status).toBe(200);
    expect((await chat(second, { key: limited.key })).status).toBe(429);
    expect((await chat(noCredit, { key: brokeKey.key })).status).toBe(402);
    expect(await logged(second)).toMatchObject([
      { orgId: h.orgId, apiKeyId: limited.id, apiKeyName: 'one a minute', status: 429, errorCode: 'rate_limit_exceeded' },
    ]);
    expect(await logged(noCredit)).toMatchObject([{ orgId: broke.id, apiKeyId: brokeKey.id, status: 402, errorCode: 'insufficient_quota' }]);
  });

  it('a request without a valid key belongs to no org and is not logged; neither are reads of the log', async () => {
    const unknownKey = rid('unknown-key');
    expect((await chat(unknownKey, { key: `sk_svc_${'x'.repeat(43)}` })).status).toBe(401);
    const read = rid('read');
    expect((await fetch(`${h.url}/v1/logs`, { headers: { authorization: `Bearer ${h.key}`, 'x-request-id': read } })).status).toBe(200);
    expect(await logged(unknownKey)).toEqual([]);
    expect(await logged(read)).toEqual([]);
  });
});

describe('a client that leaves', () => {
  it('is logged when it goes, with the usage its stream was debited for after it left', async () => {
    const id = rid('gone');
    const client = new AbortController();
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'log-slow-stream', stream: true, messages: [{ role: 'user', content: 'count' }] }),
      signal: client.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read(); // the first chunk, then the client hangs up
    client.abort();
    await expect(reader.read()).rejects.toThrow();
    const row = await vi.waitFor(
      async () => {
        const [r] = await logged(id);
        expect(r?.costMicros).toBeGreaterThan(0n);
        return r!;
      },
      { timeout: 10_000, interval: 50 },
    );
    const [debit] = await usageRows(h.testDb.db.prisma, { requestId: id });
    expect(row).toMatchObject({
      status: 200,
      errorCode: 'client_gone',
      modelId: 'log-slow-stream',
      costMicros: debit!.costMicros,
      outputTokens: debit!.outputTokens,
    });
    expect(row.totalMs).toBeGreaterThanOrEqual(row.ttfbMs!);
  });
});

describe('content', () => {
  it('is kept only once the org opts in, and no row ever holds a key or an Authorization header', async () => {
    const before = rid('before-opt-in');
    await (await chat(before, { prompt: 'the secret plan' })).text();
    await h.testDb.db.prisma.org.update({ where: { id: h.orgId }, data: { logContent: true } });
    await log.refreshSettings();
    const after = rid('after-opt-in');
    // A key pasted into a prompt is masked too.
    await (await chat(after, { prompt: `the secret plan, and my key is ${h.key}` })).text();
    // A session's turn text is kept too, for as long as the org keeps content.
    log.turn({ orgId: h.orgId, requestId: after }, { turnIndex: 0, startMs: 0, userText: 'book a table', assistantText: 'For how many?' });
    await log.flush();
    await h.testDb.db.prisma.org.update({ where: { id: h.orgId }, data: { logContent: false } });
    await log.refreshSettings();
    log.turn({ orgId: h.orgId, requestId: before }, { turnIndex: 0, startMs: 0, userText: 'never kept', assistantText: 'never kept' });

    const [plain] = await logged(before);
    expect(plain).toMatchObject({ requestContent: null, responseContent: null });
    const [kept] = await logged(after);
    expect(kept!.requestContent).toContain('the secret plan');
    expect(kept!.requestContent).toContain('sk_svc_[redacted]');
    expect(kept!.responseContent).toContain('The plan is ready.');
    const texts = await h.testDb.db.prisma.requestLogTurn.findMany({
      where: { orgId: h.orgId, turnIndex: 0, startMs: 0 },
      select: { userText: true, assistantText: true },
    });
    expect(texts).toContainEqual({ userText: 'book a table', assistantText: 'For how many?' });
    expect(texts).toContainEqual({ userText: null, assistantText: null });
    expect(JSON.stringify(texts)).not.toContain('never kept');

    const all = await h.testDb.db.prisma.requestLog.findMany({ where: { orgId: h.orgId } });
    const turns = await h.testDb.db.prisma.requestLogTurn.findMany({ where: { orgId: h.orgId } });
    const text = JSON.stringify([all, turns], (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    expect(text).not.toContain(h.key);
    expect(text).not.toContain(h.key.slice(7, 30));
    expect(text.toLowerCase()).not.toContain('bearer');
  });

  it('never keeps a credential an answer hands out: a minted access token is masked (any key of the org reads the log)', async () => {
    await h.testDb.db.prisma.org.update({ where: { id: h.orgId }, data: { logContent: true } });
    await log.refreshSettings();
    const id = rid('access-token');
    const res = await fetch(`${h.url}/access-token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ grants: { tts: true }, expires_in: 3600 }),
    });
    const { token } = (await res.json()) as { token: string };
    await h.testDb.db.prisma.org.update({ where: { id: h.orgId }, data: { logContent: false } });
    await log.refreshSettings();
    expect(token).toMatch(/^at_/);
    const [row] = await logged(id);
    expect(row).toMatchObject({ status: 200, route: '/access-token', requestContent: '{"grants":{"tts":true},"expires_in":3600}' });
    expect(row!.responseContent).toBe('{"token":"at_[redacted]"}');
  });
});

describe('writing off the request path', () => {
  it('rows wait in memory while requests are answered, and are written together in one batch', async () => {
    const ids = Array.from({ length: 6 }, () => rid('batch'));
    for (const id of ids) expect((await chat(id)).status).toBe(200);
    await h.settled();
    const waiting = await h.testDb.db.prisma.requestLog.count({ where: { requestId: { in: ids } } });
    expect(waiting).toBe(0);
    expect(log.buffered()).toBeGreaterThanOrEqual(ids.length);
    const writtenBefore = await rowsWrittenMetric();
    await log.flush();
    expect(await h.testDb.db.prisma.requestLog.count({ where: { requestId: { in: ids } } })).toBe(ids.length);
    expect((await rowsWrittenMetric()) - writtenBefore).toBeGreaterThanOrEqual(ids.length);
    expect(log.buffered()).toBe(0);
  });

  it('requests are answered while the database holds the log write back; their rows are written once it is free', async () => {
    await log.flush();
    const models = async (id: string) => {
      const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id } });
      expect(res.status).toBe(200);
      await res.text();
    };
    const lock = await holdWriteLock(h.testDb.url, h.testDb.dialect);
    const [before, during] = [rid('locked-before'), rid('locked-during')];
    let flushing: Promise<void>;
    try {
      await models(before);
      // The batch waits for the lock (SQLite: in the store's worker thread; PostgreSQL: on its connection)...
      flushing = log.flush();
      // ...while requests are answered, their rows buffered.
      await models(during);
      expect(log.buffered()).toBeGreaterThanOrEqual(1);
      expect(await h.testDb.db.prisma.requestLog.count({ where: { requestId: { in: [before, during] } } })).toBe(0);
    } finally {
      await lock.release();
    }
    await flushing!.catch(() => {});
    expect(await logged(before)).toMatchObject([{ status: 200, route: '/v1/models' }]);
    expect(await logged(during)).toMatchObject([{ status: 200, route: '/v1/models' }]);
  });
});

describe('bounds and shutdown', () => {
  it('past SVC_LOG_BUFFER_ROWS waiting rows new ones are dropped and counted; what waits at shutdown is written', async () => {
    const small = await startGateway({ env: { SVC_LOG_FLUSH_MS: '60000', SVC_LOG_BUFFER_ROWS: '2' } });
    try {
      const ids = [rid('cap'), rid('cap'), rid('cap')];
      for (const id of ids) {
        const res = await fetch(`${small.url}/v1/models`, { headers: { authorization: `Bearer ${small.key}`, 'x-request-id': id } });
        expect(res.status).toBe(200);
        await res.text();
      }
      expect(small.runtime.ctx.requestLog!.buffered()).toBe(2);
      const { body } = await small.runtime.ctx.metrics.render();
      expect(body).toMatch(/svc_request_log_rows_dropped_total\{reason="buffer_full"\} 1\b/);
      await small.runtime.ctx.requestLog!.flush();
      expect(await small.testDb.db.prisma.requestLog.count({ where: { requestId: { in: ids } } })).toBe(2);
      // One more, then the process stops before any flush: the shutdown writes it.
      const last = rid('at-shutdown');
      await (await fetch(`${small.url}/v1/models`, { headers: { authorization: `Bearer ${small.key}`, 'x-request-id': last } })).text();
      await small.runtime.close();
      expect(await small.testDb.db.prisma.requestLog.count({ where: { requestId: last } })).toBe(1);
    } finally {
      await small.close();
    }
  });
});

describe('sessions', () => {
  it('a WebSocket session is one row (kind session, status 101, its characters and cost), its turns and annotations joined to it; the key in its query is stored nowhere', async () => {
    const id = rid('session');
    const s = await openTtsSocket(h, { query: { api_key: h.key, cartesia_version: '2025-04-16' }, headers: { 'x-request-id': id } });
    const ref = { orgId: h.orgId, requestId: id };
    // What a session owner calls (docs/logs.md, "Sessions"): two turns and a failover while it is open.
    log.turn(ref, {
      turnIndex: 0,
      startMs: 10,
      speechEndMs: 900,
      endOfTurnMs: 1200,
      llmFirstTokenMs: 1500,
      ttsFirstAudioMs: 1700,
      firstAudibleMs: 1750,
      userText: 'hi',
    });
    log.turn(ref, { turnIndex: 1, startMs: 3000, speechEndMs: 500, endOfTurnMs: 700, bargeInMs: 2000, failoverReason: 'connect' });
    log.annotate(ref, { failoverReason: 'the first upstream refused the connection' });
    log.attempt(ref, { upstreamId: 'ups_a', outcome: 'connect', ms: 3 });
    log.attempt(ref, { upstreamId: 'ups_b', outcome: 'ok', ms: 40 });
    s.send({
      model_id: 'local-flite',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
      language: 'en',
      context_id: 'c1',
      transcript: 'Hello there.',
      continue: false,
    });
    await s.end('c1');
    s.ws.close();
    await s.closed;
    const row = await vi.waitFor(
      async () => {
        const [r] = await logged(id);
        expect(r).toBeDefined();
        return r!;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(row).toMatchObject({
      kind: 'session',
      status: 101,
      route: '/tts/websocket',
      method: 'GET',
      apiKeyId: h.keyId,
      characters: 'Hello there.'.length,
      // The TTS session's own: from the upgrade's arrival to its first audio, and to its first audible sample.
      firstAudioMs: expect.any(Number),
      firstAudibleMs: expect.any(Number),
      servedBy: 'ups_b',
      failoverReason: 'the first upstream refused the connection',
      ttfbMs: null,
    });
    expect(JSON.parse(String(typeof row.upstreams === 'string' ? row.upstreams : JSON.stringify(row.upstreams)))).toEqual([
      { upstreamId: 'ups_a', outcome: 'connect', ms: 3 },
      { upstreamId: 'ups_b', outcome: 'ok', ms: 40 },
    ]);
    expect(row.firstAudibleMs!).toBeGreaterThanOrEqual(row.firstAudioMs!);
    const [debit] = await usageRows(h.testDb.db.prisma, { requestId: id });
    expect(row.costMicros).toBe(debit!.costMicros);
    const turns = await h.testDb.db.prisma.requestLogTurn.findMany({ where: { requestLogId: row.id }, orderBy: { turnIndex: 'asc' } });
    expect(turns).toMatchObject([
      { turnIndex: 0, startMs: 10, speechEndMs: 900, endOfTurnMs: 1200, llmFirstTokenMs: 1500, ttsFirstAudioMs: 1700, firstAudibleMs: 1750, userText: null },
      { turnIndex: 1, startMs: 3000, bargeInMs: 2000, failoverReason: 'connect', llmFirstTokenMs: null },
    ]);
    expect(JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).not.toContain(h.key);
  });
});

describe('retention and the size cap', () => {
  it("rows past the gateway's retention go, and past an org's shorter one only that org's; then the oldest beyond the cap", async () => {
    const prisma = h.testDb.db.prisma;
    const short = await createOrg(h.testDb.db, { name: 'short memory', creditsMicros: 0n });
    await prisma.org.update({ where: { id: short.id }, data: { logRetentionDays: 2 } });
    await log.refreshSettings();
    const DAY = 86_400_000;
    const store = openRequestLogStore(h.testDb.url);
    const row = (orgId: string, daysAgo: number, label: string): RequestLogRow => ({
      ...blankRow(orgId, label),
      createdAt: Date.now() - daysAgo * DAY,
    });
    const ancient = row(h.orgId, 31, 'ancient');
    const oldOfShort = row(short.id, 3, 'old-short');
    const oldOfDefault = row(h.orgId, 3, 'old-default');
    const recentOfShort = row(short.id, 1, 'recent-short');
    try {
      await store.insert([ancient, oldOfShort, oldOfDefault, recentOfShort], [turnOf(ancient), turnOf(oldOfDefault)]);
      const deleted = await log.prune();
      expect(deleted).toBeGreaterThanOrEqual(2);
      const left = await prisma.requestLog.findMany({
        where: { id: { in: [ancient.id, oldOfShort.id, oldOfDefault.id, recentOfShort.id] } },
        select: { id: true },
      });
      expect(left.map((r) => r.id).sort()).toEqual([oldOfDefault.id, recentOfShort.id].sort());
      expect(await prisma.requestLogTurn.count({ where: { requestLogId: ancient.id } })).toBe(0);
      expect(await prisma.requestLogTurn.count({ where: { requestLogId: oldOfDefault.id } })).toBe(1);

      // The cap: 1,000 rows (the least SVC_LOG_MAX_ROWS takes) and 1,200 more: the oldest go, the newest stay.
      const total = await prisma.requestLog.count();
      const extra = Array.from({ length: 1200 }, (_, i) => ({ ...blankRow(h.orgId, `cap-${i}`), createdAt: Date.now() - (1200 - i) * 1000 }));
      await store.insert(extra, []);
      const capped = await store.pruneOverCap(1000, 5000);
      expect(capped).toBeGreaterThanOrEqual(total + extra.length - 1000);
      expect(await prisma.requestLog.count()).toBeLessThanOrEqual(1000);
      expect(await prisma.requestLog.count({ where: { id: extra.at(-1)!.id } })).toBe(1);
    } finally {
      await store.close();
    }
  });
});

function blankRow(orgId: string, label: string): RequestLogRow {
  return {
    id: newTimeOrderedId('log'),
    orgId,
    requestId: rid(label),
    apiKeyId: null,
    apiKeyName: '',
    kind: 'http',
    method: 'POST',
    route: '/v1/chat/completions',
    modelId: MODEL,
    status: 200,
    errorCode: null,
    upstreams: null,
    servedBy: null,
    failoverReason: null,
    userAgent: null,
    traceId: null,
    ttfbMs: null,
    firstAudioMs: null,
    firstAudibleMs: null,
    totalMs: 1,
    inputTokens: 0,
    outputTokens: 0,
    characters: 0,
    audioMillis: 0,
    costMicros: 0n,
    requestContent: null,
    responseContent: null,
    createdAt: Date.now(),
  };
}

const turnOf = (r: RequestLogRow) => ({
  id: newTimeOrderedId('turn'),
  requestLogId: r.id,
  orgId: r.orgId,
  turnIndex: 0,
  startMs: 0,
  speechEndMs: null,
  endOfTurnMs: null,
  llmFirstTokenMs: null,
  ttsFirstAudioMs: null,
  firstAudibleMs: null,
  bargeInMs: null,
  failoverReason: null,
  userText: null,
  assistantText: null,
  createdAt: r.createdAt,
});

async function rowsWrittenMetric(): Promise<number> {
  const { body } = await h.runtime.ctx.metrics.render();
  return Number(/svc_request_log_rows_written_total\{table="requests"\} (\d+)/.exec(body)?.[1] ?? 0);
}

/** Another connection holding the database's (SQLite) or the log table's (PostgreSQL: reads still pass) write lock until released. */
async function holdWriteLock(url: string, dialect: 'sqlite' | 'postgresql'): Promise<{ release(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const db = new Database(sqlitePath(url));
    db.exec('BEGIN IMMEDIATE');
    return {
      async release() {
        db.exec('ROLLBACK');
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE "RequestLog" IN EXCLUSIVE MODE');
  return {
    async release() {
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}
