// Three real `svc gateway` replicas on one database and one Redis, driven concurrently, as
// operators run them behind a load balancer. On the PostgreSQL pass (TEST_DB=postgresql) they
// share a PostgreSQL database; on the SQLite pass they share one SQLite file (WAL), which is
// also a supported way to run several processes on one machine. Invariants:
// - one rate-limit window per key across replicas, exact under concurrency;
// - a key revoked in the database is refused by every replica on its next request;
// - credits never overspent past the documented bound (in-flight requests x their cost);
// - a replica killed with SIGKILL mid-stream: its client's stream ends with an error (not a
//   hang), nothing half-billed appears, the ledger still sums to the balance, and the other
//   replicas keep serving.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../support/scripted-openai-upstream.ts';
import { sseReader } from '../support/sse-client.ts';
import { TEST_DIALECT, createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { chatBody, expectLedgerConsistent, orgWithKey } from '../support/ops-fixture.ts';
import { startSvcGateway, stopSvc, type SvcProcess } from '../support/svc-process.ts';
import { usageRows } from '../support/usage-rows.ts';
import { countedInOneMinute } from '../support/rate-window.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 120_000 });

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

let t: TestDatabase;
let upstream: ScriptedUpstream;
let redis: Redis;
let replicas: SvcProcess[];
const keyIds: string[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true, connectTimeout: 5_000 });
  await redis.connect().catch((e: Error) => {
    throw new Error(`Redis is not reachable at ${REDIS_URL} (${e.message}); start it or set TEST_REDIS_URL`);
  });
  upstream = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } });
  // 1 micro-USD per token: a default answer (3 + 4 tokens) costs 7 micro-USD.
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'rep-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
    upstream: { url: upstream.baseUrl, protocol: 'openai' },
  });
  const env = { DATABASE_URL: t.url, SVC_DATA_DIR: t.dataDir, REDIS_URL, SVC_SHUTDOWN_GRACE_SECONDS: '2' };
  replicas = await Promise.all(['a', 'b', 'c'].map((n) => startSvcGateway(`replica-${n}`, env)));
}, 120_000);

afterAll(async () => {
  await Promise.allSettled((replicas ?? []).map((r) => stopSvc(r, 5_000)));
  if (redis?.status === 'ready') {
    for (const id of keyIds) {
      const keys = await redis.keys(`svc:rl:${id}:*`);
      if (keys.length) await redis.del(...keys);
    }
  }
  redis?.disconnect();
  await upstream?.close();
  await t?.drop();
}, 60_000);

async function newKey(credits: bigint, rpm?: number) {
  const k = await orgWithKey(t.db, credits, rpm);
  keyIds.push(k.keyId);
  return k;
}

interface Answer {
  status: number;
  code: string | undefined;
}

// max_tokens 4: each request reserves its prompt estimate (a token per 4 bytes) + 4 tokens.
const CHAT_BODY = JSON.stringify({ model: 'rep-llm', stream: false, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
const CHAT_RESERVATION = BigInt(Math.ceil(Buffer.byteLength(CHAT_BODY) / 4) + 4);

async function chat(r: SvcProcess, key: string): Promise<Answer> {
  const res = await fetch(`${r.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: CHAT_BODY,
  });
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, code: body.error?.code };
}

async function models(r: SvcProcess, key: string): Promise<Answer> {
  const res = await fetch(`${r.base}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, code: body.error?.code };
}

/** Runs `total` calls with at most `concurrency` in flight, round-robin over the replicas. */
async function drive(total: number, concurrency: number, call: (r: SvcProcess, i: number) => Promise<Answer>): Promise<Answer[]> {
  const out: Answer[] = new Array(total);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) out[i] = await call(replicas[i % replicas.length]!, i);
    }),
  );
  return out;
}

const count = (answers: Answer[], status: number, code?: string) =>
  answers.filter((a) => a.status === status && (code === undefined || a.code === code)).length;

describe(`three replicas on one ${process.env.TEST_DB === 'postgresql' ? 'PostgreSQL database' : 'SQLite file'} and Redis`, () => {
  it('a 30 rpm key hit 90 times concurrently through all three: exactly 30 pass, 60 get 429', async () => {
    const answers = await countedInOneMinute(async () => {
      const { key } = await newKey(10_000_000n, 30);
      return drive(90, 15, (r) => models(r, key));
    });
    expect(count(answers, 200)).toBe(30);
    expect(count(answers, 429, 'rate_limit_exceeded')).toBe(60);
  });

  it('a key revoked in the database is refused by every replica on its next request', async () => {
    const { keyId, key } = await newKey(10_000_000n);
    for (const r of replicas) expect(await models(r, key)).toEqual({ status: 200, code: undefined });
    await revokeApiKey(t.db.prisma, { id: keyId });
    for (const r of replicas) expect(await models(r, key)).toEqual({ status: 401, code: 'api_key_disabled' });
    for (const r of replicas) expect(await chat(r, key)).toEqual({ status: 401, code: 'api_key_disabled' });
  });

  it('credits are reserved before each request and never overspent (PostgreSQL: never below zero), and every admitted request is billed exactly once', async () => {
    const cost = 7n;
    const initial = 100n;
    const concurrency = 12;
    const { orgId, key } = await newKey(initial);
    upstream.behaviour = { kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } };
    const answers = await drive(120, concurrency, (r) => chat(r, key));
    const ok = count(answers, 200);
    expect(count(answers, 402, 'insufficient_quota')).toBe(answers.length - ok);
    // Every 200 was debited once, nothing else was (on SQLite a replica commits a debit just
    // after writing its answer, in the same event-loop turn: the last ones may lag a moment).
    await vi.waitFor(async () => expect(initial - (await expectLedgerConsistent(t.db, orgId))).toBe(BigInt(ok) * cost), { timeout: 5_000, interval: 20 });
    const balance = await expectLedgerConsistent(t.db, orgId);
    // The org was drained: what is left cannot pay for one more reservation.
    expect(balance).toBeLessThan(CHAT_RESERVATION);
    // The documented bound (docs/api-conventions.md, "Credits"): reservations are exact across replicas on
    // PostgreSQL; on one SQLite file, processes see each other's reservations with their
    // commits (~10 ms), so admissions in that window may share credit -- never more than what
    // is in flight.
    if (TEST_DIALECT === 'postgresql') expect(balance).toBeGreaterThanOrEqual(0n);
    else expect(balance).toBeGreaterThan(-BigInt(concurrency) * cost);
    // Once it cannot cover a reservation, every replica refuses.
    for (const r of replicas) expect(await chat(r, key)).toEqual({ status: 402, code: 'insufficient_quota' });
  });

  it('a replica killed with SIGKILL mid-stream: the client gets an error, nothing half-billed, the others keep serving', async () => {
    const { orgId, key } = await newKey(1_000_000n);
    const victim = replicas[0]!;
    upstream.behaviour = { kind: 'stream', chunks: Array.from({ length: 50 }, (_, i) => `t${i} `), delayMs: 100 };
    const streamsBefore = upstream.streams.length;
    const res = await fetch(`${victim.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: chatBody('rep-llm', true),
    });
    expect(res.status).toBe(200);
    const events = sseReader(res);
    expect(await events.next()).toContain('t0');
    victim.child.kill('SIGKILL');
    expect(await victim.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // The connection ends: reading the rest fails (no [DONE]) instead of hanging.
    await expect(events.rest()).rejects.toThrow();
    // The engine's request was dropped with the process (the upstream sees its socket close a moment later).
    await vi.waitFor(() => expect(upstream.streams[streamsBefore]!.closedEarly).toBe(true), { timeout: 10_000, interval: 20 });

    // The stream was not billed (its debit comes at the end, which never happened); the
    // ledger still sums to the balance.
    expect(await usageRows(t.db.prisma, { orgId })).toHaveLength(0);
    expect(await expectLedgerConsistent(t.db, orgId)).toBe(1_000_000n);

    // The remaining replicas serve and bill as before.
    upstream.behaviour = { kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } };
    for (const r of replicas.slice(1)) expect(await chat(r, key)).toEqual({ status: 200, code: undefined });
    await vi.waitFor(async () => expect(await expectLedgerConsistent(t.db, orgId)).toBe(1_000_000n - 14n), { timeout: 5_000, interval: 20 });
  });
});
