// The request log's SQLite writes, in a worker thread with its own connection: better-sqlite3
// runs a statement on the thread that calls it, and a batch of hundreds of rows (each with its
// index entries) is milliseconds of work the gateway's thread need not do: written there, it
// was most of what the log cost at maximum throughput (docs/performance.md, "With the request log on and off").
// Here the gateway's thread only hands over the rows' values, and the worker may wait for
// another connection's lock without holding up a request. Its commits look like
// another connection's to the hot store, which then re-reads its cached keys once per batch
// (server/db/sqlite-commit-watch.ts). Checkpoints stay the hot store's worker's.
import { Worker } from 'node:worker_threads';
import { sqlTimestamp } from './dialect.ts';
import { ROW_COLUMNS, TURN_COLUMNS, type RequestLogStore } from './request-log-store.ts';

const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
// Resolved from this module's location (see sqlite-checkpointer.ts for why not require.resolve).
const Database = require('node:module').createRequire(workerData.from)('better-sqlite3');
const db = new Database(workerData.path, { timeout: 10000 });
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('wal_autocheckpoint = 0');
// Each insert statement inside the batch's transaction keeps a statement journal (the pages it
// changes, as they were, to undo that statement alone). Past 64 KiB SQLite spills it to a temporary
// file: a batch of hundreds of rows wrote ~3 times its WAL frames there again, one system call per
// page. In memory it is a copy, freed with the statement.
db.pragma('temp_store = MEMORY');
db.defaultSafeIntegers(true);
function inserter(table, columns) {
  const cache = [];
  const tuple = '(' + columns.map(() => '?').join(',') + ')';
  const sql = (n) => 'INSERT INTO "' + table + '" (' + columns.map((c) => '"' + c + '"').join(',') + ') VALUES ' + Array(n).fill(tuple).join(',');
  // One statement per chunk of at most workerData.chunkRows rows.
  return (chunks, width) => {
    for (const values of chunks) {
      const n = values.length / width;
      (cache[n] ??= db.prepare(sql(n))).run(values);
    }
  };
}
const insertRows = inserter('RequestLog', workerData.rowColumns);
const insertTurns = inserter('RequestLogTurn', workerData.turnColumns);
const insert = db.transaction((rows, turns) => {
  insertRows(rows, workerData.rowColumns.length);
  insertTurns(turns, workerData.turnColumns.length);
});
// Each prune statement touches at most 'limit' rows through an index.
const deleteTurnsOf = db.prepare('DELETE FROM "RequestLogTurn" WHERE "requestLogId" IN (SELECT value FROM json_each(?))');
const deleteOlder = db.prepare('DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" WHERE "createdAt" < ? ORDER BY "createdAt" LIMIT ?) RETURNING id');
const deleteOlderOfOrg = db.prepare('DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" WHERE "orgId" = ? AND "createdAt" < ? ORDER BY "createdAt" LIMIT ?) RETURNING id');
// Rowids grow by one per insert and rows go oldest first, so the span of rowids is the row
// count (an overestimate only by rows an org's shorter retention took from the middle): two
// index lookups instead of a count over the whole table.
const approximateCount = db.prepare('SELECT (SELECT max(rowid) FROM "RequestLog") - (SELECT min(rowid) FROM "RequestLog") + 1 AS n');
const deleteOldest = db.prepare('DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" ORDER BY rowid LIMIT ?) RETURNING id');
const withTurns = db.transaction((statement) => {
  const gone = statement();
  if (gone.length > 0) deleteTurnsOf.run(JSON.stringify(gone.map((r) => r.id)));
  return gone.length;
});
const ops = {
  insert: (m) => insert.immediate(m.rows, m.turns),
  pruneOlderThan: (m) => withTurns.immediate(() => (m.orgId === undefined ? deleteOlder.all(m.cutoff, BigInt(m.limit)) : deleteOlderOfOrg.all(m.orgId, m.cutoff, BigInt(m.limit)))),
  pruneOverCap: (m) => {
    const n = Number(approximateCount.get()?.n ?? 0n);
    if (n <= m.maxRows) return 0;
    return withTurns.immediate(() => deleteOldest.all(BigInt(Math.min(n - m.maxRows, m.limit))));
  },
};
parentPort.on('message', (m) => {
  if (m.op === 'close') {
    db.close();
    parentPort.postMessage({ id: m.id, result: null });
    return;
  }
  try {
    parentPort.postMessage({ id: m.id, result: ops[m.op](m) ?? null });
  } catch (e) {
    parentPort.postMessage({ id: m.id, error: { message: String(e && e.message), code: e && e.code } });
  }
});
`;

/** Rows per insert statement (SQLite allows 32,766 bound values: 32 rows of ~30 columns). */
const CHUNK_ROWS = 32;

interface Reply {
  id: number;
  result?: unknown;
  error?: { message: string; code?: string };
}

export function createSqliteRequestLogStore(path: string): RequestLogStore {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { path, from: import.meta.url, rowColumns: ROW_COLUMNS, turnColumns: TURN_COLUMNS, chunkRows: CHUNK_ROWS },
  });
  // Alive only while a call waits for it: an idle store keeps no process running.
  worker.unref();
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  let gone: Error | null = null;
  const failAll = (e: Error) => {
    gone = e;
    for (const w of waiting.values()) w.reject(e);
    waiting.clear();
  };
  worker.on('message', (reply: Reply) => {
    const w = waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    if (waiting.size === 0) worker.unref();
    if (reply.error) w.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    else w.resolve(reply.result);
  });
  worker.on('error', (e) => failAll(e));
  worker.on('exit', (code) => failAll(new Error(`the request log's SQLite worker exited (${code})`)));
  const call = <T>(message: object): Promise<T> => {
    if (gone) return Promise.reject(gone);
    const id = nextId++;
    worker.ref();
    return new Promise<T>((resolve, reject) => {
      waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ id, ...message });
    });
  };

  const ts = (ms: number) => sqlTimestamp('sqlite', new Date(ms));
  // Flat arrays of values, one per insert statement: cheaper to hand over than objects, and
  // small enough to be made and dropped in V8's young generation (one array for a whole batch
  // was a large object, allocated in the old generation at every doubling).
  const chunked = <R, C extends keyof R & string>(rows: readonly R[], columns: readonly C[]) => {
    const chunks: unknown[][] = [];
    for (let at = 0; at < rows.length; at += CHUNK_ROWS) {
      const values: unknown[] = [];
      for (const r of rows.slice(at, at + CHUNK_ROWS)) for (const c of columns) values.push(c === 'createdAt' ? ts(r[c] as number) : r[c]);
      chunks.push(values);
    }
    return chunks;
  };

  return {
    async insert(rows, turns) {
      if (rows.length > 0 || turns.length > 0) await call({ op: 'insert', rows: chunked(rows, ROW_COLUMNS), turns: chunked(turns, TURN_COLUMNS) });
    },
    pruneOlderThan: (before, limit, orgId) => call<number>({ op: 'pruneOlderThan', cutoff: sqlTimestamp('sqlite', before), limit, orgId }),
    pruneOverCap: (maxRows, limit) => call<number>({ op: 'pruneOverCap', maxRows, limit }),
    async close() {
      if (gone) return;
      await call({ op: 'close' });
      worker.removeAllListeners('exit');
      await worker.terminate();
    },
  };
}
