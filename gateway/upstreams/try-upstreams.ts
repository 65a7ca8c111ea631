// One way to call a model's engines, for every route: healthy upstreams in weighted order;
// a failure to connect (the request never reached the engine) marks that upstream down and
// tries the next; the deadline becomes 504 upstream_timeout; any other failure 502.
// With tracing on, each attempt is a span (gateway/tracing/gateway-tracing.ts).
import { isServiceError } from '../../server/services/errors.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.js';
import { isConnectFailure, isTimeout, upstreamTimeout, upstreamUnavailable } from './upstream-errors.js';

export interface UpstreamCall {
  /** Aborted when the client goes away or the deadline passes; hand it to the engine. */
  signal: AbortSignal;
  timeoutMs: number;
}

/**
 * The client-gone controller, the deadline, the end of a shutdown's grace period and, when
 * given, the revocation of the request's key, for one request.
 */
export function upstreamCall(ctx: GatewayContext, clientGone: AbortSignal, keyRevoked?: AbortSignal): UpstreamCall {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  const signals = [clientGone, AbortSignal.timeout(timeoutMs), ctx.lifecycle.streamsEnded];
  if (keyRevoked) signals.push(keyRevoked);
  return { signal: AbortSignal.any(signals), timeoutMs };
}

export async function tryUpstreams<T>(
  ctx: GatewayContext,
  model: ModelEntry,
  call: UpstreamCall,
  attempt: (upstream: UpstreamEntry) => Promise<T>,
): Promise<T> {
  let lastError = 'no upstream tried';
  for (const upstream of ctx.registry.upstreamOrder(model)) {
    // Tracing off: no span, the attempt is called as it is.
    const traced = ctx.tracing?.startAttempt(upstream);
    try {
      const result = await (traced ? traced.run(() => attempt(upstream)) : attempt(upstream));
      traced?.answered();
      ctx.upstreamStats?.record(upstream.id, true);
      return result;
    } catch (e) {
      if (isServiceError(e)) {
        // An engine's error answer (its 4xx for a bad request is the caller's, not counted).
        if (e.code === 'upstream_error') recordFailure(ctx, upstream, 'http_status');
        traced?.failed(e.code === 'upstream_error' ? 'http_error' : 'error', e);
        throw e;
      }
      // A shutdown that reached its deadline: the reason is the error to answer with.
      if (call.signal.aborted && isServiceError(call.signal.reason)) {
        traced?.failed('cancelled', call.signal.reason);
        throw call.signal.reason;
      }
      const reason = (call.signal.reason as Error | undefined)?.name;
      if (call.signal.aborted && reason === 'TimeoutError') {
        recordFailure(ctx, upstream, 'timeout');
        traced?.failed('timeout', e);
        throw upstreamTimeout(call.timeoutMs / 1000);
      }
      if (call.signal.aborted) {
        traced?.failed('cancelled', e);
        throw e; // the client left: nothing to answer
      }
      if (isTimeout(e)) {
        recordFailure(ctx, upstream, 'timeout');
        traced?.failed('timeout', e);
        throw upstreamTimeout(call.timeoutMs / 1000);
      }
      if (!isConnectFailure(e)) {
        recordFailure(ctx, upstream, 'broken');
        traced?.failed('broken', e);
        throw upstreamUnavailable((e as Error).message);
      }
      recordFailure(ctx, upstream, 'connect');
      traced?.failed('connect_failed', e);
      ctx.health.record(upstream, { ok: false, error: `connection failed: ${(e as Error).message}` });
      lastError = (e as Error).message;
    }
  }
  throw upstreamUnavailable(lastError);
}

type UpstreamErrorKind = Parameters<GatewayContext['metrics']['upstreamError']>[1];

function recordFailure(ctx: GatewayContext, upstream: UpstreamEntry, kind: UpstreamErrorKind): void {
  ctx.metrics.upstreamError(upstream, kind);
  ctx.upstreamStats?.record(upstream.id, false);
}
