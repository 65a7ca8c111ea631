// Throttling of wrong user codes on the verification page, per signed-in user and per client
// address, in fixed 10-minute windows. The hard bound is per code and lives in the database
// (MAX_FAILED_GUESSES); these counters slow down guessing across many codes. They are kept in
// the memory of the dashboard process (one per instance in the shipped setup).
import { ServiceError } from '../errors.ts';

export const GUESS_WINDOW_MS = 600_000;
export const MAX_WRONG_CODES_PER_USER = 10;
export const MAX_WRONG_CODES_PER_IP = 30;

export interface GuessThrottle {
  /**
   * Counts one code entry against every subject, or throws 429 slow_down when any of them
   * used up its wrong codes for the window. Checking and counting are one synchronous step,
   * so entries sent at once cannot all pass the check before any of them is counted.
   */
  take(subjects: GuessSubjects, now: Date): void;
  /** Gives back what `take` counted, for an entry that turned out not to be a wrong code. */
  refund(subjects: GuessSubjects, now: Date): void;
}

export interface GuessSubjects {
  userId: string;
  ip: string | null;
}

export function createGuessThrottle(): GuessThrottle {
  const counters = new Map<string, { window: number; count: number }>();
  const keys = (s: GuessSubjects): Array<[string, number]> => [
    [`user:${s.userId}`, MAX_WRONG_CODES_PER_USER],
    ...(s.ip ? [[`ip:${s.ip}`, MAX_WRONG_CODES_PER_IP] as [string, number]] : []),
  ];
  const windowOf = (now: Date) => Math.floor(now.getTime() / GUESS_WINDOW_MS);
  return {
    take(subjects, now) {
      const window = windowOf(now);
      // Forget the windows that ended, so that the map holds only the current one.
      for (const [key, entry] of counters) if (entry.window < window) counters.delete(key);
      for (const [key, limit] of keys(subjects)) {
        const entry = counters.get(key);
        if (entry && entry.count >= limit) {
          const wait = Math.max(1, Math.ceil(((window + 1) * GUESS_WINDOW_MS - now.getTime()) / 1000));
          throw new ServiceError('slow_down', `Too many wrong codes. Try again in ${Math.ceil(wait / 60)} minute${wait > 60 ? 's' : ''}.`, 'code', {
            retryAfterSeconds: wait,
          });
        }
      }
      for (const [key] of keys(subjects)) {
        const entry = counters.get(key);
        if (entry) entry.count += 1;
        else counters.set(key, { window, count: 1 });
      }
    },
    refund(subjects, now) {
      const window = windowOf(now);
      for (const [key] of keys(subjects)) {
        const entry = counters.get(key);
        if (entry && entry.window === window && entry.count > 0) entry.count -= 1;
      }
    },
  };
}

// One per process, on globalThis: Next may load this module once per route bundle.
const holder = globalThis as typeof globalThis & { __svcGuessThrottle?: GuessThrottle };

export function sharedGuessThrottle(): GuessThrottle {
  return (holder.__svcGuessThrottle ??= createGuessThrottle());
}
