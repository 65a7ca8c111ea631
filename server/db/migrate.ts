// Applies the SQL migrations in prisma/migrations/<dialect>/ in order, each in a
// transaction, recording them in "_svc_migrations". Idempotent: re-running applies nothing.
// This replaces `prisma migrate deploy`, which needs a native engine that cannot be
// downloaded here; the SQL files themselves are made by scripts/make-migration.ts.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { dialectOf, sqlitePath, type Dialect } from './dialect.ts';
import { openSqlite } from './hot-store-sqlite.ts';
import { PROJECT_ROOT } from '../project-root.ts';

const MIGRATIONS_ROOT = join(PROJECT_ROOT, 'prisma/migrations');

export interface Migration {
  name: string;
  sql: string;
}

export function listMigrations(dialect: Dialect): Migration[] {
  const dir = join(MIGRATIONS_ROOT, dialect);
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && /^\d{4}_/.test(e.name))
    .map((e) => e.name)
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(dir, name, 'migration.sql'), 'utf8') }));
}

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS "_svc_migrations" (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`;

/** Returns the names of the migrations applied by this call. */
export async function migrate(databaseUrl: string): Promise<string[]> {
  const dialect = dialectOf(databaseUrl);
  const migrations = listMigrations(dialect);
  return dialect === 'sqlite' ? migrateSqlite(sqlitePath(databaseUrl), migrations) : migratePostgres(databaseUrl, migrations);
}

function migrateSqlite(path: string, migrations: Migration[]): string[] {
  const db = openSqlite(path);
  // SQLite ignores `PRAGMA foreign_keys=OFF` inside a transaction, and table rebuilds in
  // migrations rely on it (else ON DELETE CASCADE fires and deletes child rows). So: keys
  // off outside the transaction, check them before commit, back on afterwards.
  db.pragma('foreign_keys = OFF');
  try {
    db.exec(CREATE_TABLE);
    const applied: string[] = [];
    const isApplied = db.prepare<[string], { name: string }>(`SELECT name FROM "_svc_migrations" WHERE name = ?`);
    const record = db.prepare(`INSERT INTO "_svc_migrations" (name, applied_at) VALUES (?, ?)`);
    for (const m of migrations) {
      // IMMEDIATE: two processes starting at once serialise here; the second sees it applied.
      db.transaction(() => {
        if (isApplied.get(m.name)) return;
        db.exec(m.sql);
        const violations = db.pragma('foreign_key_check') as unknown[];
        if (violations.length > 0) throw new Error(`migration ${m.name} leaves ${violations.length} foreign key violations`);
        record.run(m.name, new Date().toISOString());
        applied.push(m.name);
      }).immediate();
    }
    return applied;
  } finally {
    db.pragma('foreign_keys = ON');
    db.close();
  }
}

async function migratePostgres(connectionString: string, migrations: Migration[]): Promise<string[]> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    // A session advisory lock serialises replicas that start at the same time.
    await client.query(`SELECT pg_advisory_lock(7346219001)`);
    await client.query(CREATE_TABLE);
    const { rows } = await client.query<{ name: string }>(`SELECT name FROM "_svc_migrations"`);
    const done = new Set(rows.map((r) => r.name));
    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      // Simple query protocol: the whole file in one round, inside one transaction.
      await client
        .query(
          `BEGIN;\n${m.sql}\n;INSERT INTO "_svc_migrations" (name, applied_at) VALUES ('${m.name.replace(/'/g, "''")}', '${new Date().toISOString()}');\nCOMMIT;`,
        )
        .catch(async (e: unknown) => {
          await client.query('ROLLBACK').catch(() => {});
          throw e;
        });
      applied.push(m.name);
    }
    return applied;
  } finally {
    await client.query(`SELECT pg_advisory_unlock(7346219001)`).catch(() => {});
    await client.end();
  }
}
