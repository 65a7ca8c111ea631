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

/** The client-gone controller and the deadline for one request. */
export function upstreamCall(ctx: GatewayContext, clientGone: AbortSignal): UpstreamCall {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  return { signal: AbortSignal.any([clientGone, AbortSignal.timeout(timeoutMs)]), timeoutMs };
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
      if (isServiceError(e)) throw e;
      const reason = (call.signal.reason as Error | undefined)?.name;
      if (call.signal.aborted && reason === 'TimeoutError') throw upstreamTimeout(call.timeoutMs / 1000);
      if (call.signal.aborted) throw e; // the client left: nothing to answer
      if (isTimeout(e)) throw upstreamTimeout(call.timeoutMs / 1000);
      if (!isConnectFailure(e)) throw upstreamUnavailable((e as Error).message);
      ctx.health.record(upstream, { ok: false, error: `connection failed: ${(e as Error).message}` });
      lastError = (e as Error).message;
    }
  }
  throw upstreamUnavailable(lastError);
}
