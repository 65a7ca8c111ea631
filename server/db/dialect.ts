export type Dialect = 'sqlite' | 'postgresql';

/** The database is chosen by the scheme of DATABASE_URL: file: is SQLite, postgres(ql):// is PostgreSQL. */
export function dialectOf(databaseUrl: string): Dialect {
  if (databaseUrl.startsWith('file:')) return 'sqlite';
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return 'postgresql';
  throw new Error(`DATABASE_URL must start with file:, postgres:// or postgresql:// (got ${databaseUrl.split(':')[0]}:)`);
}

export function sqlitePath(databaseUrl: string): string {
  return databaseUrl.replace(/^file:/, '');
}

/**
 * Timestamps as the Prisma adapters store them, for rows written by raw SQL: ISO-8601 with
 * "+00:00" on SQLite (adapter-better-sqlite3's default), and a UTC wall-clock string for
 * PostgreSQL's `timestamp(3)` (without time zone), independent of the process's TZ.
 */
export function sqlTimestamp(dialect: Dialect, date: Date): string {
  const iso = date.toISOString();
  return dialect === 'sqlite' ? iso.replace('Z', '+00:00') : iso.slice(0, -1);
}
