// The glibc functions the server calls directly, through koffi: mmap/munmap, to read SQLite's
// WAL-index header without a system call (server/db/sqlite-commit-watch.ts). Null where
// libc.so.6 cannot be loaded (musl, macOS): callers then do without. (malloc_trim, which the
// gateway and the recognizer's threads call, is gateway/upstreams/release-freed-memory.ts.)
import koffi from 'koffi';

export interface Libc {
  mmap(addr: null, length: number, prot: number, flags: number, fd: number, offset: number): unknown;
  munmap(addr: unknown, length: number): number;
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
    };
  } catch {
    loaded = null;
  }
  return loaded;
}
