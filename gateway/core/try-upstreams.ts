// One way to call a model's engines, for every route: healthy upstreams in weighted order;
// a failure to connect (the request never reached the engine) marks that upstream down and
// tries the next; every other engine failure becomes the client's error through the one
// translation (gateway/upstream-envelope.ts). With tracing on, each attempt is a span
// (gateway/tracing/gateway-tracing.ts).
import { isServiceError, type ServiceError } from '../../server/services/errors.ts';
import type { FastifyReply } from 'fastify';
import { engineCall, type EngineCall } from '../client-gone.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import type { LogRef } from '../request-log/request-log-types.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { UpstreamError, type CallOptions } from '../upstreams/contract.ts';
import { asUpstreamError } from '../upstreams/engine-http.ts';
import type { Ticket } from './admission.ts';
import type { RequestAuth } from './gateway-core.ts';

/** An engine call; `ref` names the request whose log row records each attempt. */
export type UpstreamCall = CallOptions & { readonly ref?: LogRef };

/**
 * A request's engine call (gateway/client-gone.ts `engineCall`): ended by the client leaving, a
 * shutdown, the key's revocation or the deadline. `deadline: false` (streams that may run long,
 * e.g. chat): no overall deadline, only the engine's silence is bounded (timeoutMs between chunks).
 */
export function upstreamCall(ctx: GatewayContext, reply: FastifyReply, ticket: Ticket | null, options: { deadline?: boolean } = {}): EngineCall {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  const auth = (reply.request as { auth?: RequestAuth }).auth;
  const ref = auth ? { orgId: auth.orgId, requestId: reply.request.id } : undefined;
  return engineCall(reply, ctx.lifecycle, ticket, timeoutMs, options.deadline === false ? undefined : timeoutMs, ref);
}

/** Engine work no client waits on (voice jobs): the job's own signal and the deadline. */
export function backgroundCall(ctx: GatewayContext, signal: AbortSignal): UpstreamCall {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  return { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]), timeoutMs };
}

/**
 * What an engine failure means for the client, once the call is known not to be over on our side:
 * the call's own end (client gone: rethrown as it is; shutdown or revocation: its reason; the
 * deadline: 504) or the engine's error in the envelope.
 */
export function clientErrorFor(e: unknown, call: UpstreamCall): unknown {
  if (isServiceError(e)) return e;
  if (call.signal.aborted) {
    const reason = call.signal.reason as Error | ServiceError | undefined;
    if (isServiceError(reason)) return reason;
    if (reason?.name === 'TimeoutError') return upstreamEnvelope(new UpstreamError('timeout', 'deadline'), call.timeoutMs);
    return e; // the client left: nothing to answer
  }
  return upstreamEnvelope(asUpstreamError(e, false), call.timeoutMs);
}

export async function tryUpstreams<T>(
  ctx: GatewayContext,
  model: ModelEntry,
  call: UpstreamCall,
  attempt: (upstream: UpstreamEntry) => Promise<T>,
): Promise<T> {
  let lastError = 'no upstream tried';
  for (const upstream of ctx.registry.upstreamOrder(model)) {
    // A half-open circuit lets one call through, its trial; the others skip that upstream.
    if (!ctx.registry.circuits.admits(upstream.id)) continue;
    // Tracing off: no span, the attempt is called as it is.
    const traced = ctx.tracing?.startAttempt(upstream);
    const started = performance.now();
    const logAttempt = (outcome: string) => {
      if (call.ref) ctx.requestLog?.attempt(call.ref, { upstreamId: upstream.id, outcome, ms: Math.round(performance.now() - started) });
    };
    try {
      const result = await (traced ? traced.run(() => attempt(upstream)) : attempt(upstream));
      traced?.answered();
      ctx.upstreamStats?.record(upstream.id, true);
      ctx.registry.circuits.success(upstream.id);
      logAttempt('ok');
      return result;
    } catch (e) {
      if (isServiceError(e)) {
        traced?.failed('error', e);
        logAttempt('error');
        throw e;
      }
      if (call.signal.aborted) {
        const timedOut = (call.signal.reason as Error | undefined)?.name === 'TimeoutError';
        if (timedOut) recordFailure(ctx, upstream, 'timeout');
        traced?.failed(timedOut ? 'timeout' : 'cancelled', e);
        logAttempt(timedOut ? 'timeout' : 'cancelled');
        throw clientErrorFor(e, call);
      }
      const failure = asUpstreamError(e, false);
      if (failure.kind !== 'connect') {
        recordAnswerFailure(ctx, upstream, failure);
        traced?.failed(
          failure.kind === 'status' ? 'http_error' : failure.kind === 'timeout' ? 'timeout' : failure.kind === 'broken' ? 'broken' : 'error',
          failure,
        );
        logAttempt(failure.kind === 'status' ? 'http_status' : failure.kind === 'timeout' ? 'timeout' : 'broken');
        throw upstreamEnvelope(failure, call.timeoutMs);
      }
      recordFailure(ctx, upstream, 'connect');
      logAttempt('connect');
      traced?.failed('connect_failed', failure);
      ctx.health.record(upstream, { ok: false, error: `connection failed: ${failure.message}` });
      lastError = failure.message;
    }
  }
  throw upstreamEnvelope(new UpstreamError('connect', lastError), call.timeoutMs);
}

type UpstreamErrorKind = Parameters<GatewayContext['metrics']['upstreamError']>[1];

function recordFailure(ctx: GatewayContext, upstream: UpstreamEntry, kind: UpstreamErrorKind): void {
  ctx.metrics.upstreamError(upstream, kind);
  ctx.upstreamStats?.record(upstream.id, false);
  ctx.registry.callFailed(upstream);
}

/**
 * An engine that answered with a failure. Refusing the caller's bad request (400, 413, 422) is
 * the engine working, not failing; a full local pool is load, not a fault.
 */
export function recordAnswerFailure(ctx: GatewayContext, upstream: UpstreamEntry, failure: UpstreamError): void {
  if (failure.kind === 'busy' || failure.kind === 'unavailable') return;
  if (failure.kind === 'status' && [400, 413, 422].includes(failure.details.status ?? 0)) return;
  recordFailure(ctx, upstream, failure.kind === 'status' ? 'http_status' : failure.kind === 'timeout' ? 'timeout' : 'broken');
}
