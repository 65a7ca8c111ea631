// A real, migrated, throw-away database per test file: a temporary SQLite file, or a fresh
// PostgreSQL database on the local server when TEST_DB=postgresql (CI runs the suite twice).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase, type Database } from '../../server/db/database.ts';
import type { Dialect } from '../../server/db/dialect.ts';
import { migrate } from '../../server/db/migrate.ts';
import { newId } from '../../server/db/ids.ts';

export const TEST_DIALECT: Dialect = process.env.TEST_DB === 'postgresql' ? 'postgresql' : 'sqlite';
export const POSTGRES_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  dialect: Dialect;
  /** A data directory for processes started against this database. */
  dataDir: string;
  db: Database;
  drop(): Promise<void>;
}

export async function createTestDatabase(dialect: Dialect = TEST_DIALECT): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  let url: string;
  let dropDb = async () => {};
  if (dialect === 'sqlite') {
    url = `file:${join(dataDir, 'svc.db')}`;
  } else {
    const name = newId('svc_test').replace(/[^a-z0-9_]/g, '_');
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5_000 });
    await admin.connect().catch((e: Error) => {
      throw new Error(`PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL} (${e.message}); start it or set TEST_POSTGRES_URL`);
    });
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const u = new URL(POSTGRES_ADMIN_URL);
    u.pathname = `/${name}`;
    url = u.toString();
    dropDb = async () => {
      const c = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    };
  }
  await migrate(url);
  const db = openDatabase(url);
  return {
    url,
    dialect,
    dataDir,
    db,
    async drop() {
      await db.close();
      await dropDb();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
