import type Database from 'better-sqlite3';
import { sqlTimestamp } from './dialect.ts';
import { openSqlite } from './hot-store-sqlite.ts';
import { ROW_COLUMNS, TURN_COLUMNS, type RequestLogRow, type RequestLogStore, type RequestLogTurnRow } from './request-log-store.ts';

/** Rows per INSERT statement (one prepared statement per row count up to it, made when first needed). */
const INSERT_CHUNK = 32;

/**
 * On a connection of its own: the hot store's connection is not shared outside it. Its commits
 * look like another connection's to the hot store, which then re-reads its cached keys once
 * per batch (server/db/sqlite-commit-watch.ts).
 */
export function createSqliteRequestLogStore(path: string): RequestLogStore {
  const db = openSqlite(path);
  // Checkpoints are the hot store's worker's (sqlite-checkpointer.ts), never inside our commits.
  db.pragma('wal_autocheckpoint = 0');
  // Never wait for another connection's write lock: better-sqlite3 would wait on the gateway's
  // thread. A batch that finds the database locked fails at once and stays buffered for the next flush.
  db.pragma('busy_timeout = 0');
  const ts = (d: Date) => sqlTimestamp('sqlite', d);

  const inserter = (table: string, columns: readonly string[]) => {
    const cache: Database.Statement[] = [];
    const tuple = `(${columns.map(() => '?').join(',')})`;
    return (rows: number) =>
      (cache[rows] ??= db.prepare(`INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(',')}) VALUES ${Array(rows).fill(tuple).join(',')}`));
  };
  const insertRows = inserter('RequestLog', ROW_COLUMNS);
  const insertTurns = inserter('RequestLogTurn', TURN_COLUMNS);
  const rowValues = (r: RequestLogRow): unknown[] => ROW_COLUMNS.map((c) => (c === 'createdAt' ? ts(new Date(r.createdAt)) : r[c]));
  const turnValues = (t: RequestLogTurnRow): unknown[] => TURN_COLUMNS.map((c) => (c === 'createdAt' ? ts(new Date(t.createdAt)) : t[c]));
  function insertAll<T>(items: readonly T[], statement: (n: number) => Database.Statement, values: (item: T) => unknown[]): void {
    for (let at = 0; at < items.length; at += INSERT_CHUNK) {
      const chunk = items.slice(at, at + INSERT_CHUNK);
      statement(chunk.length).run(chunk.flatMap(values));
    }
  }
  const insert = db.transaction((rows: readonly RequestLogRow[], turns: readonly RequestLogTurnRow[]) => {
    insertAll(rows, insertRows, rowValues);
    insertAll(turns, insertTurns, turnValues);
  });

  // Each prune statement touches at most `limit` rows through an index, so it is short however
  // large the table is: pruning runs on the gateway's thread.
  const deleteTurnsOf = db.prepare<[string]>(`DELETE FROM "RequestLogTurn" WHERE "requestLogId" IN (SELECT value FROM json_each(?))`);
  const deleteOlder = db.prepare<[string, bigint]>(
    `DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" WHERE "createdAt" < ? ORDER BY "createdAt" LIMIT ?) RETURNING id`,
  );
  const deleteOlderOfOrg = db.prepare<[string, string, bigint]>(
    `DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" WHERE "orgId" = ? AND "createdAt" < ? ORDER BY "createdAt" LIMIT ?) RETURNING id`,
  );
  // Rowids grow by one per insert and rows go oldest first, so the span of rowids is the row
  // count (an overestimate only by rows deleted from the middle, by an org's shorter retention):
  // two index lookups instead of a count over the whole table.
  const approximateCount = db.prepare<[], { n: bigint | null }>(
    `SELECT (SELECT max(rowid) FROM "RequestLog") - (SELECT min(rowid) FROM "RequestLog") + 1 AS n`,
  );
  const deleteOldest = db.prepare<[bigint]>(`DELETE FROM "RequestLog" WHERE rowid IN (SELECT rowid FROM "RequestLog" ORDER BY rowid LIMIT ?) RETURNING id`);
  const withTurns = db.transaction((statement: () => { id: string }[]): number => {
    const gone = statement();
    if (gone.length > 0) deleteTurnsOf.run(JSON.stringify(gone.map((r) => r.id)));
    return gone.length;
  });

  return {
    async insert(rows, turns) {
      if (rows.length > 0 || turns.length > 0) insert.immediate(rows, turns);
    },
    async pruneOlderThan(before, limit, orgId) {
      const cutoff = ts(before);
      return withTurns.immediate(
        () => (orgId === undefined ? deleteOlder.all(cutoff, BigInt(limit)) : deleteOlderOfOrg.all(orgId, cutoff, BigInt(limit))) as { id: string }[],
      );
    },
    async pruneOverCap(maxRows, limit) {
      const n = Number(approximateCount.get()?.n ?? 0n);
      if (n <= maxRows) return 0;
      return withTurns.immediate(() => deleteOldest.all(BigInt(Math.min(n - maxRows, limit))) as { id: string }[]);
    },
    async close() {
      db.close();
    },
  };
}
