// The life cycle every live session shares, whatever carries it (a WebSocket, a WebRTC data
// channel, an in-process caller): an idle timeout, a maximum duration, the gateway's shutdown
// and the key's revocation. It decides *when*; the session decides *how* it ends (an STT
// session finalizes what it heard first, a TTS session fails its open contexts). Timers run on
// the injected clock, so tests move the time instead of waiting for it.
import type { Clock, Timer } from '../../server/clock.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';

export interface SessionLimits {
  /** Nothing from the peer for this long: `idle` runs (the session may `touch()` to go on). */
  idleMs: number;
  /** The longest a session lasts. */
  maxDurationMs: number;
}

/** What the session does at each end the life cycle sees coming. */
export interface SessionEnds {
  idle(): void;
  maxDuration(): void;
  /** The gateway is shutting down (its grace period is over): end with 1001 and this error. */
  shutdown(error: ServiceError): void;
  /** The key was revoked (or the session must end for another reason the gateway names): end with 1008 and this error. */
  revoked(error: ServiceError): void;
}

export interface SessionSignals {
  /** Aborted when a shutdown's grace period is over; its reason is the error to show. */
  shutdown?: AbortSignal;
  /** Aborted (reason: a ServiceError such as api_key_disabled) when the session must end at once. */
  revoked?: AbortSignal;
}

const asError = (reason: unknown, fallback: () => ServiceError): ServiceError => (isServiceError(reason) ? reason : fallback());

export class SessionLife {
  /** The idle timer: one per session, moved on only when it runs (a touch per audio frame sets no timer). */
  private idle: Timer | null = null;
  private lastTouch = 0;
  private readonly maxLength: Timer;
  private readonly startedAt: number;
  private ended = false;
  private readonly onShutdown: () => void;
  private readonly onRevoked: () => void;

  constructor(
    private readonly clock: Clock,
    readonly limits: SessionLimits,
    private readonly signals: SessionSignals,
    private readonly ends: SessionEnds,
  ) {
    this.startedAt = clock.now();
    this.maxLength = clock.after(limits.maxDurationMs, () => !this.ended && ends.maxDuration());
    this.touch();
    this.onShutdown = () =>
      ends.shutdown(asError(signals.shutdown?.reason, () => new ServiceError('temporarily_unavailable', 'The gateway is shutting down; reconnect.')));
    this.onRevoked = () => ends.revoked(asError(signals.revoked?.reason, () => new ServiceError('api_key_disabled', 'This API key has been disabled.')));
    // Checked after the constructor returns, so the session is whole when it is told to end.
    queueMicrotask(() => {
      if (this.ended) return;
      for (const [signal, handler] of [
        [signals.shutdown, this.onShutdown],
        [signals.revoked, this.onRevoked],
      ] as const) {
        if (!signal) continue;
        if (signal.aborted) handler();
        else signal.addEventListener('abort', handler, { once: true });
      }
    });
  }

  /** When the session started, on the session's clock. */
  get started(): number {
    return this.startedAt;
  }

  /** The peer did something: the idle timeout starts again. */
  touch(): void {
    if (this.ended) return;
    this.lastTouch = this.clock.now();
    this.idle ??= this.clock.after(this.limits.idleMs, this.idleDue);
  }

  /** The idle timer ran: idle if nothing was touched since idleMs, else it waits for the rest. */
  private readonly idleDue = (): void => {
    this.idle = null;
    if (this.ended) return;
    const left = this.lastTouch + this.limits.idleMs - this.clock.now();
    if (left > 0) this.idle = this.clock.after(left, this.idleDue);
    else this.ends.idle();
  };

  /** The session is over: no timer runs and no signal is listened to any more. */
  dispose(): void {
    if (this.ended) return;
    this.ended = true;
    this.idle?.cancel();
    this.maxLength.cancel();
    this.signals.shutdown?.removeEventListener('abort', this.onShutdown);
    this.signals.revoked?.removeEventListener('abort', this.onRevoked);
  }
}
