// The commit watch decides whether cached keys and balances are still good, so it must never
// miss another connection's commit, including one made between two of its own reads.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlite } from './hot-store-sqlite.js';
import { watchCommits } from './sqlite-commit-watch.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-commit-watch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function setup(name: string) {
  const path = join(dir, name);
  const mine = openSqlite(path);
  mine.exec('CREATE TABLE t (x INTEGER)');
  const other = new Database(path, { timeout: 5_000 });
  const watch = watchCommits(mine, path);
  return { mine, other, watch, path };
}

describe('watchCommits', () => {
  it('sees every commit of another connection, and only those', () => {
    const { mine, other, watch } = setup('a.db');
    const insertOther = other.prepare('INSERT INTO t VALUES (1)');
    const insertMine = mine.prepare('INSERT INTO t VALUES (2)');
    expect(watch.otherCommitted()).toBe(false);
    for (let i = 0; i < 200; i++) {
      // Quiet: nothing happened, asked twice (the second answer comes from the header alone).
      expect(watch.otherCommitted()).toBe(false);
      expect(watch.otherCommitted()).toBe(false);
      // Our own commit changes the header but is not "another connection's".
      insertMine.run();
      expect(watch.otherCommitted()).toBe(false);
      // Theirs is seen on the very next question, every time.
      insertOther.run();
      expect(watch.otherCommitted()).toBe(true);
      expect(watch.otherCommitted()).toBe(false);
    }
    watch.close();
    other.close();
    mine.close();
  });

  it('still sees commits after checkpoints and WAL restarts', () => {
    const { mine, other, watch } = setup('b.db');
    const insertOther = other.prepare('INSERT INTO t VALUES (1)');
    for (let i = 0; i < 50; i++) {
      insertOther.run();
      expect(watch.otherCommitted()).toBe(true);
      // A passive checkpoint (what the checkpointer thread runs) changes no data.
      other.pragma('wal_checkpoint(PASSIVE)');
      expect(watch.otherCommitted()).toBe(false);
      // A truncating one restarts the WAL (SQLite then reports a new data version: a
      // harmless cache refill); commits after the restart are seen as before.
      other.pragma('wal_checkpoint(TRUNCATE)');
      watch.otherCommitted();
      expect(watch.otherCommitted()).toBe(false);
      insertOther.run();
      expect(watch.otherCommitted()).toBe(true);
    }
    watch.close();
    other.close();
    mine.close();
  });

  it('falls back to the pragma alone without a shared-memory file (still exact)', () => {
    const path = join(dir, 'c.db');
    const mine = new Database(path); // rollback journal: no -shm file
    mine.exec('CREATE TABLE t (x INTEGER)');
    const other = new Database(path, { timeout: 5_000 });
    const watch = watchCommits(mine, path);
    expect(watch.otherCommitted()).toBe(false);
    other.exec('INSERT INTO t VALUES (1)');
    expect(watch.otherCommitted()).toBe(true);
    expect(watch.otherCommitted()).toBe(false);
    watch.close();
    other.close();
    mine.close();
  });
});
