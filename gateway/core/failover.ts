// The one record of a live stream leaving a failing engine for the next upstream (STT sessions,
// TTS streams, LLM streams): the upstream is out for new work at once (its circuit opens:
// gateway/registry/circuit.ts; back through the health checks), and the switch is a metric, a
// log line, an event on the active trace span and the request log's failover reason. Who
// switches decides how (docs/failover.md); this only records. A hedge (two upstreams raced for
// the first output: docs/failover.md, "Hedging") is recorded here too, by the upstream that won.
import type { GatewayContext } from '../context.ts';
import type { FailoverPhase, FailoverReason } from '../metrics/gateway-metrics.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import type { LogRef } from '../request-log/request-log-types.ts';

export type { FailoverPhase, FailoverReason };

export interface Failover {
  /** The upstream that failed. */
  from: UpstreamEntry;
  reason: FailoverReason;
  phase: FailoverPhase;
  /** The request (or session) whose stream moved, for its log row. */
  ref?: LogRef;
  log: { warn(obj: unknown, msg: string): void };
  /** What the engine did, for the log line (its message is already free of keys: engine-http.ts). */
  error?: unknown;
}

export function recordFailover(ctx: GatewayContext, f: Failover): void {
  ctx.health.record(f.from, { ok: false, error: `failed during a stream (${f.reason})` });
  ctx.registry.circuits.trip(f.from.id);
  ctx.upstreamStats?.record(f.from.id, false);
  ctx.metrics.failover(f.from, f.reason, f.phase);
  f.log.warn(
    { model: f.from.modelId, upstream: f.from.id, reason: f.reason, phase: f.phase, err: f.error },
    'engine failed during a stream; moving to the next upstream',
  );
  ctx.tracing?.failover(f.from, f.reason, f.phase);
  if (f.ref) ctx.requestLog?.annotate(f.ref, { failoverReason: `${f.reason} (${f.phase.replace(/_/g, ' ')})` });
}

/** A hedge decided: `won` was kept (its first output came first), `lost` cancelled (or failed before it: recorded as a failover too). */
export interface Hedge {
  won: UpstreamEntry;
  lost: UpstreamEntry;
}

export function recordHedge(ctx: GatewayContext, h: Hedge): void {
  ctx.metrics.hedge(h.won);
  ctx.tracing?.hedge(h.won, h.lost);
}
