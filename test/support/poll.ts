// Waiting until a condition holds, for the conditions that send no event (a row written, a
// port closed, a process gone, a model listed): `check` is asked again until it holds.

export interface PollOptions {
  /** Fails after this long. */
  timeoutMs?: number;
  /** The pause between two checks (ignored when `between` is given). */
  intervalMs?: number;
  /** What to wait for between two checks instead of a pause (e.g. the next answer of a running load). */
  between?: () => Promise<unknown>;
  /** What the failure message shows after the timeout (e.g. a process's output so far). */
  seen?: () => string;
}

/**
 * Calls `check` until it gives a value other than undefined, null or false, and returns that
 * value. A check that throws fails the wait at once (a check catches what it means to retry).
 * After `timeoutMs` the wait fails, naming `what`.
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  { timeoutMs = 15_000, intervalMs = 100, between, seen }: PollOptions = {},
): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen ? `:\n${seen()}` : ''}`);
    await (between ? between() : new Promise((resolve) => setTimeout(resolve, intervalMs)));
  }
}
