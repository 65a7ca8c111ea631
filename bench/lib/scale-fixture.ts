// What the concurrency benchmarks (bench/sessions-at-scale.ts, tts-at-scale.ts,
// realtime-at-scale.ts) start their gateways on: a fresh SQLite database with one org and key,
// and the environment that runs a gateway on it as they read it (metrics behind a token, no
// health checks during the windows). A base gateway (`--base`) runs on a copy of the database.
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Database } from '../../server/db/database.ts';
import { migrate } from '../../server/db/migrate.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';

export const METRICS_TOKEN = 'bench-metrics-token-0123456789';

/**
 * A migrated database in a temporary directory named from `prefix`: an org with ample credit and
 * a key with no practical rate limit; `prepare` adds the models and voices the benchmark uses.
 */
export async function scaleDatabase(prefix: string, prepare: (db: Database) => Promise<void>): Promise<{ dataDir: string; key: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  const databaseUrl = `file:${join(dataDir, 'svc.db')}`;
  await migrate(databaseUrl);
  const db = openDatabase(databaseUrl);
  const org = await createOrg(db, { name: 'bench', creditsMicros: 1_000_000_000_000n });
  const { key } = await createApiKey(db.prisma, { orgId: org.id, name: 'bench', rateLimitRpm: 1_000_000_000 });
  await prepare(db);
  await db.close();
  return { dataDir, key };
}

/** A copy of the database in `dataDir`, in a directory of its own, for the base gateway. */
export function copyScaleDatabase(dataDir: string, prefix: string): string {
  const copy = mkdtempSync(join(tmpdir(), prefix));
  copyFileSync(join(dataDir, 'svc.db'), join(copy, 'svc.db'));
  return copy;
}

/** A gateway's environment on the database in `dataDir`, with `extra` (engine keys, log level, inspector). */
export function scaleGatewayEnv(dataDir: string, extra: Record<string, string>): Record<string, string> {
  return {
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: `file:${join(dataDir, 'svc.db')}`,
    SVC_MODELS_FILE: '/nonexistent',
    SVC_HEALTH_CHECK_SECONDS: '3600',
    SVC_METRICS_TOKEN: METRICS_TOKEN,
    ...extra,
  };
}
