// A Clock (server/clock.ts) that moves only when the test moves it: a rate-limit window, an
// expiry or a lockout is reached by setting the time, not by waiting for it.
import type { Clock } from '../../server/clock.ts';

export interface ManualClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
}

export function manualClock(startMs: number): ManualClock {
  let now = startMs;
  return {
    now: () => now,
    set: (ms) => {
      now = ms;
    },
    advance: (ms) => {
      now += ms;
    },
  };
}

/** The start of a one-minute rate-limit window far from the wall clock's (server/rate-limit/rate-limiter.ts). */
export const A_WINDOW_START = 29_000_000 * 60_000;
