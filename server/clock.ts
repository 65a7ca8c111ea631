// Where the code that keeps time reads it: rate-limit windows, agent claims and the like are
// handed a Clock (the system's in production), so that tests set the time instead of waiting
// for it.
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
