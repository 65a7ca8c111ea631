import type { UpstreamStatsRecorder } from '../server/services/models/upstream-stats.ts';
import type { Clock } from '../server/clock.ts';
import type { Config } from '../server/config/env.ts';
import type { Database } from '../server/db/database.ts';
import type { Admission } from './core/admission.ts';
import type { GatewayCore } from './core/gateway-core.ts';
import type { RateLimiter } from '../server/rate-limit/rate-limiter.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { RequestLog } from './request-log/request-log.ts';
import type { GatewayMetrics } from './metrics/gateway-metrics.ts';
import type { HealthChecker } from './registry/health-checker.ts';
import type { GatewayTracing } from './tracing/gateway-tracing.ts';
import type { ModelRegistry } from './registry/model-registry.ts';
import type { ProtocolRuntimes } from './upstreams/protocols/index.ts';

/** Everything a route needs, built once per process and handed to every route module. */
export interface GatewayContext {
  config: Config;
  db: Database;
  /** The time rate-limit windows and agent claims are decided by (tests hand in their own). */
  clock: Clock;
  core: GatewayCore;
  /** What may run at once per key, org and process, and the revocation watch of running work. */
  admission: Admission;
  /** Fixed one-minute windows (memory, or Redis with REDIS_URL): keys, and registration's per-IP limit. */
  limiter: RateLimiter;
  registry: ModelRegistry;
  health: HealthChecker;
  /** The upstream protocols as this process runs them (gateway/upstreams/protocols). */
  protocols: ProtocolRuntimes;
  /** Prometheus metrics of this process (GET /metrics). */
  metrics: GatewayMetrics;
  /** Draining and shutdown state (SIGTERM). */
  lifecycle: Lifecycle;
  /** OpenTelemetry traces, only when an OTLP endpoint is configured (undefined: off, no cost). */
  tracing?: GatewayTracing;
  /** The in-process job worker, when this process runs one: told when a job is queued. */
  jobs?: { notify(): void };
  /** The in-process preview worker, when this process runs one: told when a voice got a ready profile. */
  previews?: { notify(): void };
  /** Calls and failures per upstream, added to the database for the dashboard's error rates. */
  upstreamStats?: UpstreamStatsRecorder;
  /** A row per keyed request and session, written in batches (docs/logs.md); undefined: off (SVC_REQUEST_LOG=off). */
  requestLog?: RequestLog;
}
