// The checkpointer worker loads better-sqlite3 by itself and moves committed WAL pages into
// the database file while the writer's automatic checkpoints are off.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { startCheckpointer, type CheckpointDone } from './sqlite-checkpointer.ts';

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
    // The first periodic checkpoint that found the whole WAL moved into the file (close() runs
    // one more, so the size is read before it).
    let checkpointed!: (done: CheckpointDone) => void;
    const whole = new Promise<CheckpointDone>((r) => (checkpointed = r));
    const checkpointer = startCheckpointer(path, 20, (done) => {
      if (done.walPages > 0 && done.checkpointedPages === done.walPages) checkpointed(done);
    });
    const done = await whole;
    expect(done.walPages).toBeGreaterThan(75); // 2,000 rows of 200 bytes: > 300 kB of 4 kB pages
    expect(statSync(path).size).toBeGreaterThan(before + 300_000);
    await checkpointer.close();
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
