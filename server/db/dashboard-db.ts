// The dashboard's database handle: one per server process, opened on first use so that
// DATABASE_URL / SVC_DATA_DIR are read when the server runs, never when `next build` runs.
import { loadConfig } from '../config/env.ts';
import { openDatabase, type Database } from './database.ts';

// On globalThis, not in a module variable: Next may evaluate this module once per route
// bundle (and again on every dev reload), but the process needs one pool.
const holder = globalThis as typeof globalThis & { __svcDashboardDb?: Database };

export function getDb(): Database {
  return (holder.__svcDashboardDb ??= openDatabase(loadConfig().databaseUrl));
}
