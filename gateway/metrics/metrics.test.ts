// GET /metrics over real HTTP: who may scrape it (bearer token on the public port, a separate
// loopback listener), and that the series move with real traffic through the real gateway:
// requests by route pattern/model/status, time to first token/audio/transcript, active
// streams and WebSocket sessions, upstream health and errors, credits debited.
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { sseReader } from '../../test/support/sse-client.ts';
import { freePort } from '../../test/support/svc-process.ts';
import { openSession, s16le, settleRecognizers, speech } from '../../test/support/stt-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (enough of it for these series). */
function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one sample with this name whose labels include `labels` (0 when absent). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  expect(found.length, `${name} ${JSON.stringify(labels)} matched ${found.length} series`).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

let h: GatewayHarness;
let metricsPort: number;
let up: ScriptedUpstream;

async function scrape(): Promise<Sample[]> {
  const res = await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

const chat = (body: unknown) => fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: h.headers, body: JSON.stringify(body) });

beforeAll(async () => {
  metricsPort = await freePort();
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_METRICS_TOKEN: TOKEN, SVC_METRICS_PORT: String(metricsPort) } });
  up = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'm-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 2_000_000n },
    upstream: { url: up.baseUrl, protocol: 'openai' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'm-dead',
    modality: 'llm',
    prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
    upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
  await up?.close();
});

describe('who may scrape', () => {
  it.each([
    { name: 'no Authorization', headers: {} as Record<string, string> },
    { name: 'a wrong token', headers: { authorization: `Bearer ${TOKEN}x` } },
    { name: 'an API key instead of the token', headers: {} as Record<string, string>, apiKey: true },
    { name: 'the token without the Bearer scheme', headers: { authorization: TOKEN } },
  ])('public port, $name -> 401 in the envelope', async ({ headers, apiKey }) => {
    const res = await fetch(`${h.url}/metrics`, { headers: apiKey ? { authorization: h.headers.authorization! } : headers });
    expect(res.status).toBe(401);
    const body = (await res.json()) as { error: { code: string; type: string; param: null; message: string } };
    expect(body.error).toMatchObject({ code: 'invalid_api_key', type: 'invalid_request_error', param: null });
    expect(body.error.message).toMatch(/SVC_METRICS_TOKEN/);
    expect(JSON.stringify(body)).not.toContain(TOKEN);
  });

  it('the separate listener serves /metrics (token required when configured) and nothing else', async () => {
    const base = `http://127.0.0.1:${metricsPort}`;
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const ok = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('svc_http_requests_total');
    expect((await fetch(`${base}/v1/models`, { headers: h.headers })).status).toBe(404);
    // Only on loopback: the listener's address is 127.0.0.1.
    expect(h.runtime.metricsServer?.address()).toMatchObject({ address: '127.0.0.1', port: metricsPort });
  });

  it('without SVC_METRICS_TOKEN the public port has no /metrics (404 not_found)', async () => {
    const g = await startGateway();
    try {
      const res = await fetch(`${g.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
      expect(g.runtime.metricsServer).toBeNull();
    } finally {
      await g.close();
    }
  });
});

describe('series after traffic', () => {
  it('requests by route pattern, model and status; credits debited equal the ledger', async () => {
    const before = await scrape();
    const balanceBefore = await h.balanceMicros();
    up.behaviour = { kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } };
    for (let i = 0; i < 3; i++) expect((await chat({ model: 'm-llm', messages: [] })).status).toBe(200);
    up.behaviour = { kind: 'error', status: 500, body: { error: { message: 'boom' } } };
    expect((await chat({ model: 'm-llm', messages: [] })).status).toBe(502);
    expect((await chat({ model: 'no-such-model', messages: [] })).status).toBe(404);
    // A raw path with an id in it must not become a label.
    expect((await fetch(`${h.url}/v1/nothing/here-12345`, { headers: h.headers })).status).toBe(404);
    up.behaviour = { kind: 'ok' };
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) => value(after, name, labels) - value(before, name, labels);

    const route = { route: '/v1/chat/completions', method: 'POST' };
    expect(delta('svc_http_requests_total', { ...route, status: '200', model: 'm-llm' })).toBe(3);
    expect(delta('svc_http_requests_total', { ...route, status: '502', model: 'm-llm' })).toBe(1);
    expect(delta('svc_http_requests_total', { ...route, status: '404', model: '' })).toBe(1);
    expect(delta('svc_http_requests_total', { route: 'unmatched', method: 'GET', status: '404', model: '' })).toBe(1);
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes('here-12345')))).toBe(false);
    expect(delta('svc_http_request_duration_seconds_count', { ...route, status: '200' })).toBe(3);
    expect(delta('svc_upstream_errors_total', { model: 'm-llm', upstream: up.baseUrl, kind: 'http_status' })).toBe(1);
    // 1000 x 1 + 1000 x 2 micro-USD = 3000 per request.
    expect(delta('svc_credits_debited_micros_total', { modality: 'llm', model: 'm-llm' })).toBe(9000);
    expect(balanceBefore - (await h.balanceMicros())).toBe(9000n);
  });

  it('a stream: active while open, then closed; time to first token observed', async () => {
    const route = { route: '/v1/chat/completions' };
    const before = await scrape();
    up.behaviour = { kind: 'stream', chunks: ['a', 'b', 'c', 'd'], delayMs: 300 };
    const res = await chat({ model: 'm-llm', stream: true, messages: [] });
    expect(res.status).toBe(200);
    const events = sseReader(res);
    expect(await events.next()).toContain('"a"');
    const during = await scrape();
    expect(value(during, 'svc_active_streams', route)).toBe(value(before, 'svc_active_streams', route) + 1);
    const rest = await events.rest();
    expect(rest.at(-1)).toBe('[DONE]');
    up.behaviour = { kind: 'ok' };
    // The gauge drops when the response has closed, which may be a moment after the last byte.
    await expect.poll(async () => value(await scrape(), 'svc_active_streams', route), { timeout: 10_000 }).toBe(value(before, 'svc_active_streams', route));
    const after = await scrape();
    const kind = { kind: 'llm_first_token', model: 'm-llm' };
    expect(value(after, 'svc_time_to_first_output_seconds_count', kind) - value(before, 'svc_time_to_first_output_seconds_count', kind)).toBe(1);
    // Observed at the first token, not at the end: the upstream waits 300 ms after each of the
    // 4 chunks, so the whole request took at least 1.2 s more than its first token, however
    // slow the machine (compared with the request's own duration, not with a fixed figure).
    const firstToken = value(after, 'svc_time_to_first_output_seconds_sum', kind) - value(before, 'svc_time_to_first_output_seconds_sum', kind);
    const duration = { ...route, method: 'POST', status: '200' };
    const whole = value(after, 'svc_http_request_duration_seconds_sum', duration) - value(before, 'svc_http_request_duration_seconds_sum', duration);
    expect(whole - firstToken).toBeGreaterThan(1.1);
  });

  it('upstream health: 1 for a live upstream, 0 for a dead one; connection failures counted', async () => {
    await h.runtime.ctx.health.checkAll();
    const s = await scrape();
    expect(value(s, 'svc_upstream_up', { model: 'm-llm', upstream: up.baseUrl })).toBe(1);
    expect(value(s, 'svc_upstream_up', { model: 'm-dead', upstream: 'http://127.0.0.1:9/v1' })).toBe(0);
    expect(value(s, 'svc_upstream_health_checks_total', { model: 'm-dead', upstream: 'http://127.0.0.1:9/v1', result: 'down' })).toBeGreaterThanOrEqual(2);
    expect(value(s, 'svc_upstream_health_checks_total', { model: 'm-llm', upstream: up.baseUrl, result: 'up' })).toBeGreaterThanOrEqual(2);
  });

  it('TTS: time to first audio and the debit', async () => {
    const before = await scrape();
    const res = await fetch(`${h.url}/tts/sse`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({
        model_id: 'local-flite',
        transcript: 'Hello there.',
        voice: { mode: 'id', id: 'flite-slt' },
        output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' },
      }),
    });
    expect(res.status).toBe(200);
    const events = await sseReader(res).rest();
    expect(JSON.parse(events.at(-1)!)).toMatchObject({ type: 'done' });
    const after = await scrape();
    const kind = { kind: 'tts_first_audio', model: 'local-flite' };
    expect(value(after, 'svc_time_to_first_output_seconds_count', kind) - value(before, 'svc_time_to_first_output_seconds_count', kind)).toBe(1);
    // The first audible sample (flite's speech is not silent): once, no sooner than the first audio.
    const audible = { kind: 'tts_first_audible', model: 'local-flite' };
    expect(value(after, 'svc_time_to_first_output_seconds_count', audible) - value(before, 'svc_time_to_first_output_seconds_count', audible)).toBe(1);
    const sum = (m: string, k: Record<string, string>) => value(after, m, k) - value(before, m, k);
    expect(sum('svc_time_to_first_output_seconds_sum', audible)).toBeGreaterThanOrEqual(sum('svc_time_to_first_output_seconds_sum', kind));
    // 12 characters x 1 micro-USD.
    const debit = { modality: 'tts', model: 'local-flite' };
    expect(value(after, 'svc_credits_debited_micros_total', debit) - value(before, 'svc_credits_debited_micros_total', debit)).toBe(12);
    expect(value(after, 'svc_http_requests_total', { route: '/tts/sse', method: 'POST', status: '200', model: 'local-flite' })).toBe(1);
  });

  it('STT WebSocket: the session gauge while open, time to first transcript, audio debited', async () => {
    const audio = await speech('Hello world.');
    const before = await scrape();
    const session = await openSession(h, { model: 'local-stt', api_key: h.key, sample_rate: '16000', encoding: 'pcm_s16le' });
    await session.until((e) => e.type === 'session.started');
    const during = await scrape();
    const ws = { route: '/stt/websocket' };
    expect(value(during, 'svc_websocket_sessions', ws)).toBe(value(before, 'svc_websocket_sessions', ws) + 1);
    await session.stream(s16le(audio.samples), { frameBytes: 3200, intervalMs: 0 });
    session.command({ type: 'close' });
    const closed = await session.closed;
    expect(closed.code).toBe(1000);
    expect(session.ofType('transcript').length).toBeGreaterThan(0);
    await settleRecognizers();
    // The gauge drops when the server side of the socket has closed, a moment after the client's.
    await expect.poll(async () => value(await scrape(), 'svc_websocket_sessions', ws), { timeout: 10_000 }).toBe(value(before, 'svc_websocket_sessions', ws));
    const after = await scrape();
    const kind = { kind: 'stt_first_transcript', model: 'local-stt' };
    expect(value(after, 'svc_time_to_first_output_seconds_count', kind) - value(before, 'svc_time_to_first_output_seconds_count', kind)).toBe(1);
    const debit = { modality: 'stt', model: 'local-stt' };
    expect(value(after, 'svc_credits_debited_micros_total', debit) - value(before, 'svc_credits_debited_micros_total', debit)).toBeGreaterThan(0);
    expect(session.ws.readyState).toBe(WebSocket.CLOSED);
  });

  it('process metrics are there (RSS, event loop)', async () => {
    const s = await scrape();
    expect(value(s, 'process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
    expect(s.some((x) => x.name.startsWith('nodejs_eventloop_lag'))).toBe(true);
  });
});
