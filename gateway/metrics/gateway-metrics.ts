// The gateway's Prometheus metrics, one registry per runtime (several runtimes may share a
// process in tests). Routes and the core report moments through this object on the
// GatewayContext, never through globals. Series updated per request, span or debit are counted
// by hand (tree-metrics.ts); the others' label children are cached by their values:
// prom-client's `inc(labels)` hashes a label object on every call, Map lookups on the
// label strings are cheaper.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import { LabelTree } from './label-tree.ts';
import { TreeCounter, TreeHistogram } from './tree-metrics.ts';

/** The moment a stream first gives the client something useful. */
export type FirstOutputKind = 'llm_first_token' | 'tts_first_audio' | 'tts_first_audible' | 'stt_first_transcript';
export type UpstreamErrorKind = 'connect' | 'timeout' | 'http_status' | 'broken' | 'stream_broken';
/** Why a live stream left its engine (gateway/core/failover.ts). */
export type FailoverReason = 'connect' | 'closed' | 'error' | 'http_status' | 'timeout' | 'stall' | 'protocol' | 'finalize_unanswered';
/** When: before the stream's first output (unseen by the client) or after it (the seam is hidden). */
export type FailoverPhase = 'before_first_output' | 'mid_stream';

/** Latency buckets (seconds) from sub-millisecond gateway answers to multi-minute streams. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const FIRST_OUTPUT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30];

/** An upstream's URL as a label: no credentials, query or fragment (operators may put tokens there). */
export function upstreamLabel(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`.replace(/\/+$/, '');
  } catch {
    return url.split(/[?#]/)[0]!.replace(/^([a-z]+:\/\/)[^@/]*@/i, '$1');
  }
}

/** Caches the label children of one metric by their label values (label-tree.ts). */
function childCache<C>(make: (...values: string[]) => C): (...values: string[]) => C {
  const tree = new LabelTree<C>((values) => make(...values));
  return (...values) => tree.get(values);
}

export type ConnectionDropReason = 'headers_timeout' | 'body_timeout' | 'body_idle' | 'connections' | 'connections_per_address';

export class GatewayMetrics {
  readonly registry = new Registry();

  private readonly requestsTotal = new TreeCounter(this.registry, {
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method, status and model (empty when none was resolved).',
    labelNames: ['route', 'method', 'status', 'model'],
  });
  private readonly requestSeconds = new TreeHistogram(this.registry, {
    name: 'svc_http_request_duration_seconds',
    help: 'Time from request arrival to the end of the response (whole stream for streaming responses).',
    labelNames: ['route', 'method', 'status'],
    buckets: LATENCY_BUCKETS,
  });
  private readonly firstOutputSeconds = new TreeHistogram(this.registry, {
    name: 'svc_time_to_first_output_seconds',
    help: 'Streams: request arrival to first LLM token relayed, first TTS audio ready, first TTS audible sample (as played from the first byte); STT: first audio received to first transcript sent.',
    labelNames: ['kind', 'model'],
    buckets: FIRST_OUTPUT_BUCKETS,
  });
  private readonly activeStreams = new Gauge({
    name: 'svc_active_streams',
    help: 'Streaming HTTP responses (SSE, progressive audio) being sent now.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });
  private readonly webSocketSessions = new Gauge({
    name: 'svc_websocket_sessions',
    help: 'Open WebSocket sessions.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });
  private readonly upstreamUp = new Gauge({
    name: 'svc_upstream_up',
    help: 'Upstream health as this replica sees it: 1 up, 0 down.',
    labelNames: ['model', 'upstream'] as const,
    registers: [this.registry],
  });
  private readonly circuitsOpen = new Gauge({
    name: 'svc_upstream_circuit_open',
    help: 'Upstream circuit as this replica sees it: 1 open (recent calls failed; new work skips it), 0 closed.',
    labelNames: ['model', 'upstream'] as const,
    registers: [this.registry],
  });
  private readonly healthChecks = new Counter({
    name: 'svc_upstream_health_checks_total',
    help: 'Health checks of upstreams, by result.',
    labelNames: ['model', 'upstream', 'result'] as const,
    registers: [this.registry],
  });
  private readonly upstreamErrors = new Counter({
    name: 'svc_upstream_errors_total',
    help: 'Failed upstream calls: connect (never reached it), timeout, http_status (an error answer), broken (failed before an answer), stream_broken (died mid-stream).',
    labelNames: ['model', 'upstream', 'kind'] as const,
    registers: [this.registry],
  });
  private readonly failovers = new Counter({
    name: 'svc_failovers_total',
    help: 'Live streams moved off a failing engine to the next upstream, by the upstream left, why and when (before_first_output, mid_stream).',
    labelNames: ['model', 'upstream', 'reason', 'phase'] as const,
    registers: [this.registry],
  });
  private readonly hedges = new Counter({
    name: 'svc_hedges_total',
    help: 'Races of two upstreams for the first output (a model with capabilities.hedge), by the upstream that won.',
    labelNames: ['model', 'upstream'] as const,
    registers: [this.registry],
  });
  private readonly debitedMicros = new TreeCounter(this.registry, {
    name: 'svc_credits_debited_micros_total',
    help: 'Credits debited for usage, in micro-USD.',
    labelNames: ['modality', 'model'],
  });
  private readonly debitFailures = new Counter({
    name: 'svc_credit_debit_failures_total',
    help: 'Debits that could not be written (the database was unreachable); the usage went unbilled.',
    labelNames: ['modality', 'model'] as const,
    registers: [this.registry],
  });
  private readonly connectionsDropped = new Counter({
    name: 'svc_connections_dropped_total',
    help: 'Connections closed for what the client held (gateway/client-bounds.ts): headers_timeout, body_timeout, body_idle (answered 408 first), connections, connections_per_address (refused at once).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  private readonly rateLimiterErrors = new Counter({
    name: 'svc_rate_limiter_errors_total',
    help: 'Rate-limit checks that failed (shared limiter unreachable); those requests were admitted.',
    registers: [this.registry],
  });

  private readonly realtimeResponses = new Counter({
    name: 'svc_realtime_responses_total',
    help: '/v1/realtime responses, by how they ended: completed, cancelled (response.cancel or barge-in), incomplete, failed.',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  private readonly realtimeBargeIns = new Counter({
    name: 'svc_realtime_barge_ins_total',
    help: '/v1/realtime responses interrupted by the user speaking over them.',
    registers: [this.registry],
  });
  private readonly realtimeLegSeconds = new Histogram({
    name: 'svc_realtime_leg_seconds',
    help: '/v1/realtime responses: response start to the LLM first token (llm_first_token), to the first audio sent (tts_first_audio) and to its first audible sample as played from its first byte (first_audible).',
    labelNames: ['leg'] as const,
    buckets: FIRST_OUTPUT_BUCKETS,
    registers: [this.registry],
  });

  /** Label values of the per-request series, reused from call to call (none is kept). */
  private readonly values4: string[] = ['', '', '', ''];
  private readonly values3: string[] = ['', '', ''];
  private readonly values2: string[] = ['', ''];
  private readonly streamChild = childCache((...v) => this.activeStreams.labels(...v));

  constructor(options: { processMetrics?: boolean } = {}) {
    // Process metrics (RSS, heap, event-loop lag, GC) with the usual names, on this registry.
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  private pair(a: string, b: string): string[] {
    const v = this.values2;
    v[0] = a;
    v[1] = b;
    return v;
  }

  request(route: string, method: string, status: number, model: string, seconds: number): void {
    const v4 = this.values4;
    v4[0] = route;
    v4[1] = method;
    v4[2] = String(status);
    v4[3] = model;
    this.requestsTotal.inc(v4);
    const v3 = this.values3;
    v3[0] = route;
    v3[1] = method;
    v3[2] = v4[2];
    this.requestSeconds.observe(v3, seconds);
  }

  firstOutput(kind: FirstOutputKind, model: string, seconds: number): void {
    this.firstOutputSeconds.observe(this.pair(kind, model), seconds);
  }

  /** Counts a streaming response as active until the returned function is called (idempotent). */
  streamOpened(route: string): () => void {
    const gauge = this.streamChild(route);
    gauge.inc();
    let open = true;
    return () => {
      if (open) gauge.dec();
      open = false;
    };
  }

  realtimeResponse(status: string, legs: { llmFirstToken?: number; ttsFirstAudio?: number; firstAudible?: number }): void {
    this.realtimeResponses.labels(status).inc();
    if (legs.llmFirstToken !== undefined) this.realtimeLegSeconds.labels('llm_first_token').observe(legs.llmFirstToken / 1000);
    if (legs.ttsFirstAudio !== undefined) this.realtimeLegSeconds.labels('tts_first_audio').observe(legs.ttsFirstAudio / 1000);
    if (legs.firstAudible !== undefined) this.realtimeLegSeconds.labels('first_audible').observe(legs.firstAudible / 1000);
  }

  realtimeBargeIn(): void {
    this.realtimeBargeIns.inc();
  }

  webSocketOpened(route: string): () => void {
    const gauge = this.webSocketSessions.labels(route);
    gauge.inc();
    let open = true;
    return () => {
      if (open) gauge.dec();
      open = false;
    };
  }

  upstreamHealth(upstream: UpstreamEntry, ok: boolean, fromCheck: boolean): void {
    const label = upstreamLabel(upstream.url);
    this.upstreamUp.labels(upstream.modelId, label).set(ok ? 1 : 0);
    if (fromCheck) this.healthChecks.labels(upstream.modelId, label, ok ? 'up' : 'down').inc();
  }

  circuitOpen(upstream: Pick<UpstreamEntry, 'modelId' | 'url'>, open: boolean): void {
    this.circuitsOpen.labels(upstream.modelId, upstreamLabel(upstream.url)).set(open ? 1 : 0);
  }

  upstreamError(upstream: Pick<UpstreamEntry, 'modelId' | 'url'>, kind: UpstreamErrorKind): void {
    this.upstreamErrors.labels(upstream.modelId, upstreamLabel(upstream.url), kind).inc();
  }

  failover(upstream: Pick<UpstreamEntry, 'modelId' | 'url'>, reason: FailoverReason, phase: FailoverPhase): void {
    this.failovers.labels(upstream.modelId, upstreamLabel(upstream.url), reason, phase).inc();
  }

  hedge(won: Pick<UpstreamEntry, 'modelId' | 'url'>): void {
    this.hedges.labels(won.modelId, upstreamLabel(won.url)).inc();
  }

  debited(modality: string, model: string, micros: bigint): void {
    if (micros > 0n) this.debitedMicros.inc(this.pair(modality, model), Number(micros));
  }

  debitFailed(modality: string, model: string): void {
    this.debitFailures.labels(modality, model).inc();
  }

  connectionDropped(reason: ConnectionDropReason): void {
    this.connectionsDropped.labels(reason).inc();
  }

  rateLimiterError(): void {
    this.rateLimiterErrors.inc();
  }

  /** The text exposition format, and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
