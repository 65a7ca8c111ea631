// WAL checkpoints off the event loop. A checkpoint copies committed pages into the database
// file and fsyncs it; done by SQLite's automatic checkpoint, that happens inside whichever
// commit crosses the threshold, blocking the gateway's event loop for milliseconds. Here a
// worker thread with its own connection checkpoints (PASSIVE: never blocks writers) twice a
// second, and the hot connection turns automatic checkpoints off.
import { Worker } from 'node:worker_threads';

const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
// Resolved inside the worker from this module's location: in the dashboard, Next's bundler
// rewrites require.resolve() calls in bundled code into module ids, which are not paths.
const Database = require('node:module').createRequire(workerData.from)('better-sqlite3');
const db = new Database(workerData.path, { timeout: 5000 });
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const timer = setInterval(() => {
  try {
    const done = checkpoint.get();
    if (workerData.report) parentPort.postMessage({ walPages: done.log, checkpointedPages: done.checkpointed });
  } catch {}
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); try { checkpoint.run(); } catch {} db.close(); process.exit(0); });
`;

export interface Checkpointer {
  close(): Promise<void>;
}

/** What one periodic checkpoint did: pages in the WAL, and how many of them are now in the database file. */
export interface CheckpointDone {
  walPages: number;
  checkpointedPages: number;
}

/** `onCheckpoint`: told after each periodic checkpoint (tests wait on it rather than on the clock). */
export function startCheckpointer(path: string, intervalMs = 500, onCheckpoint?: (done: CheckpointDone) => void): Checkpointer {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { path, intervalMs, from: import.meta.url, report: onCheckpoint !== undefined },
  });
  if (onCheckpoint) worker.on('message', onCheckpoint);
  worker.unref();
  return {
    close: () =>
      new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        // Keep the process alive until the final checkpoint is done.
        worker.ref();
        worker.postMessage('stop');
      }),
  };
}
