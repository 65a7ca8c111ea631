import type { FastifyReply } from 'fastify';
import type { Lifecycle } from './lifecycle.js';

/**
 * A signal aborted when the client goes away before its response is complete, so engine
 * work (upstream requests, child processes, decoders) stops with it.
 */
export function onClientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** An engine request's cancellation: `signal` for the engine call, `clientGone` for the route. */
export interface EngineCall {
  /** Aborted when the client goes away, or with the shutdown error at the end of a shutdown's grace period. */
  readonly signal: AbortSignal;
  /** True once the client went away before its response was complete. */
  readonly clientGone: boolean;
}

/**
 * One AbortController per engine request, ended by whichever comes first: the client going
 * away, or the shutdown's grace deadline (the lifecycle aborts the controllers it holds,
 * with the shutdown error as reason). Done with one controller and a Set entry rather than
 * linked signals or AbortSignal.any: per-request EventTarget listeners on the process-long
 * shutdown signal showed up in profiles of the chat hot path.
 */
export function engineCall(reply: FastifyReply, lifecycle: Lifecycle): EngineCall {
  const controller = new AbortController();
  let gone = false;
  const release = lifecycle.holdEngineCall(controller);
  // `on`, not `once`: a response closes once, and `once` wraps the listener per request.
  reply.raw.on('close', () => {
    release();
    if (!reply.raw.writableFinished) {
      gone = true;
      controller.abort();
    }
  });
  return {
    signal: controller.signal,
    get clientGone() {
      return gone;
    },
  };
}
