import type { FastifyReply } from 'fastify';
import type { Ticket } from './core/admission.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { LogRef } from './request-log/request-log-types.ts';

/**
 * A signal aborted when the client goes away before its response is complete, so engine
 * work (upstream requests, child processes, decoders) stops with it.
 */
export function onClientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  onResponseClose(reply, () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

/**
 * Runs `fn` when the response closes, or at once if it already has: a response closes once,
 * so a listener added after a client left during an await would never run (a reservation or
 * an admission ticket would then be held for good).
 */
export function onResponseClose(reply: FastifyReply, fn: () => void): void {
  if (reply.raw.destroyed) fn();
  else reply.raw.on('close', fn);
}

/**
 * A controller of one engine attempt's own, aborted with `parent` (and its reason): what
 * AbortSignal.any does, without the weak references and finalization registry entry that it
 * makes per call and that outlive the young generation (docs/performance.md, "LLM proxy").
 * `parent` is a request's or a response's signal, so its listener goes with it.
 */
export function childController(parent: AbortSignal): AbortController {
  const child = new AbortController();
  if (parent.aborted) child.abort(parent.reason);
  else parent.addEventListener('abort', () => child.abort(parent.reason), { once: true });
  return child;
}

/** A signal aborted (reason: 401 api_key_disabled) if the request's key is revoked while it runs. */
export function onKeyRevoked(ticket: Ticket | null): AbortSignal | undefined {
  if (!ticket) return undefined;
  const controller = new AbortController();
  ticket.bind(controller);
  return controller.signal;
}

/** An engine request's cancellation: `signal` for the engine call, `clientGone` for the route. */
export interface EngineCall {
  /**
   * Aborted when the client goes away, or with a ServiceError as the reason: the shutdown's at
   * the end of its grace period, api_key_disabled when the request's key is revoked.
   */
  readonly signal: AbortSignal;
  /** The longest the engine may stay silent (headers, between chunks). */
  readonly timeoutMs: number;
  /** True once the client went away before its response was complete. */
  readonly clientGone: boolean;
  /** The request's row in the request log, where its engine attempts are recorded. */
  readonly ref?: LogRef;
}

/**
 * The one cancellation of a request's engine work: one AbortController, ended by whichever
 * comes first -- the client going away, the shutdown's grace deadline (the lifecycle aborts the
 * controllers it holds, with the shutdown error as reason), the request's key being revoked
 * (reason api_key_disabled) or, when `deadlineMs` is given, the overall deadline (reason a
 * TimeoutError). Done with one controller and a Set entry rather than linked signals or
 * AbortSignal.any: per-request EventTarget listeners on the process-long shutdown signal showed
 * up in profiles of the chat hot path.
 */
export function engineCall(reply: FastifyReply, lifecycle: Lifecycle, ticket: Ticket | null, timeoutMs: number, deadlineMs?: number, ref?: LogRef): EngineCall {
  return new EngineCallHandle(reply, lifecycle, ticket, timeoutMs, deadlineMs, ref);
}

// A class, not an object literal with a `get clientGone()`: such a literal gets a new getter
// closure every time and, as far as we can tell, its own hidden class in the old generation,
// which kept the closure's scope (the reply, so everything the request touched) alive through
// every young-generation GC until the next full one (docs/performance.md, "Memory").
class EngineCallHandle implements EngineCall {
  private readonly controller = new AbortController();
  private gone = false;
  private readonly release: () => void;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly reply: FastifyReply,
    lifecycle: Lifecycle,
    ticket: Ticket | null,
    readonly timeoutMs: number,
    deadlineMs: number | undefined,
    readonly ref: LogRef | undefined,
  ) {
    this.release = lifecycle.holdEngineCall(this.controller);
    ticket?.bind(this.controller);
    if (deadlineMs !== undefined) this.deadline = setTimeout(this.onDeadline, deadlineMs);
    // `on`, not `once`: a response closes once, and `once` wraps the listener per request.
    onResponseClose(reply, this.onClose);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get clientGone(): boolean {
    return this.gone;
  }

  private readonly onDeadline = (): void => {
    this.controller.abort(new DOMException('The engine call reached its deadline.', 'TimeoutError'));
  };

  private readonly onClose = (): void => {
    clearTimeout(this.deadline);
    this.release();
    if (!this.reply.raw.writableFinished) {
      this.gone = true;
      this.controller.abort();
    }
  };
}
