// OpenTelemetry traces of one gateway runtime, built only when an OTLP endpoint is configured
// (docs/operations.md, "Tracing"); otherwise nothing here is constructed and the request path has no
// hooks, no span objects and no diagnostics-channel subscribers.
//
// Nothing is registered globally (no global tracer provider, context manager or propagator):
// like the metrics, each runtime owns its tracing, so several runtimes can share a process.
//
// Spans: one SERVER span per HTTP request and WebSocket session (tracing-http.ts), a CLIENT
// span per upstream attempt (tryUpstreams), an INTERNAL span around each debit. Upstream HTTP
// requests (undici) carry `traceparent` via undici's diagnostics channels, which also tell
// each attempt when the engine's response headers came (the `upstream.first_byte` event) and
// when its body ended (the end of the attempt span). Attributes carry ids, never keys.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, createContextKey, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TraceSampler, TracingConfig } from '../../server/config/env.ts';
import { isServiceError } from '../../server/services/errors.ts';
import type { GatewayCore, RequestAuth } from '../core/gateway-core.ts';
import { upstreamLabel } from '../metrics/gateway-metrics.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import { isTimeout } from '../upstreams/engine-http.ts';
import { UpstreamError } from '../upstreams/contract.ts';

/** What became of an upstream attempt (attribute `svc.upstream.outcome`). */
export type AttemptOutcome = 'ok' | 'http_error' | 'connect_failed' | 'timeout' | 'broken' | 'stream_broken' | 'cancelled' | 'error' | 'unfinished';

/** The server span of one request or WebSocket session, and the upstream attempts still open under it. */
export interface RequestTrace {
  span: Span;
  context: Context;
  openAttempts: Set<AttemptTrace>;
  ended: boolean;
}

const REQUEST_TRACE = createContextKey('svc request trace');
const ATTEMPT_TRACE = createContextKey('svc upstream attempt');

/** The undici request object as its diagnostics channels publish it (only what is used here). */
interface UndiciRequest {
  headers: string | string[] | null;
  addHeader(name: string, value: string): unknown;
}

function samplerFor(kind: TraceSampler, ratio: number): Sampler {
  switch (kind) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

const hasTraceparent = (headers: UndiciRequest['headers']): boolean =>
  Array.isArray(headers) ? headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'traceparent') : /(^|\r\n)traceparent:/i.test(headers ?? '');

const isAbort = (e: unknown): boolean => {
  const err = e as { name?: string; code?: string } | null;
  return err?.name === 'AbortError' || err?.code === 'UND_ERR_ABORTED' || isServiceError(e);
};

/** One upstream attempt: its span ends when the attempt failed, or when it answered and its HTTP exchanges are over. */
export class AttemptTrace {
  readonly context: Context;
  private pendingHttp = 0;
  private settled = false;
  private ended = false;
  private firstByte = false;
  private outcome: AttemptOutcome = 'ok';

  constructor(
    private readonly tracing: GatewayTracing,
    readonly span: Span,
    parent: Context,
    private readonly request: RequestTrace | undefined,
  ) {
    this.context = trace.setSpan(parent, span).setValue(ATTEMPT_TRACE, this);
    request?.openAttempts.add(this);
  }

  /** Runs the attempt with this span active (for the undici channels and nested spans). */
  run<T>(fn: () => Promise<T>): Promise<T> {
    return this.tracing.run(this.context, fn);
  }

  /** The engine answered (an HTTP engine: its headers; an in-process engine: its first output). */
  answered(): void {
    if (this.ended) return;
    this.settled = true;
    if (!this.firstByte) this.markFirstByte();
    if (this.pendingHttp === 0) this.end();
  }

  failed(outcome: AttemptOutcome, error?: unknown): void {
    if (this.ended) return;
    this.settled = true;
    // An engine's error answer seen on the wire stays an http_error whatever the adapter made of it.
    if (!(outcome === 'error' && this.outcome === 'http_error')) this.outcome = outcome;
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    if (error !== undefined) this.span.setAttribute('error.type', errorType(error));
    this.end();
  }

  httpStarted(): void {
    if (!this.ended) this.pendingHttp++;
  }

  httpHeaders(statusCode: number): void {
    if (this.ended) return;
    this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, statusCode);
    if (statusCode >= 400) {
      this.outcome = 'http_error';
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${statusCode}` });
    }
    if (!this.firstByte) this.markFirstByte();
  }

  httpDone(): void {
    if (this.ended) return;
    this.pendingHttp--;
    if (this.settled && this.pendingHttp <= 0) this.end();
  }

  httpFailed(error: unknown): void {
    if (this.ended) return;
    this.pendingHttp--;
    // Before the attempt settled, tryUpstreams classifies the failure itself.
    if (!this.settled) return;
    this.outcome = isAbort(error) ? 'cancelled' : isTimeout(error) ? 'timeout' : 'stream_broken';
    if (this.outcome !== 'cancelled') this.span.setStatus({ code: SpanStatusCode.ERROR, message: this.outcome });
    this.span.setAttribute('error.type', errorType(error));
    if (this.pendingHttp <= 0) this.end();
  }

  /** The request ended while this attempt's exchange was still open: nothing else would end its span. */
  abandon(outcome: 'cancelled' | 'unfinished'): void {
    if (this.ended) return;
    this.outcome = outcome;
    this.end();
  }

  private markFirstByte(): void {
    this.firstByte = true;
    this.span.addEvent('upstream.first_byte');
  }

  private end(): void {
    this.ended = true;
    this.span.setAttribute('svc.upstream.outcome', this.outcome);
    this.span.end();
    this.request?.openAttempts.delete(this);
  }
}

/** A short, secret-free name for an error: the service error code, undici's code, or the class name. */
function errorType(e: unknown): string {
  if (isServiceError(e)) return e.code;
  // An engine failure: what went wrong underneath (ECONNREFUSED...) when known, else its kind.
  if (e instanceof UpstreamError) return e.details.cause === undefined ? `upstream_${e.kind}` : errorType(e.details.cause);
  const err = e as { code?: unknown; name?: unknown } | null;
  if (typeof err?.code === 'string') return err.code;
  return typeof err?.name === 'string' ? err.name : 'error';
}

export class GatewayTracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  private readonly contexts = new AsyncLocalStorageContextManager();
  private readonly propagator = new W3CTraceContextPropagator();
  /** The request each admitted key's auth object belongs to: debits are parented by it, not by async context. */
  private readonly requestByAuth = new WeakMap<RequestAuth, RequestTrace>();
  private readonly attemptByHttp = new WeakMap<UndiciRequest, AttemptTrace>();
  private readonly channels: [string, (message: unknown) => void][];
  private exportFailing = false;
  /**
   * Told when exports start failing (the collector is unreachable or refuses them; the spans of
   * those batches are dropped) and when they succeed again: once per change, not per batch.
   */
  onExportStateChange: (failing: boolean, error: Error | undefined) => void = () => {};

  constructor(config: TracingConfig, options: { exporter?: SpanExporter } = {}) {
    const inner = options.exporter ?? new OTLPTraceExporter({ url: config.tracesUrl });
    const exporter: SpanExporter = {
      export: (spans, done) =>
        inner.export(spans, (result: ExportResult) => {
          const failing = result.code !== ExportResultCode.SUCCESS;
          if (failing !== this.exportFailing) {
            this.exportFailing = failing;
            this.onExportStateChange(failing, result.error);
          }
          done(result);
        }),
      shutdown: () => inner.shutdown(),
      forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
    };
    this.provider = new TracerProvider({
      resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName })),
      sampler: samplerFor(config.sampler, config.samplerRatio),
      spanProcessors: [new BatchSpanProcessor({ exporter })],
    });
    this.tracer = this.provider.getTracer('svc-gateway');
    this.contexts.enable();
    this.channels = [
      ['undici:request:create', (m) => this.onHttpCreate((m as { request: UndiciRequest }).request)],
      [
        'undici:request:headers',
        (m) => this.attemptByHttp.get((m as { request: UndiciRequest }).request)?.httpHeaders((m as { response: { statusCode: number } }).response.statusCode),
      ],
      ['undici:request:trailers', (m) => this.attemptByHttp.get((m as { request: UndiciRequest }).request)?.httpDone()],
      ['undici:request:error', (m) => this.attemptByHttp.get((m as { request: UndiciRequest }).request)?.httpFailed((m as { error: unknown }).error)],
    ];
    for (const [name, fn] of this.channels) subscribe(name, fn);
  }

  run<T>(context: Context, fn: () => T): T {
    return this.contexts.with(context, fn);
  }

  /** The server span of an incoming request; `headers` may carry the caller's `traceparent`. */
  startRequest(name: string, headers: Record<string, string | string[] | undefined>, attributes: Attributes): RequestTrace {
    const parent = this.propagator.extract(ROOT_CONTEXT, headers, {
      keys: (carrier) => Object.keys(carrier),
      get: (carrier, key) => carrier[key],
    });
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    const rt: RequestTrace = { span, context: ROOT_CONTEXT, openAttempts: new Set(), ended: false };
    rt.context = trace.setSpan(parent, span).setValue(REQUEST_TRACE, rt);
    return rt;
  }

  /** Debits made with this auth object (the request's own, from admission) belong to this request. */
  bindAuth(auth: RequestAuth | null | undefined, rt: RequestTrace): void {
    if (auth) this.requestByAuth.set(auth, rt);
  }

  /**
   * Ends a request's span, and the spans of attempts still open under it: when the client went
   * away their exchange is being cancelled; otherwise the route left an answer unread.
   */
  endRequest(rt: RequestTrace, end: { attributes: Attributes; errorMessage: string | undefined; clientGone: boolean }): void {
    if (rt.ended) return;
    rt.ended = true;
    rt.span.setAttributes(end.attributes);
    if (end.errorMessage !== undefined) rt.span.setStatus({ code: SpanStatusCode.ERROR, message: end.errorMessage });
    rt.span.end();
    for (const attempt of rt.openAttempts) attempt.abandon(end.clientGone ? 'cancelled' : 'unfinished');
  }

  /**
   * An internal span: the root of a trace of its own (a realtime response) or, with `parent`, a
   * child (one of its legs). Work run in its context (`run`) nests under it: upstream attempts too.
   */
  startInternal(name: string, attributes: Attributes, parent: Context = ROOT_CONTEXT): { span: Span; context: Context } {
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
    return { span, context: trace.setSpan(parent, span) };
  }

  /** A span for one attempt at one upstream, child of whatever span is active (the request's). */
  startAttempt(upstream: UpstreamEntry): AttemptTrace {
    const parent = this.contexts.active();
    const span = this.tracer.startSpan(
      `upstream ${upstream.protocol}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'svc.upstream.id': upstream.id,
          'svc.upstream.url': upstreamLabel(upstream.url),
          'svc.upstream.protocol': upstream.protocol,
          'svc.model': upstream.modelId,
        },
      },
      parent,
    );
    return new AttemptTrace(this, span, parent, parent.getValue(REQUEST_TRACE) as RequestTrace | undefined);
  }

  /** An event on the active span (a request's, a realtime response's): an engine switched under a stream. */
  failover(upstream: UpstreamEntry, reason: string, phase: string): void {
    trace
      .getSpan(this.contexts.active())
      ?.addEvent('upstream.failover', { 'svc.upstream.id': upstream.id, 'svc.failover.reason': reason, 'svc.failover.phase': phase });
  }

  /** An event on the active span: two upstreams raced for the first output, `won` kept and `lost` cancelled. */
  hedge(won: UpstreamEntry, lost: UpstreamEntry): void {
    trace.getSpan(this.contexts.active())?.addEvent('upstream.hedge', { 'svc.upstream.id': won.id, 'svc.hedge.lost': lost.id });
  }

  /** The core with a span around each debit, parented by the request whose auth it carries. */
  traceCore(core: GatewayCore): GatewayCore {
    const wrapped = Object.create(core) as GatewayCore;
    wrapped.charge = async (auth, requestId, costMicros, usage, hold, settles) => {
      const parent = this.requestByAuth.get(auth)?.context ?? this.contexts.active();
      const span = this.tracer.startSpan(
        'credits.debit',
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'svc.request_id': requestId,
            'svc.org_id': auth.orgId,
            'svc.model': usage.modelId,
            'svc.modality': usage.modality,
            'svc.cost_micros': Number(costMicros),
          },
        },
        parent,
      );
      try {
        return await this.run(trace.setSpan(parent, span), () => core.charge(auth, requestId, costMicros, usage, hold, settles));
      } catch (e) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorType(e) });
        span.setAttribute('error.type', errorType(e));
        throw e;
      } finally {
        span.end();
      }
    };
    return wrapped;
  }

  /** Exports the spans ended so far now (instead of at the next batch). */
  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /** Ends tracing: exports what is buffered (bounded by `timeoutMs`). Resolves false if the export did not finish in time. */
  async shutdown(timeoutMs: number): Promise<boolean> {
    for (const [name, fn] of this.channels) unsubscribe(name, fn);
    this.contexts.disable();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([
        this.provider.shutdown().then(
          () => true,
          () => false,
        ),
        timedOut,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** An undici request is being created: under an active span, it carries `traceparent`; under an attempt, it is tracked. */
  private onHttpCreate(request: UndiciRequest): void {
    const active = this.contexts.active();
    if (!trace.getSpan(active)) return;
    if (!hasTraceparent(request.headers)) {
      this.propagator.inject(active, request, { set: (carrier, key, value) => void carrier.addHeader(key, value) });
    }
    const attempt = active.getValue(ATTEMPT_TRACE) as AttemptTrace | undefined;
    if (attempt) {
      this.attemptByHttp.set(request, attempt);
      attempt.httpStarted();
    }
  }
}

export function createTracing(config: TracingConfig | undefined, options: { exporter?: SpanExporter } = {}): GatewayTracing | undefined {
  return config ? new GatewayTracing(config, options) : undefined;
}
