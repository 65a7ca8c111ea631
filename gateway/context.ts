import type { Config } from '../server/config/env.js';
import type { Database } from '../server/db/database.js';
import type { GatewayCore } from './core/gateway-core.js';
import type { HealthChecker } from './registry/health-checker.js';
import type { ModelRegistry } from './registry/model-registry.js';
import type { UpstreamAdapters } from './upstreams/registry.js';

/** Everything a route needs, built once per process and handed to every route module. */
export interface GatewayContext {
  config: Config;
  db: Database;
  core: GatewayCore;
  registry: ModelRegistry;
  health: HealthChecker;
  adapters: UpstreamAdapters;
}
