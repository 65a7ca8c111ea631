// Fault suite for the shared services, under load, with the real gateway runtime:
// - Redis (a private redis-server started by this test) killed and restarted: requests keep
//   being admitted while it is away (availability over strictness), the limiter counts again
//   by itself once it is back;
// - PostgreSQL made unreachable through a TCP proxy that this test closes and reopens:
//   requests get 503 verify_unavailable (or 503 temporarily_unavailable for a request whose
//   debit could not be written), never a 500; service resumes by itself; the ledger still sums
//   to the balance and no answered request went unbilled.
// - upstreams answering garbage where the route tests do not already show it: a chat stream
//   that is not SSE, a transcription engine answering 200 with something that is not a
//   transcript.
// Upstream faults (down, slow, dying mid-stream, HTML/truncated JSON on chat) are covered
// route by route in gateway/routes/*.test.ts; a replica killed with SIGKILL in
// test/ops/replicas.test.ts.
// This file always uses its own PostgreSQL database for the PostgreSQL part, whatever TEST_DB.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../server/config/env.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createGatewayRuntime, type GatewayRuntime } from '../../gateway/runtime.ts';
import { startGateway, type GatewayHarness } from '../support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../support/scripted-openai-upstream.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { chatBody, expectLedgerConsistent, orgWithKey } from '../support/ops-fixture.ts';
import { freePort, sleep } from '../support/svc-process.ts';
import { A_WINDOW_START, manualClock } from '../support/manual-clock.ts';
import { usageRows } from '../support/usage-rows.ts';
import { until } from '../support/poll.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 120_000 });

interface Answer {
  status: number;
  code: string | undefined;
}

async function ask(url: string, key: string, init: { method?: string; body?: string } = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
    body: init.body,
    signal: AbortSignal.timeout(30_000),
  });
  const body = (await res.json().catch(() => ({}))) as { error?: { code: string } };
  return { status: res.status, code: body.error?.code };
}

/**
 * Requests in a loop, `concurrency` at a time, until stop() is called; returns every answer.
 * `answered(n)` resolves once `n` answers have come back in all (the test's steps wait on the
 * load's progress, not on the clock).
 */
function loadLoop(concurrency: number, request: () => Promise<Answer>) {
  const answers: Answer[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  let running = true;
  const workers = Array.from({ length: concurrency }, async () => {
    while (running) {
      answers.push(await request().catch((e: Error) => ({ status: 0, code: `client error: ${e.message}` })));
      for (const w of waiting.filter((w) => answers.length >= w.count)) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve();
      }
      await sleep(5); // pacing (about 200 requests/s per worker), not a wait for anything
    }
  });
  return {
    answers,
    answered(count: number): Promise<void> {
      if (answers.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ count, resolve }));
    },
    async stop() {
      running = false;
      await Promise.all(workers);
      return answers;
    },
  };
}

const tally = (answers: Answer[]) => {
  const out: Record<string, number> = {};
  for (const a of answers) {
    const k = `${a.status}${a.code ? ` ${a.code}` : ''}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
};

/** Runs `check` again after each answer of the running load (its progress is the tick, not a timer) until it gives a value. */
const underLoad = <T>(what: string, load: ReturnType<typeof loadLoop>, check: () => Promise<T | undefined>) =>
  until(what, () => check().catch(() => undefined), { timeoutMs: 20_000, between: () => load.answered(load.answers.length + 1) });

// ---------------------------------------------------------------------------------------

describe('upstreams answering garbage', () => {
  let h: GatewayHarness;
  let chatUp: ScriptedUpstream;
  /** What the fake transcription engine answers with status 200. */
  let sttAnswer = { contentType: 'application/json', body: '' };
  let stt: ReturnType<typeof createHttpServer>;

  beforeAll(async () => {
    h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
    chatUp = await startScriptedUpstream();
    stt = createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/v1/models') res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
        else res.writeHead(200, { 'content-type': sttAnswer.contentType }).end(sttAnswer.body);
      });
    });
    await new Promise<void>((r) => stt.listen(0, '127.0.0.1', () => r()));
    const prisma = h.testDb.db.prisma;
    await upsertModel(prisma, checkProtocol, {
      id: 'junk-llm',
      modality: 'llm',
      prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
      upstream: { url: chatUp.baseUrl, protocol: 'openai' },
    });
    await upsertModel(prisma, checkProtocol, {
      id: 'junk-stt',
      modality: 'stt',
      prices: { picoPerSecond: 1_000_000n },
      upstream: { url: `http://127.0.0.1:${(stt.address() as AddressInfo).port}/v1`, protocol: 'openai' },
    });
    await h.runtime.ctx.registry.refresh();
    await h.runtime.ctx.health.checkAll();
  });

  afterAll(async () => {
    await h?.close();
    await chatUp?.close();
    stt?.closeAllConnections();
    await new Promise((r) => stt?.close(r));
  });

  it('a chat stream answered with bytes that are not SSE events: a clean upstream_error event, none of the garbage relayed, billed only the prompt estimate', async () => {
    const garbage = 'data: {not json\n\n\u0000\u0001 binary-ish noise without an event end';
    chatUp.behaviour = { kind: 'raw', status: 200, contentType: 'text/event-stream', body: garbage };
    const body = chatBody('junk-llm', true);
    const res = await fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: { ...h.headers, 'x-request-id': 'junk-stream-1' }, body });
    expect(res.status).toBe(200);
    // A malformed chunk is the engine's fault (docs/failover.md): with no other upstream, the stream ends with an error event.
    const text = await res.text();
    expect(text).not.toContain('not json');
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    expect((JSON.parse(events[0]!.slice(6)) as { error: { code: string } }).error.code).toBe('upstream_error');
    await h.settled();
    const [usage] = await usageRows(h.testDb.db.prisma, { requestId: 'junk-stream-1' });
    // No usage and no content chunks from the engine: the prompt at 4 bytes a token, no output.
    expect(usage).toMatchObject({
      inputTokens: Math.ceil(Buffer.byteLength(body) / 4),
      outputTokens: 0,
      costMicros: BigInt(Math.ceil(Buffer.byteLength(body) / 4)),
    });
    await expectLedgerConsistent(h.testDb.db, h.orgId);
  });

  it.each([
    { name: 'HTML', contentType: 'text/html', body: '<html><body>502 Bad Gateway</body></html>' },
    { name: 'a JSON string', contentType: 'application/json', body: '"oops"' },
    { name: 'JSON without text or words', contentType: 'application/json', body: '{"status":"queued"}' },
    { name: 'JSON null', contentType: 'application/json', body: 'null' },
  ])('a transcription engine answering 200 with $name -> 502 upstream_error, not billed', async ({ contentType, body }) => {
    sttAnswer = { contentType, body };
    const form = new FormData();
    const pcm = new Uint8Array(32000); // 1 s of 16 kHz silence, raw
    form.set('file', new Blob([pcm], { type: 'application/octet-stream' }), 'a.raw');
    form.set('model', 'junk-stt');
    const res = await fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: h.headers.authorization!, 'x-request-id': `junk-stt-${contentType}-${body.length}` },
      body: form,
    });
    const answer = (await res.json()) as { error?: { code: string; type: string } };
    expect({ status: res.status, code: answer.error?.code, type: answer.error?.type }).toEqual({ status: 502, code: 'upstream_error', type: 'api_error' });
    await h.settled();
    expect(await usageRows(h.testDb.db.prisma, { requestId: `junk-stt-${contentType}-${body.length}` })).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------

describe('Redis stopped and restarted under load', () => {
  let port: number;
  let server: ChildProcess | undefined;
  let h: GatewayHarness;
  // The gateways' rate-limit windows read this clock, held inside one minute: each counting
  // step below stays in one window however long the outage takes.
  const clock = manualClock(A_WINDOW_START + 15_000);

  /** Resolves once redis-server has logged that it takes commands. */
  async function startRedis(): Promise<void> {
    const s = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    server = s;
    await new Promise<void>((resolve, reject) => {
      let log = '';
      let ready = false;
      const onExit = (code: number | null) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${log}`));
      s.once('exit', onExit);
      // Read on after that line too, so that the pipe never fills.
      s.stdout!.on('data', (chunk: Buffer) => {
        if (ready) return;
        log += chunk.toString();
        if (log.includes('Ready to accept connections')) {
          ready = true;
          s.off('exit', onExit);
          resolve();
        }
      });
    });
  }

  async function killRedis(): Promise<void> {
    const s = server!;
    const exited = new Promise((r) => s.once('exit', r));
    s.kill('SIGKILL');
    await exited;
  }

  beforeAll(async () => {
    port = await freePort();
    await startRedis();
    h = await startGateway({ env: { REDIS_URL: `redis://127.0.0.1:${port}` }, clock });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    server?.kill('SIGKILL');
  });

  /** `n` requests on a fresh key limited to `rpm`: the statuses in order. */
  async function window(rpm: number, n: number): Promise<number[]> {
    const { key } = await orgWithKey(h.testDb.db, 1_000_000n, rpm);
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await ask(`${h.url}/v1/models`, key)).status);
    return out;
  }

  it('admits every request while Redis is away, then limits again by itself once it is back', async () => {
    expect(await window(3, 5)).toEqual([200, 200, 200, 429, 429]);

    const { key } = await orgWithKey(h.testDb.db, 1_000_000n);
    const load = loadLoop(4, () => ask(`${h.url}/v1/models`, key));
    await load.answered(20); // counted while Redis is there
    const limiterErrors = async () => Number(/^svc_rate_limiter_errors_total (\d+)/m.exec((await h.runtime.ctx.metrics.render()).body)?.[1] ?? 0);
    expect(await limiterErrors()).toBe(0);
    await killRedis();
    // The gateway has noticed once a request was admitted uncounted; the load runs on through the outage.
    await underLoad('a request admitted without Redis', load, async () => ((await limiterErrors()) > 0 ? true : undefined));
    await load.answered(load.answers.length + 20);
    // With Redis gone, a limited key is not limited (and nothing fails).
    expect(await window(3, 5)).toEqual([200, 200, 200, 200, 200]);
    await startRedis();
    // ioredis reconnects with backoff; the first limited window after that counts again.
    await underLoad('the limiter to count again', load, async () => ((await window(3, 4)).join() === '200,200,200,429' ? true : undefined));
    const answers = await load.stop();
    expect(tally(answers)).toEqual({ '200': answers.length });
    expect(answers.length).toBeGreaterThan(10);
  });

  it('a gateway starting while Redis is down waits for it and counts from its first request', async () => {
    await killRedis();
    // Meanwhile Redis's port takes connections and cuts each at once: nothing a client can use.
    // The gateway is waiting for Redis once it has tried several times (ioredis backs off 50,
    // 100, 150... ms between tries: eight take about 1.4 s), and by then it must not be listening.
    let tries = 0;
    let triedEnough!: () => void;
    const enoughTries = new Promise<void>((r) => (triedEnough = r));
    const cutter = createServer((socket) => {
      socket.destroy();
      if (++tries === 8) triedEnough();
    });
    await new Promise<void>((r) => cutter.listen(port, '127.0.0.1', () => r()));
    let listening = false;
    const starting = startGateway({ env: { REDIS_URL: `redis://127.0.0.1:${port}` }, clock }).then((g) => {
      listening = true;
      return { g, listeningAt: Date.now() };
    });
    await enoughTries;
    expect(listening).toBe(false);
    await new Promise((r) => cutter.close(r));
    const redisStartedAt = Date.now();
    await startRedis();
    const { g, listeningAt } = await starting;
    try {
      // It did not listen before Redis was there (it would have admitted uncounted requests).
      expect(listeningAt).toBeGreaterThanOrEqual(redisStartedAt);
      const { key } = await orgWithKey(g.testDb.db, 1_000_000n, 2);
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await ask(`${g.url}/v1/models`, key)).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(Number(/^svc_rate_limiter_errors_total (\d+)/m.exec((await g.runtime.ctx.metrics.render()).body)?.[1] ?? 0)).toBe(0);
    } finally {
      await g.close();
    }
  });

  it('a gateway whose Redis never answers starts anyway after a bounded wait, and serves', async () => {
    const deadPort = await freePort();
    const started = Date.now();
    const g = await startGateway({ env: { REDIS_URL: `redis://127.0.0.1:${deadPort}` } });
    try {
      expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
      expect((await ask(`${g.url}/v1/models`, g.key)).status).toBe(200);
    } finally {
      await g.close();
    }
  });
});

// ---------------------------------------------------------------------------------------

/** A TCP proxy to PostgreSQL that can be taken down (listener closed, connections cut) and brought back on the same port. */
async function pgProxy(target: { host: string; port: number }) {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  const up = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = connect(target.port, target.host);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {});
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  const down = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (!server) return resolve();
      server.close(() => resolve());
      server = null;
    });
  await up();
  return { port, up, down };
}

describe('PostgreSQL unreachable and back under load', () => {
  let t: TestDatabase;
  let upstream: ScriptedUpstream;
  let proxy: Awaited<ReturnType<typeof pgProxy>>;
  let runtime: GatewayRuntime;
  let url: string;

  beforeAll(async () => {
    t = await createTestDatabase('postgresql');
    upstream = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } });
    await upsertModel(t.db.prisma, checkProtocol, {
      id: 'pg-llm',
      modality: 'llm',
      prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
      upstream: { url: upstream.baseUrl, protocol: 'openai' },
    });
    const direct = new URL(t.url);
    proxy = await pgProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
    const viaProxy = new URL(t.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const config = loadConfig({
      SVC_DATA_DIR: t.dataDir,
      DATABASE_URL: viaProxy.toString(),
      LOG_LEVEL: 'silent',
      SVC_MODELS_FILE: '/nonexistent',
      SVC_REGISTRY_REFRESH_SECONDS: '0.2',
      SVC_HEALTH_CHECK_SECONDS: '3600',
      SVC_WORKER: 'off',
    });
    runtime = await createGatewayRuntime(config, { logger: false });
    url = await runtime.app.listen({ host: '127.0.0.1', port: 0 });
  }, 60_000);

  afterAll(async () => {
    await proxy?.up().catch(() => {});
    await runtime?.close();
    await upstream?.close();
    await t?.drop();
  }, 60_000);

  it('503 verify_unavailable while it is away (never a 500), service resumes by itself, the ledger stays consistent', async () => {
    const { orgId, key } = await orgWithKey(t.db, 1_000_000n);
    const chat = () => ask(`${url}/v1/chat/completions`, key, { method: 'POST', body: chatBody('pg-llm', false) });
    expect(await chat()).toEqual({ status: 200, code: undefined });

    const load = loadLoop(4, chat);
    await load.answered(20); // served while the database is there
    await proxy.down();
    // While it is away: every request is refused with the spec's retryable 503.
    const during = await underLoad('503 verify_unavailable', load, async () => {
      const a = await chat();
      return a.status === 503 && a.code === 'verify_unavailable' ? a : undefined;
    });
    expect(during).toEqual({ status: 503, code: 'verify_unavailable' });
    const ready = await fetch(`${url}/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { database: string }).database).toBe('down');
    await load.answered(load.answers.length + 20); // the load runs on through the outage

    await proxy.up();
    await underLoad('chat to succeed again', load, async () => ((await chat()).status === 200 ? true : undefined));
    const answers = await load.stop();

    const counts = tally(answers);
    expect(
      Object.keys(counts).every((k) => ['200', '503 verify_unavailable', '503 temporarily_unavailable'].includes(k)),
      JSON.stringify(counts),
    ).toBe(true);
    expect(counts['503 verify_unavailable']).toBeGreaterThan(0);
    expect(counts['200']).toBeGreaterThan(0);

    // Every 200 was billed (7 micro-USD each). A request whose debit failed got 503
    // temporarily_unavailable; its debit may still have committed if only the reply from
    // the database was lost, so those count at most once each.
    const ok = answers.filter((a) => a.status === 200).length + 2; // + the two single calls above
    const unrecorded = counts['503 temporarily_unavailable'] ?? 0;
    const usage = (await usageRows(t.db.prisma, { orgId })).length;
    expect(usage).toBeGreaterThanOrEqual(ok);
    expect(usage).toBeLessThanOrEqual(ok + unrecorded);
    expect(await expectLedgerConsistent(t.db, orgId)).toBe(1_000_000n - 7n * BigInt(usage));
  });
});
