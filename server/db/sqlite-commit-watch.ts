// "Has another connection committed since I last asked?" for the SQLite hot store's caches,
// asked on every key check, so it must be cheap and never wrong.
//
// The authority is `PRAGMA data_version`, which changes whenever any OTHER connection (the
// dashboard, the CLI, another replica, this process's Prisma client) commits. But it starts
// a read transaction, with its file locks, too costly for every key check. So it is
// asked only when the WAL-index header has changed. That header, the first 48 bytes of the
// `-shm` file (https://www.sqlite.org/walformat.html), is rewritten by every commit of any
// connection (its iChange counter counts them) and a checkpoint leaves it alone. Equal bytes
// mean no commit completed since the snapshot; any difference (a commit, ours included, or a
// read that raced a writer) falls back to the pragma. The snapshot is always taken BEFORE the
// pragma that vouches for it, so a commit landing between the two is seen either by the
// pragma or by the next comparison.
//
// The header is read where SQLite itself reads it: from a shared mapping of the -shm file,
// which every connection's commits write into. So the usual question costs a 48-byte copy and
// compare and no system call; a pread, the fallback where libc's mmap cannot be called, cost
// ~10 us under load on this VM (one per key check). The mapping is safe for as long as our own
// connection is open: SQLite truncates a -shm file only when it is the first to open it with
// nobody else holding it, and our connection holds it. That is also why the file is closed
// only after the connection (closing any descriptor of a file drops all of this process's
// POSIX locks on it, SQLite's included).
//
// Our own commits change the header too, and the pragma after each of them was most of what the
// watch cost a busy gateway. So our write transactions go through `ownWrite`, which marks the
// header from inside the transaction (we hold the write lock: nobody else can commit) and, once
// it has committed, takes the header after it as the snapshot when the header's change counter
// (iChange, bytes 8-11, incremented by every commit) moved by exactly one and the mark was the
// snapshot: then ours was the only commit since the pragma last vouched for it.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';
import type Database from 'better-sqlite3';
import koffi from 'koffi';
import { libc, MAP_FAILED, MAP_SHARED, PROT_READ } from '../native/libc.ts';

const HEADER_BYTES = 48;
const PAGE_BYTES = 4096;
/** The header's iChange: a 32-bit counter in the machine's byte order (walformat.html). */
const CHANGE_COUNTER_AT = 8;
const LITTLE_ENDIAN = endianness() === 'LE';
const changeCounter = (h: Uint8Array) => new DataView(h.buffer, h.byteOffset, HEADER_BYTES).getUint32(CHANGE_COUNTER_AT, LITTLE_ENDIAN);

export interface CommitWatch {
  /** True when another connection has committed since the previous call. */
  otherCommitted(): boolean;
  /** `body` as a write transaction of this connection (BEGIN IMMEDIATE) whose commit is not taken for another's. */
  ownWrite<A extends unknown[], R>(body: (...args: A) => R): (...args: A) => R;
  /** Where the header is read from: a shared mapping, the file (pread), or nowhere (pragma only). */
  readonly headerSource: 'mapping' | 'file' | 'none';
  /** Call after the connection is closed. */
  close(): void;
}

interface HeaderReader {
  source: 'mapping' | 'file';
  /** A copy of the current header (valid until the next call), or null when it cannot be read. */
  read(): Uint8Array | null;
  close(): void;
}

/** `map: false` reads the header with pread even where it could be mapped (for tests). */
export function watchCommits(db: Database.Database, path: string, options: { map?: boolean } = {}): CommitWatch {
  const dataVersion = db.prepare<[], bigint>('PRAGMA data_version').pluck();
  let seenVersion = dataVersion.get(); // also makes sure the -shm file exists
  const header = openHeader(`${path}-shm`, options.map ?? true);
  const snapshot = new Uint8Array(HEADER_BYTES);
  let snapshotValid = false;
  /** The header inside our write transaction, when it was still the snapshot. */
  const mark = new Uint8Array(HEADER_BYTES);
  let markValid = false;

  return {
    headerSource: header?.source ?? 'none',
    otherCommitted() {
      const current = snapshotValid ? header?.read() : null;
      if (current && sameBytes(current, snapshot)) return false;
      const now = header?.read();
      snapshotValid = !!now;
      if (now) snapshot.set(now);
      const v = dataVersion.get();
      if (v === seenVersion) return false;
      seenVersion = v;
      return true;
    },
    ownWrite(body) {
      const transaction = db.transaction((...args: Parameters<typeof body>) => {
        const now = snapshotValid ? header?.read() : null;
        markValid = !!now && sameBytes(now, snapshot);
        if (markValid) mark.set(now!);
        return body(...args);
      });
      return (...args) => {
        const result = transaction.immediate(...args);
        // Committed: the header now, if ours was the only commit since the mark.
        const now = markValid ? header?.read() : null;
        if (now && changeCounter(now) === (changeCounter(mark) + 1) >>> 0) snapshot.set(now);
        return result;
      };
    },
    close() {
      header?.close();
    },
  };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < HEADER_BYTES; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The -shm file's header, mapped when possible, read with pread otherwise; null without the file (not WAL). */
export function openHeader(shmPath: string, map: boolean): HeaderReader | null {
  let fd: number;
  try {
    fd = openSync(shmPath, 'r');
  } catch {
    return null; // every question goes to the pragma
  }
  // SQLite makes the file at least one 32 KB region long before its first commit; a shorter
  // file (never seen) is read instead, since touching a mapping past the end of a file kills
  // the process (SIGBUS).
  const mapped = map && fstatSync(fd).size >= PAGE_BYTES ? mapFirstPage(fd) : null;
  const buffer = new Uint8Array(HEADER_BYTES);
  if (mapped) {
    // Copied out: other processes write the mapping at any time, and bytes that change between
    // the check of a header and its use as the snapshot would hide their commit.
    const view = new Uint8Array(mapped.buffer, 0, HEADER_BYTES);
    let open = true;
    return {
      source: 'mapping',
      read: () => (open ? (buffer.set(view), buffer) : null),
      close() {
        open = false;
        mapped.unmap();
        closeSync(fd);
      },
    };
  }
  let open = true;
  return {
    source: 'file',
    read: () => (open && readSync(fd, buffer, 0, HEADER_BYTES, 0) === HEADER_BYTES ? buffer : null),
    close() {
      open = false;
      closeSync(fd);
    },
  };
}

/** A read-only shared mapping of the file's first page through libc (glibc Linux), or null. */
function mapFirstPage(fd: number): { buffer: ArrayBuffer; unmap(): void } | null {
  const c = libc();
  if (!c) return null;
  const pointer = c.mmap(null, PAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
  if (pointer === null || koffi.address(pointer) === MAP_FAILED) return null;
  return { buffer: koffi.view(pointer, PAGE_BYTES), unmap: () => void c.munmap(pointer, PAGE_BYTES) };
}
