// A throw-away SQLite database for the voice benchmarks: one org (ample credit) and one key
// with a limit high enough for load (the limiter still runs on every request). No models are
// created here: the gateway seeds the shipped config/models.json (local-flite, local-espeak,
// local-stt, local-llm) and the platform voices itself when it starts on this database.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../server/db/database.ts';
import { migrate } from '../../server/db/migrate.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';

export async function voiceFixture() {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-voice-'));
  const databaseUrl = `file:${join(dataDir, 'svc.db')}`;
  await migrate(databaseUrl);
  const db = openDatabase(databaseUrl);
  const org = await createOrg(db, { name: 'bench', creditsMicros: 1_000_000_000_000n });
  const key = await createApiKey(db.prisma, { orgId: org.id, name: 'bench', rateLimitRpm: 1_000_000_000 });
  await db.close();
  return {
    dataDir,
    databaseUrl,
    key: key.key,
    /** Environment for startBundled('bench/gateway-server.ts', ...): the shipped models file is used. */
    env: { SVC_DATA_DIR: dataDir, DATABASE_URL: databaseUrl } as Record<string, string>,
    remove: () => rmSync(dataDir, { recursive: true, force: true }),
  };
}
