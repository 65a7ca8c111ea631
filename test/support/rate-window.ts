// Rate-limit windows are clock minutes (server/rate-limit/rate-limiter.ts). In-process tests hand the
// gateway a clock they set (test/support/manual-clock.ts); a gateway in a child process reads
// the system's, so a test there that counts requests against a limit counts again, on a fresh
// key, when the minute turned while it counted (the second window would have admitted more).

/**
 * Runs `count` and returns what it returns, running it once more if the wall clock's minute
 * changed meanwhile. `count` must start from nothing each time (a fresh key).
 */
export async function countedInOneMinute<T>(count: () => Promise<T>): Promise<T> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const minute = Math.floor(Date.now() / 60_000);
    const result = await count();
    if (Math.floor(Date.now() / 60_000) === minute) return result;
  }
  throw new Error('counting the requests took more than a minute: no single rate-limit window held them');
}
