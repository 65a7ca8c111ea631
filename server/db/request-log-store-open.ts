import { dialectOf, sqlitePath } from './dialect.ts';
import type { RequestLogStore } from './request-log-store.ts';
import { createPostgresRequestLogStore } from './request-log-store-postgres.ts';
import { createSqliteRequestLogStore } from './request-log-store-sqlite.ts';

/** The request-log store of DATABASE_URL's dialect, on a connection of its own. */
export function openRequestLogStore(databaseUrl: string): RequestLogStore {
  return dialectOf(databaseUrl) === 'sqlite' ? createSqliteRequestLogStore(sqlitePath(databaseUrl)) : createPostgresRequestLogStore(databaseUrl);
}
