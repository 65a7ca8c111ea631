// One way to call a model's engines, for every route: healthy upstreams in weighted order;
// a failure to connect (the request never reached the engine) marks that upstream down and
// tries the next; the deadline becomes 504 upstream_timeout; any other failure 502.
import { isServiceError } from '../../server/services/errors.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.js';
import { isConnectFailure, isTimeout, upstreamTimeout, upstreamUnavailable } from './upstream-errors.js';

export interface UpstreamCall {
  /** Aborted when the client goes away or the deadline passes; hand it to the engine. */
  signal: AbortSignal;
  timeoutMs: number;
}

/** The client-gone controller, the deadline and the end of a shutdown's grace period for one request. */
export function upstreamCall(ctx: GatewayContext, clientGone: AbortSignal): UpstreamCall {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  return { signal: AbortSignal.any([clientGone, AbortSignal.timeout(timeoutMs), ctx.lifecycle.streamsEnded]), timeoutMs };
}

export async function tryUpstreams<T>(
  ctx: GatewayContext,
  model: ModelEntry,
  call: UpstreamCall,
  attempt: (upstream: UpstreamEntry) => Promise<T>,
): Promise<T> {
  let lastError = 'no upstream tried';
  for (const upstream of ctx.registry.upstreamOrder(model)) {
    try {
      return await attempt(upstream);
    } catch (e) {
      if (isServiceError(e)) {
        // An engine's error answer (its 4xx for a bad request is the caller's, not counted).
        if (e.code === 'upstream_error') ctx.metrics.upstreamError(upstream, 'http_status');
        throw e;
      }
      // A shutdown that reached its deadline: the reason is the error to answer with.
      if (call.signal.aborted && isServiceError(call.signal.reason)) throw call.signal.reason;
      const reason = (call.signal.reason as Error | undefined)?.name;
      if (call.signal.aborted && reason === 'TimeoutError') {
        ctx.metrics.upstreamError(upstream, 'timeout');
        throw upstreamTimeout(call.timeoutMs / 1000);
      }
      if (call.signal.aborted) throw e; // the client left: nothing to answer
      if (isTimeout(e)) {
        ctx.metrics.upstreamError(upstream, 'timeout');
        throw upstreamTimeout(call.timeoutMs / 1000);
      }
      if (!isConnectFailure(e)) {
        ctx.metrics.upstreamError(upstream, 'broken');
        throw upstreamUnavailable((e as Error).message);
      }
      ctx.metrics.upstreamError(upstream, 'connect');
      ctx.health.record(upstream, { ok: false, error: `connection failed: ${(e as Error).message}` });
      lastError = (e as Error).message;
    }
  }
  throw upstreamUnavailable(lastError);
}
