// Prisma's SQLite adapter opens a transaction with a deferred BEGIN: it reads as of its first
// statement and asks for the write lock only at its first write. In WAL mode, if another
// connection committed in between (the hot store, the request log's worker, another process),
// that upgrade fails at once with SQLITE_BUSY, which no busy timeout waits out: a transaction
// that checks a cap and then writes answered 500. BEGIN IMMEDIATE takes the write lock first, so
// such a transaction waits its turn (the busy timeout) like every other writer.
import { PrismaBetterSqlite3 } from '@prisma/adapter-better-sqlite3';
import type Database from 'better-sqlite3';

export class ImmediateTransactionsSqlite extends PrismaBetterSqlite3 {
  override async connect(): ReturnType<PrismaBetterSqlite3['connect']> {
    const adapter = await super.connect();
    // The adapter's connection (a plain property in its JavaScript; not in its types).
    const client = (adapter as unknown as { client: Database.Database }).client;
    const prepare = client.prepare.bind(client);
    client.prepare = ((sql: string) => prepare(sql === 'BEGIN' ? 'BEGIN IMMEDIATE' : sql)) as typeof client.prepare;
    return adapter;
  }
}
