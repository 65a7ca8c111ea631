// The commit watch decides whether cached keys and balances are still good, so it must never
// miss another connection's commit, including one made between two of its own reads.
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlite } from './hot-store-sqlite.ts';
import { watchCommits } from './sqlite-commit-watch.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-commit-watch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function setup(name: string, map: boolean) {
  const path = join(dir, name);
  const mine = openSqlite(path);
  mine.exec('CREATE TABLE t (x INTEGER)');
  const other = new Database(path, { timeout: 5_000 });
  const watch = watchCommits(mine, path, { map });
  const closeAll = () => {
    other.close();
    mine.close();
    watch.close(); // after the connection, as the hot store does
  };
  return { mine, other, watch, closeAll };
}

describe('watchCommits', () => {
  it('reads the WAL-index header from a shared mapping on Linux (no system call per check)', () => {
    const { watch, closeAll } = setup('mapped.db', true);
    expect(watch.headerSource).toBe('mapping');
    closeAll();
  });

  describe.each([
    ['a shared mapping', true, 'mapping'],
    ['pread', false, 'file'],
  ] as const)('reading the header from %s', (_name, map, source) => {
    it('sees every commit of another connection, and only those', () => {
      const { mine, other, watch, closeAll } = setup(`a-${source}.db`, map);
      expect(watch.headerSource).toBe(source);
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
      closeAll();
    });

    it('still sees commits after checkpoints and WAL restarts', () => {
      const { other, watch, closeAll } = setup(`b-${source}.db`, map);
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
      closeAll();
    });

    it('sees a commit from another process', () => {
      const { watch, closeAll } = setup(`c-${source}.db`, map);
      const path = join(dir, `c-${source}.db`);
      expect(watch.otherCommitted()).toBe(false);
      const script = `const D = require('better-sqlite3'); const d = new D(${JSON.stringify(path)}); d.exec('INSERT INTO t VALUES (3)'); d.close();`;
      execFileSync(process.execPath, ['-e', script], { cwd: process.cwd() });
      expect(watch.otherCommitted()).toBe(true);
      expect(watch.otherCommitted()).toBe(false);
      closeAll();
    });
  });

  it('falls back to the pragma alone without a shared-memory file (still exact)', () => {
    const path = join(dir, 'c.db');
    const mine = new Database(path); // rollback journal: no -shm file
    mine.exec('CREATE TABLE t (x INTEGER)');
    const other = new Database(path, { timeout: 5_000 });
    const watch = watchCommits(mine, path);
    expect(watch.headerSource).toBe('none');
    expect(watch.otherCommitted()).toBe(false);
    other.exec('INSERT INTO t VALUES (1)');
    expect(watch.otherCommitted()).toBe(true);
    expect(watch.otherCommitted()).toBe(false);
    other.close();
    mine.close();
    watch.close();
  });
});
