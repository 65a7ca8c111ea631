// Graceful shutdown of a real `svc gateway` process (SIGTERM), against a slow scripted
// upstream, on the test database (SQLite, or PostgreSQL with TEST_DB=postgresql):
// - a stream in flight that ends within the grace period completes and is billed; new
//   connections are refused at once; the process exits 0;
// - a stream still running at the deadline ends with an error event and [DONE], is billed for
//   what was delivered, and its engine request is cancelled;
// - a WebSocket session still open at the deadline gets an error event, session.closed and
//   close 1001, and its audio is billed;
// - a request reaching a draining gateway is refused with 503 in the envelope.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../support/scripted-openai-upstream.ts';
import { sseReader } from '../support/sse-client.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { openSession, s16le, speech } from '../support/stt-routes.ts';
import { pcmTone, startSpeechServer, type SpeechServer } from '../support/tts-routes.ts';
import { newId } from '../../server/db/ids.ts';
import { chatBody, expectLedgerConsistent, orgWithKey } from '../support/ops-fixture.ts';
import { connectionRefused, startSvcGateway, stopSvc, type SvcProcess } from '../support/svc-process.ts';
import { until } from '../support/poll.ts';
import { usageRows } from '../support/usage-rows.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 90_000 });

let t: TestDatabase;
let upstream: ScriptedUpstream;
let speechServer: SpeechServer;
let ttsVoice: string;
const started: SvcProcess[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  upstream = await startScriptedUpstream();
  // 1 micro-USD per token either way, so costs are token counts.
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'slow-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
    upstream: { url: upstream.baseUrl, protocol: 'openai' },
  });
  // A speech engine that sends its first audio, then nothing more (a long synthesis in progress).
  speechServer = await startSpeechServer({ kind: 'pcm', pcm: pcmTone(2), stopAfterBytes: 9600, then: 'hang' });
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'slow-tts',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: speechServer.baseUrl, protocol: 'openai' },
  });
  ttsVoice = newId('voice');
  await t.db.prisma.voice.create({
    data: {
      id: ttsVoice,
      orgId: null,
      name: 'shutdown voice',
      tags: [],
      profiles: { create: { id: newId('vpr'), modelId: 'slow-tts', upstreamId: 'alloy', status: 'ready' } },
    },
  });
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(started.map((p) => stopSvc(p, 2_000)));
  await upstream?.close();
  await speechServer?.close();
  await t?.drop();
}, 60_000);

async function gateway(name: string, graceSeconds: number): Promise<SvcProcess> {
  const p = await startSvcGateway(name, { DATABASE_URL: t.url, SVC_DATA_DIR: t.dataDir, SVC_SHUTDOWN_GRACE_SECONDS: String(graceSeconds) });
  started.push(p);
  return p;
}

const streamChat = (gw: SvcProcess, key: string, requestId: string) =>
  fetch(`${gw.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: chatBody('slow-llm', true),
  });

const contentOf = (data: string): string | null => {
  if (data === '[DONE]') return null;
  const parsed = JSON.parse(data) as { choices?: { delta?: { content?: string } }[] };
  return parsed.choices?.[0]?.delta?.content ?? null;
};

describe('SIGTERM on svc gateway', () => {
  it('a stream that ends within the grace period completes and is billed; new connections are refused; exit 0', async () => {
    const gw = await gateway('drain-complete', 10);
    const { orgId, key } = await orgWithKey(t.db, 1_000_000n);
    const chunks = ['one', ' two', ' three', ' four', ' five', ' six', ' seven', ' eight'];
    upstream.behaviour = { kind: 'stream', chunks, delayMs: 200, usage: { prompt_tokens: 10, completion_tokens: chunks.length } };
    const res = await streamChat(gw, key, 'shutdown-complete-1');
    expect(res.status).toBe(200);
    const events = sseReader(res);
    expect(contentOf((await events.next())!)).toBe('one');

    gw.child.kill('SIGTERM');
    // The listener closes at once: a new connection is refused while the stream still runs.
    await until('the port to refuse connections', () => connectionRefused(gw.port), { timeoutMs: 5_000 });
    const rest = await events.rest();
    expect(rest.at(-1)).toBe('[DONE]');
    expect(rest.some((e) => e.includes('"error"'))).toBe(false);
    expect(rest.map(contentOf).filter((c) => c !== null)).toEqual(chunks.slice(1));

    expect(await gw.exited).toEqual({ code: 0, signal: null });
    // Billed before the process exited: the engine's usage, 10 + 8 micro-USD.
    const usage = await usageRows(t.db.prisma, { orgId });
    expect(usage.map((u) => [u.requestId, u.inputTokens, u.outputTokens, u.costMicros])).toEqual([['shutdown-complete-1', 10, 8, 18n]]);
    expect(await expectLedgerConsistent(t.db, orgId)).toBe(1_000_000n - 18n);
    await gw.outputClosed; // every line, the last batch (written at exit) included
    expect(gw.output()).not.toMatch(/"level":(50|60)/); // no error or fatal log lines
  });

  it('a stream still running at the deadline ends with an error event and [DONE], billed for what was delivered; the engine request is cancelled', async () => {
    const gw = await gateway('drain-deadline', 1);
    const { orgId, key } = await orgWithKey(t.db, 1_000_000n);
    const chunks = Array.from({ length: 100 }, (_, i) => `w${i} `);
    upstream.behaviour = { kind: 'stream', chunks, delayMs: 100 };
    const streamsBefore = upstream.streams.length;
    const res = await streamChat(gw, key, 'shutdown-deadline-1');
    expect(res.status).toBe(200);
    const events = sseReader(res);
    const received: string[] = [contentOf((await events.next())!)!];
    gw.child.kill('SIGTERM');
    const rest = await events.rest();
    expect(rest.at(-1)).toBe('[DONE]');
    const error = JSON.parse(rest.at(-2)!) as { error: { code: string; type: string; message: string; param: null } };
    expect(error.error).toMatchObject({ code: 'temporarily_unavailable', type: 'api_error', param: null });
    expect(error.error.message).toMatch(/shutting down/);
    received.push(...rest.slice(0, -2).map((e) => contentOf(e)!));
    expect(received).toEqual(chunks.slice(0, received.length));
    expect(received.length).toBeLessThan(chunks.length);

    expect(await gw.exited).toEqual({ code: 0, signal: null });
    const record = upstream.streams[streamsBefore]!;
    expect(record.ended).toBe(false);
    expect(record.closedEarly).toBe(true);
    // No usage from the engine (it was cut): the delivered chunks and the prompt estimate.
    const usage = await usageRows(t.db.prisma, { orgId });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({ requestId: 'shutdown-deadline-1', outputTokens: received.length });
    expect(usage[0]!.costMicros).toBe(BigInt(usage[0]!.inputTokens + received.length));
    await expectLedgerConsistent(t.db, orgId);
  });

  it('a TTS stream still running at the deadline ends with an error event (billed per character at its first audio, as always)', async () => {
    const gw = await gateway('drain-tts', 1);
    const { orgId, key } = await orgWithKey(t.db, 1_000_000n);
    const transcript = 'A long synthesis that will not finish.';
    const res = await fetch(`${gw.base}/tts/sse`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model_id: 'slow-tts',
        transcript,
        voice: { mode: 'id', id: ttsVoice },
        output_format: { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
      }),
    });
    expect(res.status).toBe(200);
    const events = sseReader(res);
    expect(JSON.parse((await events.next())!)).toMatchObject({ type: 'chunk' });
    gw.child.kill('SIGTERM');
    const rest = (await events.rest()).map((e) => JSON.parse(e) as { type: string; error_code?: string; status_code?: number });
    expect(rest.at(-1)).toMatchObject({ type: 'error', error_code: 'temporarily_unavailable', status_code: 503 });
    expect(rest.some((e) => e.type === 'done')).toBe(false);
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    expect(await expectLedgerConsistent(t.db, orgId)).toBe(1_000_000n - BigInt([...transcript].length));
  });

  it('a WebSocket session open at the deadline gets an error event, session.closed and close 1001; its audio is billed', async () => {
    const gw = await gateway('drain-ws', 1);
    const { orgId, key } = await orgWithKey(t.db, 10_000_000n);
    const audio = await speech('Shutting down now.');
    const session = await openSession({ url: gw.base } as GatewayHarness, { model: 'local-stt', api_key: key, sample_rate: '16000', encoding: 'pcm_s16le' });
    await session.until((e) => e.type === 'session.started');
    await session.stream(s16le(audio.samples), { frameBytes: 3200, intervalMs: 0 });
    gw.child.kill('SIGTERM');
    const closed = await session.closed;
    expect(closed).toEqual({ code: 1001, reason: 'shutdown' });
    const error = session.ofType('error')[0];
    expect(error).toMatchObject({ code: 'temporarily_unavailable' });
    const end = session.ofType('session.closed')[0] as { reason: string; audio_seconds: number; cost_usd: string } | undefined;
    expect(end).toMatchObject({ reason: 'shutdown', audio_seconds: audio.samples.length / 16000 });
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    const usage = await usageRows(t.db.prisma, { orgId });
    expect(usage.reduce((s, u) => s + u.audioMillis, 0)).toBe(Math.round((audio.samples.length * 1000) / 16000));
    const billed = usage.reduce((s, u) => s + u.costMicros, 0n);
    expect(end!.cost_usd).toBe(`0.${billed.toString().padStart(6, '0')}`);
    await expectLedgerConsistent(t.db, orgId);
  });
});

describe('draining (in-process)', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGateway();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a request that reaches a draining gateway gets 503 temporarily_unavailable in the envelope, with Connection: close', async () => {
    expect((await fetch(`${h.url}/v1/models`, { headers: h.headers })).status).toBe(200);
    h.runtime.ctx.lifecycle.beginDrain();
    for (const path of ['/v1/models', '/health', '/no/such/path']) {
      const res = await fetch(`${h.url}${path}`, { headers: h.headers });
      expect(res.status).toBe(503);
      expect(res.headers.get('connection')).toBe('close');
      const body = (await res.json()) as { error: { code: string; type: string; param: null; message: string } };
      expect(body.error).toMatchObject({ code: 'temporarily_unavailable', type: 'api_error', param: null });
    }
  });
});
