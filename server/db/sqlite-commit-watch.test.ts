// The commit watch decides whether cached keys and balances are still good, so it must never
// miss another connection's commit, including one made between two of its own reads.
import Database from 'better-sqlite3';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqlite } from './hot-store-sqlite.ts';
import { openHeader, watchCommits } from './sqlite-commit-watch.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-commit-watch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function setup(name: string, map: boolean) {
  const path = join(dir, name);
  const mine = openSqlite(path);
  mine.exec('CREATE TABLE t (x INTEGER)');
  const other = new Database(path, { timeout: 5_000 });
  // The watch's connection, with its asks of PRAGMA data_version counted.
  let pragmaAsks = 0;
  const counted = {
    transaction: mine.transaction.bind(mine),
    prepare(sql: string) {
      const statement = mine.prepare(sql);
      const get = statement.get.bind(statement);
      statement.get = (...args: unknown[]) => {
        pragmaAsks++;
        return get(...args);
      };
      return statement;
    },
  } as unknown as Database.Database;
  const watch = watchCommits(counted, path, { map });
  const closeAll = () => {
    other.close();
    mine.close();
    watch.close(); // after the connection, as the hot store does
  };
  return { mine, other, watch, closeAll, pragmaAsks: () => pragmaAsks };
}

describe('watchCommits', () => {
  it('reads the WAL-index header from a shared mapping on Linux (no system call per check)', () => {
    const { watch, closeAll } = setup('mapped.db', true);
    expect(watch.headerSource).toBe('mapping');
    closeAll();
  });

  it('hands out a copy of the mapped header, which a later commit of another connection does not change', () => {
    const { other, watch, closeAll } = setup('copy.db', true);
    const header = openHeader(join(dir, 'copy.db-shm'), true)!;
    expect(header.source).toBe('mapping');
    const before = header.read()!;
    const kept = Uint8Array.from(before);
    other.exec('INSERT INTO t VALUES (1)');
    // What the caller holds is what it read (the watch judges a header, then keeps it as its
    // snapshot: a live view would let another commit slip in between the two).
    expect(before).toEqual(kept);
    expect(header.read()).not.toEqual(kept);
    expect(watch.otherCommitted()).toBe(true);
    closeAll();
    header.close(); // after the connections, whose locks closing a descriptor of the file would drop
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

    it('needs no pragma after a commit of our own, and still sees every commit of theirs around ours', () => {
      const { mine, other, watch, closeAll, pragmaAsks } = setup(`own-${source}.db`, map);
      const insertOther = other.prepare('INSERT INTO t VALUES (1)');
      const insertMine = mine.prepare('INSERT INTO t VALUES (2)');
      const writeMine = watch.ownWrite(() => insertMine.run());
      const rolledBack = watch.ownWrite(() => {
        throw new Error('rolled back');
      });
      expect(watch.otherCommitted()).toBe(false);
      for (let i = 0; i < 100; i++) {
        // Ours alone: answered from the header, without asking SQLite.
        const asked = pragmaAsks();
        writeMine();
        writeMine();
        expect(watch.otherCommitted()).toBe(false);
        expect(pragmaAsks()).toBe(asked);
        // Theirs, then ours with no question in between.
        insertOther.run();
        writeMine();
        expect(watch.otherCommitted()).toBe(true);
        expect(watch.otherCommitted()).toBe(false);
        // Ours rolled back, theirs, then ours.
        expect(() => rolledBack()).toThrow('rolled back');
        insertOther.run();
        writeMine();
        expect(watch.otherCommitted()).toBe(true);
        expect(watch.otherCommitted()).toBe(false);
      }
      closeAll();
    });

    it('misses no commit of another process racing ours', async () => {
      const { mine, watch, closeAll } = setup(`race-${source}.db`, map);
      const path = join(dir, `race-${source}.db`);
      // Another process commits as fast as it can until told to stop.
      const writer = spawn(
        process.execPath,
        [
          '-e',
          `const D = require('better-sqlite3'); const d = new D(${JSON.stringify(path)}, { timeout: 5000 }); const s = d.prepare('INSERT INTO t VALUES (1)');
           let go = true; process.stdin.on('end', () => (go = false)); process.stdin.resume();
           const loop = () => { s.run(); if (go) setImmediate(loop); else d.close(); };
           process.stdout.write('ready\\n'); loop();`,
        ],
        { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const exited = once(writer, 'exit');
      let raced = 0;
      try {
        await once(writer.stdout!, 'data');
        const insertMine = mine.prepare('INSERT INTO t VALUES (2)');
        const theirs = mine.prepare<[], bigint>('SELECT count(*) FROM t WHERE x = 1').pluck();
        const writeMine = watch.ownWrite(() => insertMine.run());
        // Until enough of their commits fell between two of our questions (a bound, not a timer).
        for (let i = 0; i < 5_000 && raced < 50; i++) {
          watch.otherCommitted();
          const before = theirs.get()!;
          writeMine();
          const after = theirs.get()!;
          // A commit of theirs between the two counts came after the first question: the next one must see it.
          const seen = watch.otherCommitted();
          if (after > before) {
            raced++;
            expect(seen).toBe(true);
          }
        }
      } finally {
        writer.stdin!.end();
        await exited;
        closeAll();
      }
      expect(raced).toBeGreaterThan(0);
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
