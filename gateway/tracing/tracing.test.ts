// OpenTelemetry traces over real HTTP: a real gateway exporting OTLP/HTTP JSON to a scripted
// collector, a scripted OpenAI-compatible upstream. Server spans per request and WebSocket
// session, upstream attempt spans, debit spans, traceparent in and out, flush on shutdown,
// nothing secret in an export; and with no endpoint configured, nothing at all.
import { hasSubscribers } from 'node:diagnostics_channel';
import { request } from 'node:http';
import { trace } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../server/config/env.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { GatewayTracing } from './gateway-tracing.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startOtlpCollector, type CollectedSpan, type OtlpCollector } from '../../test/support/otlp-collector.ts';
import { until } from '../../test/support/poll.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { openSession, s16le, settleRecognizers, speech } from '../../test/support/stt-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';

async function registerModels(h: GatewayHarness, up: ScriptedUpstream): Promise<void> {
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'm-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 2_000_000n },
    upstream: { url: up.baseUrl, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
}

const chat = (h: GatewayHarness, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: { ...h.headers, ...headers }, body: JSON.stringify(body) });

/** The W3C traceparent fields. */
function parseTraceparent(value: unknown): { traceId: string; parentId: string; flags: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(value));
  expect(m, `traceparent ${String(value)}`).not.toBeNull();
  return { traceId: m![1]!, parentId: m![2]!, flags: m![3]! };
}

describe('tracing off (no OTLP endpoint)', () => {
  let h: GatewayHarness;
  let up: ScriptedUpstream;
  beforeAll(async () => {
    h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
    up = await startScriptedUpstream({ kind: 'ok' });
    await registerModels(h, up);
  });
  afterAll(async () => {
    await h?.close();
    await up?.close();
  });

  it('builds no tracing, registers nothing, subscribes to nothing, and sends no traceparent upstream', async () => {
    expect(h.runtime.ctx.tracing).toBeUndefined();
    // No global tracer provider: the API hands out non-recording spans.
    const probe = trace.getTracer('probe').startSpan('probe');
    expect(probe.isRecording()).toBe(false);
    probe.end();
    // undici publishes request events only to subscribers: none, so the hot path pays nothing.
    expect(hasSubscribers('undici:request:create')).toBe(false);
    const res = await chat(h, { model: 'm-llm', messages: [{ role: 'user', content: 'hi' }] }, { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    expect(res.status).toBe(200);
    expect(up.received.at(-1)!.headers.traceparent).toBeUndefined();
  });
});

describe('tracing configuration', () => {
  const base = { SVC_DATA_DIR: '/tmp/svc-tracing-config' };
  it('is off without an endpoint, and with OTEL_SDK_DISABLED=true', () => {
    expect(loadConfig(base).tracing).toBeUndefined();
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: '' }).tracing).toBeUndefined();
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }).tracing).toBeUndefined();
  });
  it('derives the traces URL as the OTLP specification says, the signal-specific variable first', () => {
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      tracesUrl: 'http://collector:4318/v1/traces',
      serviceName: 'svc-gateway',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    expect(
      loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318/otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/custom' }).tracing?.tracesUrl,
    ).toBe('http://b:4318/custom');
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318/otlp' }).tracing?.tracesUrl).toBe('http://a:4318/otlp/v1/traces');
    expect(
      loadConfig({
        ...base,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/v1/traces',
        OTEL_SERVICE_NAME: 'gw-eu',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }).tracing,
    ).toEqual({ tracesUrl: 'https://b/v1/traces', serviceName: 'gw-eu', sampler: 'parentbased_traceidratio', samplerRatio: 0.25 });
  });
  it.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'sometimes' }, 'OTEL_TRACES_SAMPLER'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG'],
  ])('refuses %j naming the variable', (env, name) => {
    expect(() => loadConfig({ ...base, ...env })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, ...env })).toThrow(name);
  });
});

describe('tracing on', () => {
  let h: GatewayHarness;
  let up: ScriptedUpstream;
  let collector: OtlpCollector;

  beforeAll(async () => {
    collector = await startOtlpCollector();
    h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'svc-test-gateway' } });
    up = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } });
    await registerModels(h, up);
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'local-stt',
      modality: 'stt',
      prices: { picoPerSecond: 100_000_000n },
      upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
    });
    await h.runtime.ctx.registry.refresh();
  });
  afterAll(async () => {
    await settleRecognizers();
    await h?.close();
    await up?.close();
    await collector?.close();
  });

  /** Flushes the gateway's spans until `pick` finds what it wants among them (spans end a moment after the client has the response). */
  function spansUntil<T>(pick: (spans: CollectedSpan[]) => T | undefined): Promise<T> {
    return until(
      'the spans',
      async () => {
        await h.runtime.ctx.tracing!.flush();
        return pick(collector.spans);
      },
      { intervalMs: 20, seen: () => `have: ${collector.spans.map((s) => s.name).join(', ')}` },
    );
  }

  const serverSpanOf = (requestId: string) => (spans: CollectedSpan[]) => spans.find((s) => s.kind === SERVER && s.attributes['svc.request_id'] === requestId);
  const childrenOf = (parent: CollectedSpan) => collector.spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

  it('registers no global tracer provider even when on (the runtime owns its tracing)', () => {
    expect(h.runtime.ctx.tracing).toBeDefined();
    expect(trace.getTracer('probe').startSpan('probe').isRecording()).toBe(false);
  });

  it('a chat completion: server span continuing the caller traceparent, an upstream child span, a debit child span; the upstream gets the trace', async () => {
    const res = await chat(
      h,
      { model: 'm-llm', messages: [{ role: 'user', content: 'hi' }] },
      { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, 'x-request-id': 'req_trace_chat_1' },
    );
    expect(res.status).toBe(200);
    await res.text();
    const server = await spansUntil(serverSpanOf('req_trace_chat_1'));
    expect(server.name).toBe('POST /v1/chat/completions');
    expect(server.traceId).toBe(TRACE_ID);
    expect(server.parentSpanId).toBe(PARENT_ID);
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/v1/chat/completions',
      'url.path': '/v1/chat/completions',
      'http.response.status_code': 200,
      'svc.request_id': 'req_trace_chat_1',
      'svc.model': 'm-llm',
      'svc.org_id': h.orgId,
    });
    expect(server.attributes['svc.client_gone']).toBeUndefined();
    expect(server.statusCode).not.toBe(ERROR);
    expect(server.resource['service.name']).toBe('svc-test-gateway');

    const upstream = await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
    expect(upstream.name).toBe('upstream openai');
    expect(upstream.attributes).toMatchObject({
      'svc.upstream.id': h.runtime.ctx.registry.resolve('m-llm', 'llm', null).upstreams[0]!.id,
      'svc.upstream.url': up.baseUrl,
      'svc.upstream.protocol': 'openai',
      'svc.upstream.outcome': 'ok',
      'http.response.status_code': 200,
    });
    expect(upstream.events.map((e) => e.name)).toEqual(['upstream.first_byte']);

    // The engine saw the same trace, with the attempt span as the parent.
    const sent = parseTraceparent(up.received.at(-1)!.headers.traceparent);
    expect(sent).toEqual({ traceId: TRACE_ID, parentId: upstream.spanId, flags: '01' });

    const debit = await spansUntil(() => childrenOf(server).find((s) => s.name === 'credits.debit'));
    // 1000 tokens in and out at 1 and 2 micro-USD.
    expect(debit.attributes).toMatchObject({
      'svc.request_id': 'req_trace_chat_1',
      'svc.org_id': h.orgId,
      'svc.model': 'm-llm',
      'svc.modality': 'llm',
      'svc.cost_micros': 3000,
    });
  });

  it('without a traceparent: a new trace; a stream: the upstream span lasts until the body ends, the debit at its end is still a child', async () => {
    // The engine sleeps 30 ms after each of its two chunks: its body ends >= 60 ms after its headers.
    up.behaviour = { kind: 'stream', chunks: ['Hel', 'lo'], delayMs: 30, usage: { prompt_tokens: 3, completion_tokens: 2 } };
    try {
      const res = await chat(h, { model: 'm-llm', stream: true, messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-id': 'req_trace_stream_1' });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('[DONE]');
    } finally {
      up.behaviour = { kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } };
    }
    const server = await spansUntil(serverSpanOf('req_trace_stream_1'));
    expect(server.traceId).not.toBe(TRACE_ID);
    expect(server.parentSpanId).toBe('');
    expect(server.attributes['http.response.status_code']).toBe(200);
    const upstream = await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
    expect(upstream.attributes['svc.upstream.outcome']).toBe('ok');
    const firstByte = upstream.events.find((e) => e.name === 'upstream.first_byte')!.timeNs;
    expect(upstream.endNs - firstByte).toBeGreaterThanOrEqual(50_000_000n);
    expect(parseTraceparent(up.received.at(-1)!.headers.traceparent)).toMatchObject({ traceId: server.traceId, parentId: upstream.spanId });
    const debit = await spansUntil(() => childrenOf(server).find((s) => s.name === 'credits.debit'));
    expect(debit.attributes['svc.cost_micros']).toBe(3 + 2 * 2);
  });

  it('a body that arrives after the headers: the upstream and debit spans are still children of the request', async () => {
    // Body parsing runs on the socket's events, outside the request's async context.
    const body = JSON.stringify({ model: 'm-llm', messages: [{ role: 'user', content: 'late' }] });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...h.headers, 'content-length': Buffer.byteLength(body), 'x-request-id': 'req_trace_late_1' },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.flushHeaders();
      req.write(body.slice(0, 10));
      setTimeout(() => req.end(body.slice(10)), 100);
    });
    expect(status).toBe(200);
    const server = await spansUntil(serverSpanOf('req_trace_late_1'));
    await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
    await spansUntil(() => childrenOf(server).find((s) => s.name === 'credits.debit'));
    expect(parseTraceparent(up.received.at(-1)!.headers.traceparent).traceId).toBe(server.traceId);
  });

  it('a client that leaves mid-stream: client_gone on the server span, the upstream attempt cancelled', async () => {
    up.behaviour = { kind: 'stream', chunks: Array.from({ length: 50 }, (_, i) => `w${i} `), delayMs: 100 };
    const abort = new AbortController();
    try {
      const res = await fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...h.headers, 'x-request-id': 'req_trace_gone_1' },
        body: JSON.stringify({ model: 'm-llm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
        signal: abort.signal,
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      expect((await reader.read()).done).toBe(false);
      abort.abort();
      await reader.read().catch(() => undefined);
      const server = await spansUntil(serverSpanOf('req_trace_gone_1'));
      expect(server.attributes['svc.client_gone']).toBe(true);
      const upstream = await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
      expect(upstream.attributes['svc.upstream.outcome']).toBe('cancelled');
      expect(upstream.statusCode).not.toBe(ERROR);
      // What was delivered is still billed, under the same request.
      await spansUntil(() => childrenOf(server).find((s) => s.name === 'credits.debit'));
    } finally {
      up.behaviour = { kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } };
    }
  });

  it('an engine error: 502 server span with error status and code, upstream span outcome http_error', async () => {
    up.behaviour = { kind: 'error', status: 500, body: { error: { message: 'engine exploded' } } };
    try {
      const res = await chat(h, { model: 'm-llm', messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-id': 'req_trace_err_1' });
      expect(res.status).toBe(502);
      await res.text();
    } finally {
      up.behaviour = { kind: 'ok', usage: { prompt_tokens: 1000, completion_tokens: 1000 } };
    }
    const server = await spansUntil(serverSpanOf('req_trace_err_1'));
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 502, 'svc.error_code': 'upstream_error', 'error.type': 'upstream_error' });
    expect(server.statusCode).toBe(ERROR);
    const upstream = await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
    expect(upstream.attributes).toMatchObject({ 'svc.upstream.outcome': 'http_error', 'http.response.status_code': 500 });
    expect(upstream.statusCode).toBe(ERROR);
    expect(childrenOf(server).some((s) => s.name === 'credits.debit')).toBe(false);
  });

  it('an unreachable upstream: the attempt span says connect_failed, the request 502 upstream_unavailable', async () => {
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'm-dead',
      modality: 'llm',
      prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
      upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' },
    });
    await h.runtime.ctx.registry.refresh();
    const res = await chat(h, { model: 'm-dead', messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-id': 'req_trace_dead_1' });
    expect(res.status).toBe(502);
    await res.text();
    const server = await spansUntil(serverSpanOf('req_trace_dead_1'));
    expect(server.statusCode).toBe(ERROR);
    expect(server.statusMessage).toBe('upstream_unavailable');
    const upstream = await spansUntil(() => childrenOf(server).find((s) => s.kind === CLIENT));
    expect(upstream.attributes).toMatchObject({
      'svc.upstream.outcome': 'connect_failed',
      'error.type': 'ECONNREFUSED',
      'svc.upstream.url': 'http://127.0.0.1:9/v1',
    });
  });

  it('a refused request (bad key in the query) is a span without org, status 401, not an error; the key is in no export', async () => {
    const badKey = 'sk_svc_thisKeyDoesNotExist0123456789';
    const res2 = await fetch(`${h.url}/v1/chat/completions?api_key=${badKey}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${badKey}`, 'content-type': 'application/json', 'x-request-id': 'req_trace_401b' },
      body: '{}',
    });
    expect(res2.status).toBe(401);
    await res2.text();
    const server = await spansUntil(serverSpanOf('req_trace_401b'));
    expect(server.attributes['http.response.status_code']).toBe(401);
    expect(server.attributes['url.path']).toBe('/v1/chat/completions');
    expect(server.attributes['svc.org_id']).toBeUndefined();
    expect(server.statusCode).not.toBe(ERROR);
    const everything = collector.rawBodies.join('\n');
    expect(everything).not.toContain(badKey);
    expect(everything).not.toContain(h.key);
    expect(everything).not.toContain('sk_svc_');
  });

  it('an unknown route: named by its method only (raw paths never name spans)', async () => {
    const res = await fetch(`${h.url}/v1/nothing/here/123`, { headers: { 'x-request-id': 'req_trace_404' } });
    expect(res.status).toBe(404);
    await res.text();
    const server = await spansUntil(serverSpanOf('req_trace_404'));
    expect(server.name).toBe('GET');
    expect(server.attributes['http.route']).toBeUndefined();
    expect(server.attributes['http.response.status_code']).toBe(404);
  });

  it('a WebSocket session: one server span from upgrade to close (101), its debits as children, caller traceparent continued', async () => {
    const audio = await speech('Hello world.');
    const session = await openSession(
      h,
      { model: 'local-stt', api_key: h.key, sample_rate: '16000', encoding: 'pcm_s16le' },
      { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, 'x-request-id': 'req_trace_ws_1' } },
    );
    await session.until((e) => e.type === 'session.started');
    await session.stream(s16le(audio.samples), { frameBytes: 3200, intervalMs: 0 });
    // The span lasts until the session closes, which cannot happen before the client asks.
    const closeAskedNs = BigInt(Date.now()) * 1_000_000n;
    session.command({ type: 'close' });
    expect((await session.closed).code).toBe(1000);
    await settleRecognizers();
    const server = await spansUntil(serverSpanOf('req_trace_ws_1'));
    expect(server.name).toBe('GET /stt/websocket');
    expect(server.traceId).toBe(TRACE_ID);
    expect(server.endNs).toBeGreaterThanOrEqual(closeAskedNs - 20_000_000n);
    expect(server.attributes).toMatchObject({
      'http.response.status_code': 101,
      'svc.model': 'local-stt',
      'svc.org_id': h.orgId,
      'url.path': '/stt/websocket',
    });
    const debits = await spansUntil(() => {
      const found = childrenOf(server).filter((s) => s.name === 'credits.debit');
      return found.length > 0 ? found : undefined;
    });
    expect(debits.every((d) => d.attributes['svc.modality'] === 'stt' && d.attributes['svc.request_id'] === 'req_trace_ws_1')).toBe(true);
    expect(collector.rawBodies.join('\n')).not.toContain(h.key);
  });
});

describe('GatewayTracing with a failing exporter', () => {
  it('reports the change to failing once, and back once, not per batch', async () => {
    let fail = true;
    const exported: number[] = [];
    const exporter = {
      export: (spans: unknown[], done: (r: { code: number; error?: Error }) => void) => {
        exported.push(spans.length);
        done(fail ? { code: ExportResultCode.FAILED, error: new Error('collector unreachable') } : { code: ExportResultCode.SUCCESS });
      },
      shutdown: async () => {},
    };
    const tracing = new GatewayTracing({ tracesUrl: 'http://127.0.0.1:9/v1/traces', serviceName: 't', sampler: 'always_on', samplerRatio: 1 }, { exporter });
    const changes: [boolean, string | undefined][] = [];
    tracing.onExportStateChange = (failing, error) => changes.push([failing, error?.message]);
    const oneSpan = async () => {
      const rt = tracing.startRequest('GET /x', {}, {});
      tracing.endRequest(rt, { attributes: {}, errorMessage: undefined, clientGone: false });
      // A failed export rejects the flush (and drops the batch).
      await tracing.flush().catch(() => undefined);
    };
    await oneSpan();
    await oneSpan();
    fail = false;
    await oneSpan();
    await oneSpan();
    expect(exported).toEqual([1, 1, 1, 1]);
    expect(changes).toEqual([
      [true, 'collector unreachable'],
      [false, undefined],
    ]);
    expect(await tracing.shutdown(1000)).toBe(true);
  });

  it.each([
    'garbage',
    `00-${'0'.repeat(32)}-${PARENT_ID}-01`,
    `ff-${TRACE_ID}-${PARENT_ID}-01`,
    `00-${TRACE_ID}-${PARENT_ID}`,
    `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`,
  ])('an invalid incoming traceparent (%s) starts a new trace', async (traceparent) => {
    const spans: { traceId: string; parent: string | undefined }[] = [];
    const exporter = {
      export: (batch: { spanContext(): { traceId: string }; parentSpanContext?: { spanId: string } }[], done: (r: { code: number }) => void) => {
        for (const s of batch) spans.push({ traceId: s.spanContext().traceId, parent: s.parentSpanContext?.spanId });
        done({ code: ExportResultCode.SUCCESS });
      },
      shutdown: async () => {},
    };
    const tracing = new GatewayTracing(
      { tracesUrl: 'http://127.0.0.1:9/v1/traces', serviceName: 't', sampler: 'parentbased_always_on', samplerRatio: 1 },
      { exporter: exporter as never },
    );
    const rt = tracing.startRequest('GET /x', { traceparent }, {});
    tracing.endRequest(rt, { attributes: {}, errorMessage: undefined, clientGone: false });
    await tracing.flush();
    await tracing.shutdown(1000);
    expect(spans).toHaveLength(1);
    expect(spans[0]!.traceId).not.toBe(TRACE_ID);
    expect(spans[0]!.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(spans[0]!.parent).toBeUndefined();
  });
});

describe('tracing flush on shutdown', () => {
  it('spans still buffered when the gateway stops are exported before close() resolves', async () => {
    const collector = await startOtlpCollector();
    const up = await startScriptedUpstream({ kind: 'ok' });
    const h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces` } });
    try {
      await registerModels(h, up);
      const res = await chat(h, { model: 'm-llm', messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-id': 'req_trace_flush_1' });
      expect(res.status).toBe(200);
      await res.text();
      // The batch delay (5 s) has not passed: nothing was sent yet.
      expect(collector.spans.some((s) => s.attributes['svc.request_id'] === 'req_trace_flush_1')).toBe(false);
    } finally {
      await h.close();
      await up.close();
    }
    const server = collector.spans.find((s) => s.kind === SERVER && s.attributes['svc.request_id'] === 'req_trace_flush_1');
    expect(server?.resource['service.name']).toBe('svc-gateway');
    expect(
      collector.spans
        .filter((s) => s.traceId === server!.traceId)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['POST /v1/chat/completions', 'credits.debit', 'upstream openai']);
    await collector.close();
  });
});
