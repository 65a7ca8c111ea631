// "Has another connection committed since I last asked?" for the SQLite hot store's caches,
// asked on every key check, so it must be cheap and never wrong.
//
// The authority is `PRAGMA data_version`, which changes whenever any OTHER connection (the
// dashboard, the CLI, another replica, this process's Prisma client) commits. But it starts
// a read transaction, with its file locks: ~2 us idle, 7-20 us on a loaded gateway. So it is
// asked only when the WAL-index header has changed. That header, the first 48 bytes of the
// `-shm` file (https://www.sqlite.org/walformat.html), is rewritten by every commit of any
// connection (its iChange counter counts them) and a checkpoint leaves it alone; reading it
// is one pread without a lock. Equal bytes mean no commit completed since the snapshot; any
// difference (a commit, ours included, or a read that raced a writer) falls back to the
// pragma. The snapshot is always taken BEFORE the pragma that vouches for it, so a commit
// landing between the two is seen either by the pragma or by the next comparison.
import { closeSync, openSync, readSync } from 'node:fs';
import type Database from 'better-sqlite3';

const HEADER_BYTES = 48;

export interface CommitWatch {
  /** True when another connection has committed since the previous call. */
  otherCommitted(): boolean;
  close(): void;
}

export function watchCommits(db: Database.Database, path: string): CommitWatch {
  const dataVersion = db.prepare<[], bigint>('PRAGMA data_version').pluck();
  let seenVersion = dataVersion.get(); // also makes sure the -shm file exists
  let shm: number | null = null;
  try {
    shm = openSync(`${path}-shm`, 'r');
  } catch {
    // No shared-memory file (not WAL, or an unusual VFS): every call asks the pragma.
  }
  const snapshot = Buffer.alloc(HEADER_BYTES);
  const current = Buffer.alloc(HEADER_BYTES);
  let snapshotValid = false;
  const readHeader = (into: Buffer) => shm !== null && readSync(shm, into, 0, HEADER_BYTES, 0) === HEADER_BYTES;

  return {
    otherCommitted() {
      if (snapshotValid && readHeader(current) && current.equals(snapshot)) return false;
      snapshotValid = readHeader(snapshot);
      const v = dataVersion.get();
      if (v === seenVersion) return false;
      seenVersion = v;
      return true;
    },
    close() {
      if (shm !== null) closeSync(shm);
      shm = null;
    },
  };
}
