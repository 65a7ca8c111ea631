// Where the code that keeps time reads it and sets its timers: rate-limit windows, agent claims,
// and the life cycle of live sessions (idle, maximum duration, pings) are handed a Clock (the
// system's in production), so that tests move the time instead of waiting for it.
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Runs `fn` once, `ms` from now on this clock, unless cancelled first. */
  after(ms: number, fn: () => void): Timer;
  /** Runs `fn` every `ms` on this clock until cancelled. */
  every(ms: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
  every(ms, fn) {
    const t = setInterval(fn, ms);
    return { cancel: () => clearInterval(t) };
  },
};
