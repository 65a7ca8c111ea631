// Assembles a gateway process from its configuration: database (migrated), registry, health
// checks, rate limiter (Redis when REDIS_URL is set), core, metrics, HTTP app; and takes it
// apart again, gracefully (`shutdown`). Used by `svc gateway`, `svc start` and the black-box
// tests alike.
import type { Server } from 'node:http';
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../server/clock.ts';
import type { Config } from '../server/config/env.ts';
import { ensureDataDir, readTlsFiles } from '../server/config/env.ts';
import { openDatabase } from '../server/db/database.ts';
import { migrate } from '../server/db/migrate.ts';
import { recordCircuitOpen } from '../server/services/models/record-circuit.ts';
import { seedRegistry } from '../server/services/models/seed-registry.ts';
import { seedPlatformVoices } from '../server/services/voices/seed-platform-voices.ts';
import { buildGateway } from './app.ts';
import type { GatewayContext } from './context.ts';
import { idleMemoryRelease, releaseFreedMemory } from './upstreams/release-freed-memory.ts';
import { Admission } from './core/admission.ts';
import { createGatewayCore, createPassThroughCore, type GatewayCore } from './core/gateway-core.ts';
import { createKeyUsageTracker } from './core/key-usage-tracker.ts';
import { createMemoryRateLimiter, createRedisRateLimiter, type RateLimiter } from '../server/rate-limit/rate-limiter.ts';
import { ServiceError, isServiceError } from '../server/services/errors.ts';
import { Lifecycle } from './lifecycle.ts';
import { UpstreamStatsRecorder } from '../server/services/models/upstream-stats.ts';
import { startJobWorker } from './jobs/start-job-worker.ts';
import { PreviewWorker } from './voices/preview-worker.ts';
import { voiceEngines } from './voices/voice-engines.ts';
import { GatewayMetrics, upstreamLabel } from './metrics/gateway-metrics.ts';
import { startMetricsServer } from './metrics/metrics-http.ts';
import { HealthChecker } from './registry/health-checker.ts';
import { createTracing } from './tracing/gateway-tracing.ts';
import { createRequestLog } from './request-log/create-request-log.ts';
import { ModelRegistry } from './registry/model-registry.ts';
import { unloadAll as unloadLocalModels } from './upstreams/llama-cpp/llama-engine.ts';
import { limitDecoders, shutdownRecognizers } from './upstreams/pocketsphinx/recognizer.ts';
import { limitEngines, stopEngineSpawner, warmUpEngineSpawner } from './upstreams/local-tts/run-engine.ts';
import { checkProtocol, ProtocolRuntimes } from './upstreams/protocols/index.ts';

export interface GatewayRuntime {
  app: FastifyInstance;
  ctx: GatewayContext;
  /** The separate metrics listener, when SVC_METRICS_PORT is set. */
  metricsServer: Server | null;
  /**
   * Graceful stop: refuse new connections and requests at once, let in-flight requests and
   * streams run for `graceMs`, then end the remaining streams cleanly (SSE: an error event
   * and [DONE]; WebSocket: 1001), wait for their last debits, flush, close the database.
   */
  shutdown(graceMs: number): Promise<void>;
  /** shutdown(0): streams are ended at once (tests, benchmarks). */
  close(): Promise<void>;
}

/** After the grace period, how long streams get to write their final event before their sockets are cut. */
const END_STREAMS_MS = 2_000;
/** How long a shutdown waits for the last debits of sessions ended at the deadline. */
const SETTLE_MS = 5_000;

/**
 * The core with every debit counted in the metrics (the core itself stays free of them). A
 * debit that cannot be written (the database is unreachable) becomes a 503 for requests that
 * are still waiting for their answer: it was not billed, so its result is withheld, and the
 * client retries (streams already delivered are logged and counted as unbilled).
 */
function meteredCore(core: GatewayCore, metrics: GatewayMetrics): GatewayCore {
  const wrapped = Object.create(core) as GatewayCore;
  wrapped.charge = async (auth, requestId, costMicros, usage, hold, settles) => {
    try {
      const remaining = await core.charge(auth, requestId, costMicros, usage, hold, settles);
      metrics.debited(usage.modality, usage.modelId, costMicros);
      return remaining;
    } catch (e) {
      metrics.debitFailed(usage.modality, usage.modelId);
      if (isServiceError(e)) throw e;
      throw new ServiceError(
        'temporarily_unavailable',
        'The usage of this request could not be recorded (the database is unreachable), so it was not billed and its result is withheld; retry within a few seconds.',
      );
    }
  };
  return wrapped;
}

function countedLimiter(limiter: RateLimiter, metrics: GatewayMetrics): RateLimiter {
  return {
    async consume(keyId, limit) {
      try {
        return await limiter.consume(keyId, limit);
      } catch (e) {
        metrics.rateLimiterError();
        throw e;
      }
    },
    close: () => limiter.close(),
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** How long a starting gateway waits for Redis before it serves, admitting uncounted, without it. */
const REDIS_CONNECT_WAIT_MS = 5_000;

/** Resolves true once the client is ready, false if it is not within `ms`. */
function connectedWithin(redis: Redis, ms: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    redis.on('ready', onReady);
  });
}

/** How often memory that malloc keeps after freeing it is handed back to the system. */
const RELEASE_FREED_MEMORY_MS = 10_000;

/** How long a shutdown waits for the last spans to reach the collector. */
const TRACE_FLUSH_MS = 5_000;

/** `clock`: what rate-limit windows, agent claims, key expiry and spend windows read the time from (tests set one; the system's otherwise). */
export async function createGatewayRuntime(
  config: Config,
  options: { logger?: boolean; passThroughCore?: { keyId: string; orgId: string }; clock?: Clock } = {},
): Promise<GatewayRuntime> {
  // First: a wrong certificate or key stops the start before anything else is touched.
  const tls = config.tls ? readTlsFiles(config.tls) : undefined;
  ensureDataDir(config);
  await migrate(config.databaseUrl);
  const db = openDatabase(config.databaseUrl);
  await seedRegistry(db.prisma, checkProtocol);
  await seedPlatformVoices(db.prisma);

  const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false }) : null;
  redis?.on('error', () => {
    // ioredis reconnects by itself; the limiter admits requests while Redis is away.
  });
  // Without its offline queue ioredis fails commands until the connection is ready, and the
  // limiter admits what it cannot count: a replica that started serving before connecting
  // would let its first requests through unlimited. Wait for Redis, but not forever.
  const redisReady = redis ? await connectedWithin(redis, REDIS_CONNECT_WAIT_MS) : true;
  const metrics = new GatewayMetrics();
  const lifecycle = new Lifecycle();
  const clock = options.clock ?? systemClock;
  const limiter = countedLimiter(redis ? createRedisRateLimiter(redis, { clock }) : createMemoryRateLimiter(clock), metrics);
  const usage = createKeyUsageTracker(db.hot);
  const metered = meteredCore(
    options.passThroughCore
      ? createPassThroughCore(options.passThroughCore)
      : createGatewayCore({ store: db.hot, limiter, defaultRpm: config.defaultRpm, onKeyUsed: usage.mark, clock }),
    metrics,
  );
  // Only with an OTLP endpoint; otherwise undefined and nothing is traced.
  const tracing = createTracing(config.tracing);
  const requestLog = createRequestLog(config, db, metrics);
  const traced = tracing ? tracing.traceCore(metered) : metered;
  const core = requestLog ? requestLog.observeCore(traced, db.hot) : traced;

  const registry = new ModelRegistry(db.prisma, {
    clock,
    circuit: config.circuit,
    onCircuit: (id, open) => {
      const upstream = registry.upstreams().find((u) => u.id === id);
      if (upstream) metrics.circuitOpen(upstream, open);
      if (open) void recordCircuitOpen(db.prisma, id);
    },
  });
  await registry.refresh();
  const protocols = new ProtocolRuntimes(config.engines);
  limitDecoders(config.limits.sttDecoders);
  limitEngines(config.limits.ttsEngines);
  const health = new HealthChecker(
    registry,
    db.prisma,
    (name) => protocols.get(name)?.health,
    (upstream, ok, fromCheck) => metrics.upstreamHealth(upstream, ok, fromCheck),
  );
  const upstreamStats = new UpstreamStatsRecorder(db.prisma);
  // Checks for revoked keys go through the hot store; a failed check is retried by the next tick.
  let logCheckError: (err: unknown) => void = () => {};
  const admission = new Admission(
    config.limits,
    (ids) => db.hot.keyStatuses(ids),
    500,
    (err) => logCheckError(err),
    clock,
  );
  const ctx: GatewayContext = { config, db, clock, core, admission, limiter, registry, health, protocols, metrics, lifecycle, tracing, upstreamStats };
  ctx.requestLog = requestLog;

  const app = await buildGateway(ctx, { logger: options.logger, tls });
  logCheckError = (err) => app.log.warn({ err }, 'revocation check of running sessions failed');
  // Reservations of this process are renewed, and those of dead processes released, a few
  // times per time-to-live.
  const maintainHolds = () =>
    db.hot.maintainHolds(config.limits.creditHoldTtlMs).catch((err: unknown) => app.log.warn({ err }, 'credit reservation upkeep failed'));
  await maintainHolds();
  const holdUpkeep = setInterval(maintainHolds, Math.max(1_000, config.limits.creditHoldTtlMs / 6));
  holdUpkeep.unref();
  if (tracing) {
    tracing.onExportStateChange = (failing, err) =>
      failing
        ? app.log.warn(
            { err, url: upstreamLabel(config.tracing?.tracesUrl ?? '') },
            'trace export failed; spans are dropped until the collector accepts them again',
          )
        : app.log.info('trace export works again');
  }
  if (!redisReady) app.log.warn({ waitedMs: REDIS_CONNECT_WAIT_MS }, 'Redis (REDIS_URL) is not reachable: rate limits are not counted until it is');
  db.hot.onDeferredWriteError = (err, queued) =>
    app.log.error({ err, queued }, 'usage debits could not be written; retrying them (metered requests get 503 until they are)');
  const worker = config.jobs.worker ? startJobWorker(ctx, app.log) : null;
  // Previews are made where jobs run: each gateway, or the `svc worker` processes.
  const previews =
    config.jobs.worker && config.previews.enabled
      ? new PreviewWorker({ prisma: db.prisma, dataDir: config.dataDir, engines: voiceEngines(ctx, null), ...config.previews, log: app.log })
      : null;
  ctx.previews = previews ?? undefined;
  const metricsServer = config.metricsPort
    ? await startMetricsServer(metrics, { host: config.metricsHost, port: config.metricsPort, token: config.metricsToken })
    : null;

  registry.start(config.registryRefreshMs, (err) => app.log.warn({ err }, 'registry refresh failed'));
  previews?.start();
  if (registry.upstreams().some((u) => u.protocol === 'flite' || u.protocol === 'espeak-ng')) warmUpEngineSpawner();
  health.start(config.healthCheckMs);
  upstreamStats.start(5_000, (err) => app.log.warn({ err }, 'upstream stats flush failed'));
  await requestLog?.start(app.log);
  // glibc keeps what malloc freed: V8's compiling peak just after start, and bursts of load,
  // leave an idle gateway's RSS high depending on fragmentation. Handed back now and then, when
  // the event loop is idle (docs/performance.md, "Memory").
  releaseFreedMemory();
  const memoryReleaser = setInterval(idleMemoryRelease(), RELEASE_FREED_MEMORY_MS);
  memoryReleaser.unref();

  let stopped: Promise<void> | undefined;
  const shutdown = async (graceMs: number) => {
    lifecycle.beginDrain();
    const workerStopped = worker?.stop(Math.min(graceMs, 5_000));
    const previewsStopped = previews?.stop();
    registry.stop();
    health.stop();
    clearInterval(memoryReleaser);
    clearInterval(holdUpkeep);
    // app.close() stops listening (new connections are refused) and resolves once every
    // connection has ended. Connections left idle by a finished request are closed as they
    // become idle (Node closes only those idle at the moment close() is called).
    const closed = app.close();
    const reaper = setInterval(() => app.server.closeIdleConnections(), 100);
    const inTime = await Promise.race([closed.then(() => true), sleep(graceMs).then(() => false)]);
    if (!inTime) {
      app.log.warn({ graceMs }, 'shutdown grace period over: ending the remaining streams');
      lifecycle.endStreams();
      await Promise.race([closed, sleep(END_STREAMS_MS)]);
      app.server.closeAllConnections();
      lifecycle.terminateSockets();
      await closed;
    }
    clearInterval(reaper);
    metricsServer?.closeAllConnections();
    await new Promise<void>((r) => (metricsServer ? metricsServer.close(() => r()) : r()));
    // Last debits of WebSocket sessions, then the batched last-used stamps, then the database.
    if (!(await lifecycle.settled(SETTLE_MS))) app.log.error('some sessions were still being billed when the database closed');
    await workerStopped;
    await previewsStopped;
    // Every span has ended by now (requests closed, debits settled): send what is buffered.
    if (tracing && !(await tracing.shutdown(TRACE_FLUSH_MS))) app.log.warn({ timeoutMs: TRACE_FLUSH_MS }, 'the last trace spans could not be exported in time');
    await upstreamStats.stop();
    await requestLog?.close();
    await usage.close();
    admission.stop();
    await limiter.close();
    redis?.disconnect();
    await db.close();
    await unloadLocalModels();
    await shutdownRecognizers();
    stopEngineSpawner();
  };

  return {
    app,
    ctx,
    metricsServer,
    shutdown(graceMs) {
      stopped ??= shutdown(graceMs);
      return stopped;
    },
    close() {
      stopped ??= shutdown(0);
      return stopped;
    },
  };
}
