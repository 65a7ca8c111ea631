// The few glibc functions the gateway calls directly, through koffi (the FFI it already uses
// for pocketsphinx): mmap/munmap, to read SQLite's WAL-index header without a system call
// (server/db/sqlite-commit-watch.ts), and malloc_trim, to hand memory that malloc keeps after
// it was freed back to the system (releaseFreedMemory below, and the recognizer's decoders).
// Null where libc.so.6 cannot be loaded (musl, macOS): callers then do without.
import koffi from 'koffi';

export interface Libc {
  mmap(addr: null, length: number, prot: number, flags: number, fd: number, offset: number): unknown;
  munmap(addr: unknown, length: number): number;
  malloc_trim(pad: number): number;
}

export const PROT_READ = 1;
export const MAP_SHARED = 1;
/** mmap's (void *) -1, as koffi.address() reads it. */
export const MAP_FAILED = 2n ** 64n - 1n;

let loaded: Libc | null | undefined;

export function libc(): Libc | null {
  if (loaded !== undefined) return loaded;
  try {
    const lib = koffi.load('libc.so.6');
    loaded = {
      mmap: lib.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)'),
      munmap: lib.func('int munmap(void *addr, size_t length)'),
      malloc_trim: lib.func('int malloc_trim(size_t pad)'),
    };
  } catch {
    loaded = null;
  }
  return loaded;
}

/**
 * Gives the pages that malloc holds free back to the system (glibc keeps them after a peak:
 * V8 compiling Prisma's WebAssembly query compiler at start-up peaks at ~80 MB of malloc, of
 * which ~35 MB stayed resident). A few milliseconds for a heap of tens of MB. Returns the
 * bytes of RSS released (0 without glibc).
 */
export function releaseFreedMemory(): number {
  const c = libc();
  if (!c) return 0;
  const before = process.memoryUsage.rss();
  c.malloc_trim(0);
  return Math.max(0, before - process.memoryUsage.rss());
}
