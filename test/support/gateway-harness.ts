// The real gateway runtime in this process, on a throw-away database, listening on a free
// loopback port, with one org (credit as asked) and one key. For route tests over real HTTP.
import type { Clock } from '../../server/clock.ts';
import { loadConfig } from '../../server/config/env.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { createGatewayRuntime, type GatewayRuntime } from '../../gateway/runtime.ts';
import { createTestDatabase, type TestDatabase } from './test-database.ts';

export interface GatewayHarness {
  url: string;
  key: string;
  keyId: string;
  orgId: string;
  runtime: GatewayRuntime;
  testDb: TestDatabase;
  headers: Record<string, string>;
  /**
   * Resolves once every debit the gateway has made so far is in the database. On SQLite a
   * usage debit is committed just after its answer is written (docs/api-conventions.md, "Credits"), so a read
   * through another connection (testDb) right after a response must wait for this first.
   */
  settled(): Promise<void>;
  /** The org's balance as stored, after settled(). */
  balanceMicros(): Promise<bigint>;
  close(): Promise<void>;
}

/**
 * `port`: listen there instead of a free one, for tests whose config must name the gateway's own URL.
 * `clock`: the time of rate-limit windows and agent claims (test/support/manual-clock.ts); the system's otherwise.
 */
export async function startGateway(
  options: { creditsMicros?: bigint; env?: Record<string, string>; rpm?: number; port?: number; clock?: Clock } = {},
): Promise<GatewayHarness> {
  const testDb = await createTestDatabase();
  const config = loadConfig({
    SVC_DATA_DIR: testDb.dataDir,
    DATABASE_URL: testDb.url,
    LOG_LEVEL: 'silent',
    SVC_MODELS_FILE: '/nonexistent',
    SVC_REGISTRY_REFRESH_SECONDS: '0.2',
    SVC_HEALTH_CHECK_SECONDS: '0.5',
    // The preview worker would speak every platform voice in the background, beside the engines
    // a test measures: on only where a test asks for it (gateway/routes/voices.previews.test.ts).
    SVC_VOICE_PREVIEWS: 'off',
    ...options.env,
  });
  const org = await createOrg(testDb.db, { name: 'test org', creditsMicros: options.creditsMicros ?? 10_000_000n });
  const key = await createApiKey(testDb.db.prisma, { orgId: org.id, name: 'test', rateLimitRpm: options.rpm ?? 100_000 });
  const runtime = await createGatewayRuntime(config, { logger: false, clock: options.clock });
  const url = await runtime.app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  return {
    url,
    key: key.key,
    keyId: key.id,
    orgId: org.id,
    runtime,
    testDb,
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
    settled: () => runtime.ctx.db.hot.settle(),
    async balanceMicros() {
      await runtime.ctx.db.hot.settle();
      return (await testDb.db.prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros;
    },
    async close() {
      await runtime.close();
      await testDb.drop();
    },
  };
}
