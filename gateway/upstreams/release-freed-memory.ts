// Hands the pages malloc keeps after a free back to the system: glibc's malloc_trim, through
// koffi (the FFI the recognizer already uses). Called where memory is freed in bulk: a recognizer's
// worker thread after it frees a decoder, and the gateway after start and now and then
// (gateway/runtime.ts). malloc_trim trims every arena, whichever thread calls it. Here rather than
// beside the server's own libc calls (server/native/libc.ts) because the engines' threads need it
// and the seam imports nothing of server/.
import { performance } from 'node:perf_hooks';
import koffi from 'koffi';

type MallocTrim = (pad: number) => number;

let mallocTrim: MallocTrim | null | undefined;

/** Null where libc.so.6 cannot be loaded (musl, macOS): callers then do without. */
function loadMallocTrim(): MallocTrim | null {
  if (mallocTrim !== undefined) return mallocTrim;
  try {
    mallocTrim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)') as MallocTrim;
  } catch {
    mallocTrim = null;
  }
  return mallocTrim;
}

/** Gives the pages that malloc holds free back to the system. Returns the bytes of RSS released (0 without glibc). */
export function releaseFreedMemory(): number {
  const trim = loadMallocTrim();
  if (!trim) return 0;
  const before = process.memoryUsage.rss();
  trim(0);
  return Math.max(0, before - process.memoryUsage.rss());
}

/**
 * Below this share of the time busy since the last check, the event loop counts as idle: the
 * memory a load left behind is handed back then. Under load malloc_trim walks arenas full of
 * short-lived chunks on the thread that calls it (a quarter of a second at a time was seen at
 * 3,000 requests a second: every request waited), for memory the next requests take again at once.
 */
export const IDLE_EVENT_LOOP_UTILIZATION = 0.25;

/**
 * A check to run now and then (the gateway's timer): hands freed memory back when the event loop
 * was idle since the previous check, not while it serves load. `busy` is the event loop's
 * utilization since the previous call (injected in tests).
 */
export function idleMemoryRelease(release: () => unknown = releaseFreedMemory, busy: () => number = utilizationSinceLastCall()): () => boolean {
  return () => {
    if (busy() >= IDLE_EVENT_LOOP_UTILIZATION) return false;
    release();
    return true;
  };
}

function utilizationSinceLastCall(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}
