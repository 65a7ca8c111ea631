// Process configuration, validated once at start-up. A bad value stops the process with a
// message that names the variable (see loadConfig).
import { mkdirSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const url = z.url({ protocol: /^https?$/ });

const EnvSchema = z.object({
  SVC_DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^(file:|postgres:\/\/|postgresql:\/\/)/, 'must start with file:, postgres:// or postgresql://')
    .optional(),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must start with redis:// or rediss://').optional(),
  GATEWAY_HOST: z.string().min(1).default('0.0.0.0'),
  GATEWAY_PORT: port.default(8080),
  DASHBOARD_PORT: port.default(3000),
  PUBLIC_BASE_URL: url.optional(),
  AUTH_URL: url.optional(),
  DASHBOARD_URL: url.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SVC_DEFAULT_RPM: z.coerce.number().int().min(1).default(600),
  // Seconds between registry reloads; CLI/dashboard changes reach running gateways this fast.
  SVC_REGISTRY_REFRESH_SECONDS: z.coerce.number().min(0.1).max(3600).default(2),
  SVC_HEALTH_CHECK_SECONDS: z.coerce.number().min(0.1).max(3600).default(10),
  SVC_UPSTREAM_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(3600).default(300),
});

export type Env = z.infer<typeof EnvSchema>;

export interface Config {
  dataDir: string;
  databaseUrl: string;
  redisUrl: string | undefined;
  gatewayHost: string;
  gatewayPort: number;
  dashboardPort: number;
  publicBaseUrl: string;
  authUrl: string;
  dashboardUrl: string;
  logLevel: Env['LOG_LEVEL'];
  defaultRpm: number;
  registryRefreshMs: number;
  healthCheckMs: number;
  upstreamTimeoutMs: number;
}

export class ConfigError extends Error {}

const stripSlash = (u: string) => u.replace(/\/+$/, '');

// The source is a plain string map, not NodeJS.ProcessEnv: Next's types (the dashboard is in
// this TypeScript program) make NODE_ENV a required member of ProcessEnv, which would reject
// every literal env object a test or script passes here.
export function loadConfig(source: Readonly<Record<string, string | undefined>> = process.env): Config {
  const parsed = EnvSchema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const env = parsed.data;
  const dataDir = isAbsolute(env.SVC_DATA_DIR) ? env.SVC_DATA_DIR : resolve(env.SVC_DATA_DIR);
  const publicBaseUrl = stripSlash(env.PUBLIC_BASE_URL ?? `http://localhost:${env.GATEWAY_PORT}`);
  return {
    dataDir,
    databaseUrl: env.DATABASE_URL ?? `file:${join(dataDir, 'svc.db')}`,
    redisUrl: env.REDIS_URL,
    gatewayHost: env.GATEWAY_HOST,
    gatewayPort: env.GATEWAY_PORT,
    dashboardPort: env.DASHBOARD_PORT,
    publicBaseUrl,
    authUrl: stripSlash(env.AUTH_URL ?? publicBaseUrl),
    dashboardUrl: stripSlash(env.DASHBOARD_URL ?? `http://localhost:${env.DASHBOARD_PORT}`),
    logLevel: env.LOG_LEVEL,
    defaultRpm: env.SVC_DEFAULT_RPM,
    registryRefreshMs: env.SVC_REGISTRY_REFRESH_SECONDS * 1000,
    healthCheckMs: env.SVC_HEALTH_CHECK_SECONDS * 1000,
    upstreamTimeoutMs: env.SVC_UPSTREAM_TIMEOUT_SECONDS * 1000,
  };
}

export function ensureDataDir(config: Config): void {
  mkdirSync(config.dataDir, { recursive: true });
}
