// Hands the pages malloc keeps after a free back to the system: glibc's malloc_trim, through
// koffi (the FFI the recognizer already uses). Called where memory is freed in bulk: a recognizer's
// worker thread after it frees a decoder, and the gateway after start and now and then
// (gateway/runtime.ts). malloc_trim trims every arena, whichever thread calls it. Here rather than
// beside the server's own libc calls (server/native/libc.ts) because the engines' threads need it
// and the seam imports nothing of server/.
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
