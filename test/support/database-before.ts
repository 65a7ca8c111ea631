// A throw-away database (the one TEST_DB picks) migrated up to, not including, one migration,
// with raw SQL to put the rows that migration will meet: for tests of a migration's data steps.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openSqlite } from '../../server/db/hot-store-sqlite.ts';
import { newId } from '../../server/db/ids.ts';
import { listMigrations } from '../../server/db/migrate.ts';
import { POSTGRES_ADMIN_URL, TEST_DIALECT } from './test-database.ts';

export interface DatabaseBefore {
  url: string;
  /** Runs SQL (several statements) on it. */
  exec(sql: string): Promise<void>;
  drop(): Promise<void>;
}

export async function databaseBefore(migration: string): Promise<DatabaseBefore> {
  let url: string;
  let exec: (sql: string) => Promise<void>;
  let drop: () => Promise<void>;
  if (TEST_DIALECT === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'svc-mig-'));
    url = `file:${join(dir, 'svc.db')}`;
    exec = async (sql) => {
      const db = openSqlite(join(dir, 'svc.db'));
      try {
        db.exec(sql);
      } finally {
        db.close();
      }
    };
    drop = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    const name = newId('svc_mig').replace(/[^a-z0-9_]/g, '_');
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const u = new URL(POSTGRES_ADMIN_URL);
    u.pathname = `/${name}`;
    url = u.toString();
    exec = async (sql) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(sql);
      } finally {
        await c.end();
      }
    };
    drop = async () => {
      const c = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    };
  }
  // The schema as it was before this migration, recorded as applied the way migrate() does.
  const earlier = listMigrations(TEST_DIALECT).filter((m) => m.name < migration);
  if (earlier.length === 0) throw new Error(`no migration before ${migration}`);
  await exec(`CREATE TABLE IF NOT EXISTS "_svc_migrations" (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`);
  for (const m of earlier) await exec(`${m.sql};\nINSERT INTO "_svc_migrations" (name, applied_at) VALUES ('${m.name}', 'test')`);
  return { url, exec, drop };
}
