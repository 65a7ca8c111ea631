// Assembles a gateway process from its configuration: database (migrated), registry, health
// checks, rate limiter (Redis when REDIS_URL is set), core, HTTP app. Used by `svc gateway`,
// `svc start` and the black-box tests alike.
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../server/config/env.js';
import { ensureDataDir } from '../server/config/env.js';
import { openDatabase } from '../server/db/database.js';
import { migrate } from '../server/db/migrate.js';
import { seedRegistry } from '../server/services/models/seed-registry.js';
import { seedPlatformVoices } from '../server/services/voices/seed-platform-voices.js';
import { buildGateway } from './app.js';
import type { GatewayContext } from './context.js';
import { createGatewayCore, createPassThroughCore } from './core/gateway-core.js';
import { createKeyUsageTracker } from './core/key-usage-tracker.js';
import { createMemoryRateLimiter, createRedisRateLimiter } from './core/rate-limiter.js';
import { HealthChecker } from './registry/health-checker.js';
import { ModelRegistry } from './registry/model-registry.js';
import { createUpstreamAdapters } from './upstreams/registry.js';
import { unloadAll as unloadLocalModels } from './upstreams/llama-cpp/llama-engine.js';
import { shutdownRecognizers } from './upstreams/pocketsphinx/recognizer.js';
import { stopEngineSpawner } from './upstreams/local-tts/run-engine.js';

export interface GatewayRuntime {
  app: FastifyInstance;
  ctx: GatewayContext;
  close(): Promise<void>;
}

export async function createGatewayRuntime(config: Config, options: { logger?: boolean; passThroughCore?: boolean } = {}): Promise<GatewayRuntime> {
  ensureDataDir(config);
  await migrate(config.databaseUrl);
  const db = openDatabase(config.databaseUrl);
  await seedRegistry(db.prisma);
  await seedPlatformVoices(db.prisma);

  const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false }) : null;
  redis?.on('error', () => {
    // ioredis reconnects by itself; the limiter admits requests while Redis is away.
  });
  const limiter = redis ? createRedisRateLimiter(redis) : createMemoryRateLimiter();
  const usage = createKeyUsageTracker(db.hot);
  const core = options.passThroughCore
    ? createPassThroughCore()
    : createGatewayCore({ store: db.hot, limiter, defaultRpm: config.defaultRpm, onKeyUsed: usage.mark });

  const registry = new ModelRegistry(db.prisma);
  await registry.refresh();
  const adapters = createUpstreamAdapters({ dataDir: config.dataDir });
  const health = new HealthChecker(registry, db.prisma, adapters.healthCheck);
  const ctx: GatewayContext = { config, db, core, registry, health, adapters };
  const app = await buildGateway(ctx, { logger: options.logger });

  registry.start(config.registryRefreshMs, (err) => app.log.warn({ err }, 'registry refresh failed'));
  health.start(config.healthCheckMs);

  return {
    app,
    ctx,
    async close() {
      registry.stop();
      health.stop();
      await app.close();
      await usage.close();
      await limiter.close();
      redis?.disconnect();
      await db.close();
      await unloadLocalModels();
      await shutdownRecognizers();
      stopEngineSpawner();
    },
  };
}
