// A Clock (server/clock.ts) that moves only when the test moves it: a rate-limit window, an
// expiry, a lockout or a session's idle timeout is reached by moving the time, not by waiting
// for it. Timers due when the time moves run in order of their due time.
import type { Clock, Timer } from '../../server/clock.ts';

export interface ManualClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
  /** Timers not yet run nor cancelled (a test may wait until a session has set its own). */
  readonly pendingTimers: number;
}

interface Scheduled {
  due: number;
  seq: number;
  fn: () => void;
  repeatMs?: number;
  cancelled: boolean;
}

export function manualClock(startMs: number): ManualClock {
  let now = startMs;
  let seq = 0;
  const timers = new Set<Scheduled>();
  const schedule = (ms: number, fn: () => void, repeatMs?: number): Timer => {
    const t: Scheduled = { due: now + Math.max(0, ms), seq: seq++, fn, repeatMs, cancelled: false };
    timers.add(t);
    return {
      cancel: () => {
        t.cancelled = true;
        timers.delete(t);
      },
    };
  };
  const moveTo = (target: number) => {
    for (;;) {
      let next: Scheduled | undefined;
      for (const t of timers) if (t.due <= target && (!next || t.due < next.due || (t.due === next.due && t.seq < next.seq))) next = t;
      if (!next) break;
      now = Math.max(now, next.due);
      if (next.repeatMs !== undefined && next.repeatMs > 0) {
        next.due += next.repeatMs;
        next.seq = seq++;
      } else timers.delete(next);
      next.fn();
    }
    now = Math.max(now, target);
  };
  return {
    now: () => now,
    after: (ms, fn) => schedule(ms, fn),
    every: (ms, fn) => schedule(ms, fn, ms),
    set: (ms) => (ms >= now ? moveTo(ms) : void (now = ms)),
    advance: (ms) => moveTo(now + ms),
    get pendingTimers() {
      return timers.size;
    },
  };
}

/** The start of a one-minute rate-limit window far from the wall clock's (server/rate-limit/rate-limiter.ts). */
export const A_WINDOW_START = 29_000_000 * 60_000;
