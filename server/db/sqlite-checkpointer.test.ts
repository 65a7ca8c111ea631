// The checkpointer worker loads better-sqlite3 by itself and moves committed WAL pages into
// the database file while the writer's automatic checkpoints are off.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { startCheckpointer } from './sqlite-checkpointer.js';

it('checkpoints the WAL into the database file from its worker thread', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-ckpt-'));
  try {
    const path = join(dir, 'db.sqlite');
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (x TEXT)');
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) insert.run('x'.repeat(200));
    })();
    const before = statSync(path).size;
    const checkpointer = startCheckpointer(path, 20);
    await new Promise((r) => setTimeout(r, 300));
    await checkpointer.close();
    expect(statSync(path).size).toBeGreaterThan(before + 300_000);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
