// One handle on the database for a process: a Prisma client for the business rules and the
// hot store for per-request paths, both chosen from DATABASE_URL's scheme.
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient as SqliteClient, Prisma as SqlitePrisma } from './generated/sqlite/client.ts';
import { PrismaClient as PostgresClient } from './generated/postgresql/client.ts';
import { dialectOf, sqlitePath, type Dialect } from './dialect.ts';
import type { HotStore } from './hot-store.ts';
import { createSqliteHotStore } from './hot-store-sqlite.ts';
import { createPostgresHotStore } from './hot-store-postgres.ts';
import { ImmediateTransactionsSqlite } from './sqlite-immediate.ts';

/**
 * Both generated clients have the same model API (they come from one schema source), so
 * the rest of the code is written against one of the two types.
 */
export type Prisma = SqliteClient;

/** Sets a Json column to SQL NULL (undefined leaves it as it is). Both clients share Prisma's runtime, and so this value. */
export const DB_NULL = SqlitePrisma.DbNull;

export interface Database {
  dialect: Dialect;
  prisma: Prisma;
  hot: HotStore;
  close(): Promise<void>;
}

export function openDatabase(databaseUrl: string): Database {
  const dialect = dialectOf(databaseUrl);
  let prisma: Prisma;
  let hot: HotStore;
  if (dialect === 'sqlite') {
    prisma = new SqliteClient({ adapter: new ImmediateTransactionsSqlite({ url: databaseUrl, timeout: 10_000 }) });
    hot = createSqliteHotStore(sqlitePath(databaseUrl));
  } else {
    const client = new PostgresClient({ adapter: new PrismaPg({ connectionString: databaseUrl, max: 5 }) });
    prisma = client as unknown as Prisma;
    hot = createPostgresHotStore(databaseUrl);
  }
  return {
    dialect,
    prisma,
    hot,
    async close() {
      // The hot store last: on SQLite it closes a descriptor of the -shm file, which drops
      // every POSIX lock this process holds on that file, so no connection of ours may still
      // be open then (sqlite-commit-watch.ts).
      await prisma.$disconnect().catch(() => undefined);
      await hot.close().catch(() => undefined);
    },
  };
}
