// Rate-limit windows are clock minutes: a test that counts requests against a limit must not
// let its requests straddle a minute boundary, or the second window admits what it expects refused.

/** Waits, if needed, so that the next `marginMs` stay inside one clock minute. */
export async function awayFromMinuteBoundary(marginMs = 5_000): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 60_000 - marginMs) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 250));
}
