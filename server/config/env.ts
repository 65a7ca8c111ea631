// Process configuration, validated once at start-up. A bad value stops the process with a
// message that names the variable (see loadConfig).
import { accessSync, constants as fsConstants, mkdirSync, readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { availableParallelism } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { parseUsdToMicros } from '../money.ts';

const port = z.coerce.number().int().min(0).max(65535);
const url = z.url({ protocol: /^https?$/ });
const onOff = z.enum(['on', 'off']);
const emptyIsUnset = (v: unknown) => (v === '' ? undefined : v);

const EnvSchema = z.object({
  SVC_DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^(file:|postgres:\/\/|postgresql:\/\/)/, 'must start with file:, postgres:// or postgresql://')
    .optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  GATEWAY_HOST: z.string().min(1).default('0.0.0.0'),
  GATEWAY_PORT: port.default(8080),
  // TLS served by the gateway itself (HTTPS and WSS on GATEWAY_PORT): PEM files, both or neither.
  SVC_TLS_CERT: z.preprocess(emptyIsUnset, z.string().optional()),
  SVC_TLS_KEY: z.preprocess(emptyIsUnset, z.string().optional()),
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
  // Per-upstream circuits and LLM stream failover (docs/failover.md).
  SVC_CIRCUIT_OPEN_SECONDS: z.coerce.number().min(0.1).max(3600).default(30),
  SVC_CIRCUIT_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
  SVC_LLM_FIRST_TOKEN_SECONDS: z.coerce.number().min(0.05).max(3600).default(10),
  SVC_LLM_STALL_SECONDS: z.coerce.number().min(0.05).max(3600).default(10),
  // TTS failover (docs/failover.md): an engine with no audio this long after the request, or
  // silent this long between chunks, is failing; the text moves to the model's next upstream.
  SVC_TTS_FIRST_AUDIO_SECONDS: z.coerce.number().min(0.05).max(300).default(5),
  SVC_TTS_STALL_SECONDS: z.coerce.number().min(0.05).max(300).default(3),
  // Voice jobs (clone, localize, profiles): each gateway runs a worker unless SVC_WORKER=off
  // (then run `svc worker` processes). A job whose worker died is re-run after its lease.
  SVC_WORKER: z.enum(['on', 'off']).default('on'),
  SVC_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  SVC_JOB_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(500),
  SVC_JOB_LEASE_SECONDS: z.coerce.number().min(0.1).max(3600).default(30),
  SVC_JOB_OFFLINE_GIVE_UP_SECONDS: z.coerce
    .number()
    .min(0)
    .max(7 * 86400)
    .default(1800),
  // Voice jobs an org may have queued or running at once (counted in the database); past it 429.
  SVC_MAX_JOBS_PER_ORG: z.coerce.number().int().min(1).max(10_000).default(5),
  // Voice previews (docs/voices.md, "Previews"): made by the process that runs the job worker,
  // this many at once, looking for changed voices and due previews every so many seconds.
  SVC_VOICE_PREVIEWS: z.enum(['on', 'off']).default('on'),
  SVC_PREVIEW_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(1),
  SVC_PREVIEW_POLL_SECONDS: z.coerce.number().min(0.05).max(3600).default(10),
  // An org's own voices (past it 403 voice_quota_exceeded), and its voices cloned through engines
  // that bill (outside this process) in any 24 hours, trial orgs apart (past it 429 clone_quota_exceeded).
  SVC_MAX_VOICES_PER_ORG: z.coerce.number().int().min(0).max(1_000_000).default(100),
  SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY: z.coerce.number().int().min(0).max(1_000_000).default(20),
  SVC_TRIAL_MAX_ENGINE_CLONES_PER_ORG_PER_DAY: z.coerce.number().int().min(0).max(1_000_000).default(0),
  // Prometheus metrics: a separate listener (loopback by default) and/or GET /metrics on the
  // public port behind a bearer token. Neither set: no metrics endpoint.
  SVC_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  SVC_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  SVC_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  // Connections and slow clients (docs/configuration.md, "Connections and slow clients"): the
  // request line and headers must arrive within the first; a body within the second or, after it,
  // at an average of the third since its headers; a body is never silent longer than the fourth.
  SVC_HEADERS_TIMEOUT_SECONDS: z.coerce.number().min(0.05).max(3600).default(10),
  SVC_BODY_TIMEOUT_SECONDS: z.coerce.number().min(0.05).max(3600).default(30),
  SVC_BODY_MIN_BYTES_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000_000).default(16_384),
  SVC_BODY_IDLE_SECONDS: z.coerce.number().min(0.05).max(3600).default(10),
  // Open connections (WebSocket sessions included), per process and per client address; past either a new one is closed at once.
  SVC_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  SVC_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000).default(512),
  // How long SIGTERM/SIGINT let in-flight requests and streams run before ending them.
  SVC_SHUTDOWN_GRACE_SECONDS: z.coerce.number().min(0).max(3600).default(25),
  // Admission control (docs/api-conventions.md, "Limits"): what may run at once, per process.
  SVC_MAX_REQUESTS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(256),
  SVC_TRIAL_MAX_REQUESTS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(4),
  SVC_MAX_STREAMS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(32),
  SVC_TRIAL_MAX_STREAMS_PER_KEY: z.coerce.number().int().min(1).max(1_000_000).default(2),
  SVC_MAX_STREAMS_PER_ORG: z.coerce.number().int().min(1).max(1_000_000).default(100),
  SVC_MAX_STREAMS: z.coerce.number().int().min(1).max(1_000_000).default(2000),
  // Engine state with a real cost, pooled: local recognizer decoders and TTS engine processes.
  SVC_STT_MAX_DECODERS: z.coerce.number().int().min(1).max(10_000).default(16),
  // Decoders one org may hold at once (unset: the whole pool; trial orgs always one).
  SVC_STT_MAX_DECODERS_PER_ORG: z.coerce.number().int().min(1).max(10_000).optional(),
  SVC_TTS_MAX_ENGINES: z.coerce.number().int().min(1).max(10_000).default(8),
  // The in-process llama.cpp engine (protocol llama-cpp): parallel requests per model, threads
  // (default: cores - 1, since llama.cpp threads contend badly with other load), context tokens.
  SVC_LLAMA_SEQUENCES: z.coerce.number().int().min(1).max(256).default(4),
  SVC_LLAMA_THREADS: z.coerce.number().int().min(1).max(1024).optional(),
  SVC_LLAMA_CONTEXT_SIZE: z.coerce.number().int().min(256).max(1_048_576).default(4096),
  // Requests that may wait for a sequence of a model; past that 503 temporarily_unavailable.
  SVC_LLAMA_MAX_WAITING: z.coerce.number().int().min(0).max(100_000).default(32),
  // The local speech recognizer (protocol pocketsphinx): worker threads (default: cores - 1),
  // fresh decoders each thread keeps loaded ahead (each holds the model's memory), the model directory, where
  // pocketsphinx logs, extra "-name value" decoder arguments, the keyterm log-probability bonus.
  SVC_STT_WORKERS: z.coerce.number().int().min(1).max(1024).optional(),
  SVC_STT_SPARE_DECODERS: z.coerce.number().int().min(0).max(64).default(1),
  SVC_POCKETSPHINX_MODEL: z.string().min(1).default('/usr/share/pocketsphinx/model/en-us'),
  SVC_POCKETSPHINX_LOG: z.string().min(1).default('/dev/null'),
  SVC_POCKETSPHINX_ARGS: z
    .string()
    .max(4096)
    .refine((s) => {
      const words = s.trim().split(/\s+/).filter(Boolean);
      return words.length % 2 === 0 && words.every((w, i) => i % 2 === 1 || (w.length > 1 && w.startsWith('-')));
    }, 'must be pairs of "-name value", e.g. "-maxhmmpf 5000 -beam 1e-50"')
    .default(''),
  SVC_POCKETSPHINX_KEYTERM_BONUS: z.coerce.number().int().min(0).max(1_000_000).default(20000),
  // Streaming STT: closed without audio or keepalive this long; without audio this long even with keepalives.
  SVC_STT_IDLE_SECONDS: z.coerce.number().min(0.1).max(3600).default(15),
  SVC_STT_MAX_SILENCE_SECONDS: z.coerce.number().min(0.1).max(86400).default(60),
  SVC_STT_STALL_SECONDS: z.coerce.number().min(0.1).max(600).default(5),
  // Streaming STT: a finalize unanswered this long at least (0: never) starts the next upstream beside the engine.
  SVC_STT_FINALIZE_HEDGE_MS: z.coerce.number().int().min(0).max(60_000).default(200),
  // /v1/realtime: the profiles `?model=` may name (docs/realtime.md); a missing file: none but the LLMs.
  SVC_REALTIME_PROFILES_FILE: z.string().min(1).optional(),
  // /v1/realtime: closed when nothing comes from the client and nothing is being answered this long.
  SVC_REALTIME_IDLE_SECONDS: z.coerce.number().min(0.1).max(3600).default(300),
  SVC_REALTIME_PREEMPTIVE_MAX_DISCARDED_MICROS: z.coerce.number().int().min(0).max(1_000_000_000).default(10_000),
  // WebRTC calls (POST /v1/realtime/calls; docs/realtime.md "WebRTC"): calls a process takes; how
  // long a call may take to connect (ICE and DTLS) before its place is given back; the address
  // announced in the answer's candidates instead of the host's own (a gateway behind a 1:1 NAT);
  // the UDP ports its sockets bind to ("40000-40999").
  SVC_WEBRTC_MAX_CALLS: z.coerce.number().int().min(0).max(100_000).default(100),
  SVC_WEBRTC_CONNECT_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(15),
  SVC_WEBRTC_ANNOUNCED_ADDRESS: z.union([z.ipv4(), z.ipv6()]).optional(),
  SVC_WEBRTC_PORT_RANGE: z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'must be "min-max", e.g. 40000-40999')
    .refine((s) => {
      const [min, max] = s.split('-').map(Number) as [number, number];
      return min >= 1024 && max <= 65535 && min < max;
    }, 'must be two ports from 1024 to 65535, the first below the second')
    .optional(),
  // What an LLM request reserves for its output when it sets no max_tokens (docs/api-conventions.md, "Credits").
  SVC_LLM_RESERVE_MAX_TOKENS: z.coerce.number().int().min(1).max(10_000_000).default(4096),
  // A process's credit reservations outlive it (a crash) by at most this long.
  SVC_CREDIT_HOLD_TTL_SECONDS: z.coerce.number().min(1).max(3600).default(60),
  // Agent self-registration (docs/agent-registration.md).
  SVC_AGENT_AUTH: onOff.default('on'),
  SVC_AGENT_ANONYMOUS: onOff.default('on'),
  SVC_TRIAL_CREDITS_USD: z
    .string()
    .regex(/^\d{1,6}(\.\d{1,6})?$/, 'must be a non-negative USD amount with at most 6 decimals')
    .default('0.10'),
  SVC_TRIAL_MAX_PER_HOUR: z.coerce.number().int().min(0).max(1_000_000).default(100),
  // Anonymous registrations per client address per rolling hour (counted in the database).
  SVC_TRIAL_MAX_PER_ADDRESS_PER_HOUR: z.coerce.number().int().min(1).max(1_000_000).default(3),
  SVC_AGENT_AUTH_IP_RPM: z.coerce.number().int().min(1).max(1_000_000).default(60),
  // How many reverse proxies in front of the gateway and the dashboard append the client's
  // address to X-Forwarded-For; 0 (none): the header is the client's own words and is ignored.
  SVC_TRUSTED_PROXIES: z.coerce.number().int().min(0).max(10).default(0),
  // Outgoing mail (email verification links); unset: the dashboard sends none. The URL may hold credentials.
  SVC_SMTP_URL: z.preprocess(
    emptyIsUnset,
    z
      .string()
      .regex(/^smtps?:\/\/[^/\s]/, 'must be an smtp:// or smtps:// URL, e.g. smtps://user:password@mail.example.com:465')
      .optional(),
  ),
  SVC_MAIL_FROM: z.preprocess(emptyIsUnset, z.string().trim().min(3).max(320).optional()),
  // Request logs (docs/logs.md): a row per keyed request and session, written in batches; kept
  // this many days (an org may choose fewer) and at most this many rows.
  SVC_REQUEST_LOG: onOff.default('on'),
  SVC_LOG_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  SVC_LOG_MAX_ROWS: z.coerce.number().int().min(1000).max(1_000_000_000).default(5_000_000),
  // A batch is written every SVC_LOG_FLUSH_MS, or as soon as SVC_LOG_BATCH_ROWS rows wait; past
  // SVC_LOG_BUFFER_ROWS waiting rows (the database is slow or away) new rows are dropped and counted.
  SVC_LOG_FLUSH_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  SVC_LOG_BATCH_ROWS: z.coerce.number().int().min(1).max(10_000).default(500),
  SVC_LOG_BUFFER_ROWS: z.coerce.number().int().min(1).max(1_000_000).default(20_000),
  // OpenTelemetry traces (docs/operations.md, "Tracing"): the standard variables; no endpoint, no tracing.
  // Empty means unset, as the OpenTelemetry specification says.
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess(emptyIsUnset, url.optional()),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.preprocess(emptyIsUnset, url.optional()),
  OTEL_SDK_DISABLED: z.string().optional(),
  OTEL_SERVICE_NAME: z.preprocess(emptyIsUnset, z.string().default('svc-gateway')),
  OTEL_TRACES_SAMPLER: z.preprocess(
    emptyIsUnset,
    z
      .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])
      .default('parentbased_always_on'),
  ),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(emptyIsUnset, z.coerce.number().min(0).max(1).optional()),
});

export type Env = z.infer<typeof EnvSchema>;

export interface Config {
  dataDir: string;
  databaseUrl: string;
  redisUrl: string | undefined;
  gatewayHost: string;
  gatewayPort: number;
  /** SVC_TLS_CERT and SVC_TLS_KEY; undefined: the gateway speaks plain HTTP. */
  tls: TlsConfig | undefined;
  dashboardPort: number;
  publicBaseUrl: string;
  authUrl: string;
  dashboardUrl: string;
  logLevel: Env['LOG_LEVEL'];
  defaultRpm: number;
  registryRefreshMs: number;
  healthCheckMs: number;
  upstreamTimeoutMs: number;
  /** SVC_CIRCUIT_*: how long an upstream's open circuit keeps it out, and the failures in a row that open it. */
  circuit: { openMs: number; failures: number };
  /** SVC_LLM_*: an LLM stream moves to the next upstream when no token came this long (docs/failover.md). */
  llmFailover: { firstTokenMs: number; stallMs: number };
  /** TTS failover: an engine's dead air before the first audio, and between chunks, that counts as a failure. */
  ttsFailover: { firstAudioMs: number; stallMs: number };
  /** SVC_REALTIME_PROFILES_FILE; undefined: the shipped config/realtime-profiles.json. */
  realtimeProfilesFile: string | undefined;
  /** SVC_WEBRTC_*: WebRTC calls of /v1/realtime/calls. */
  webrtc: WebRtcConfig;
  jobs: { worker: boolean; concurrency: number; pollMs: number; leaseMs: number; offlineGiveUpMs: number; maxPerOrg: number };
  /** SVC_VOICE_PREVIEWS, SVC_PREVIEW_*: the preview worker (gateway/voices/preview-worker.ts), where the job worker runs. */
  previews: { enabled: boolean; concurrency: number; pollMs: number };
  /** Caps on an org's voices and on its clones through engines that bill (server/services/voices/voice-quotas.ts). */
  voiceLimits: { maxVoicesPerOrg: number; maxEngineClonesPerDay: number; trialMaxEngineClonesPerDay: number };
  /** Separate metrics listener; undefined: none. */
  metricsPort: number | undefined;
  metricsHost: string;
  /** Bearer token for GET /metrics on the public port; undefined: not served there. */
  metricsToken: string | undefined;
  shutdownGraceMs: number;
  /** Settings of the engines the process runs itself (the shape of gateway/upstreams/contract.ts EngineConfig). */
  engines: {
    dataDir: string;
    llama: { sequences: number; threads: number; contextSize: number; maxWaiting: number };
    pocketsphinx: { workers: number; spareDecoders: number; modelDir: string; logFile: string; extraArgs: string; keytermBonus: number };
  };
  /** Admission caps and engine pools (gateway/core/admission.ts). */
  limits: LimitsConfig;
  /** What one client may hold of the HTTP server: connections and time (gateway/client-bounds.ts). */
  http: HttpBoundsConfig;
  /** SVC_TRUSTED_PROXIES: how far X-Forwarded-For is believed (server/config/client-address.ts). */
  trustedProxies: number;
  /** SVC_SMTP_URL and SVC_MAIL_FROM; undefined: no mail is sent. */
  mail: MailConfig | undefined;
  agentAuth: AgentAuthConfig;
  /** OpenTelemetry traces; undefined: off (no OTLP endpoint set, or OTEL_SDK_DISABLED=true). */
  tracing: TracingConfig | undefined;
  /** Request logs (docs/logs.md); undefined: off (SVC_REQUEST_LOG=off). */
  requestLog: RequestLogConfig | undefined;
}

export interface WebRtcConfig {
  maxCalls: number;
  connectTimeoutMs: number;
  announcedAddress: string | undefined;
  portRange: [number, number] | undefined;
}

export interface RequestLogConfig {
  retentionDays: number;
  maxRows: number;
  flushMs: number;
  batchRows: number;
  bufferRows: number;
}

export type TraceSampler = NonNullable<Env['OTEL_TRACES_SAMPLER']>;

export interface LimitsConfig {
  /** Metered HTTP requests in flight per key (streams of bytes and events included). */
  requestsPerKey: number;
  trialRequestsPerKey: number;
  /** Open streaming sessions (WebSockets) per key, per org, per process. */
  streamsPerKey: number;
  trialStreamsPerKey: number;
  streamsPerOrg: number;
  streamsPerProcess: number;
  sttDecoders: number;
  sttDecodersPerOrg: number;
  ttsEngines: number;
  sttIdleMs: number;
  sttMaxSilenceMs: number;
  /** A streaming engine silent this long while audio flows (or a finalize unanswered): the session moves to the next upstream. */
  sttStallMs: number;
  /** A finalize unanswered this long at least (a multiple of the engine's slowest answer, when longer) starts the next upstream beside the engine; 0: never. */
  sttFinalizeHedgeMs: number;
  realtimeIdleMs: number;
  /** Spend (micro-USD) on discarded preemptive answers after which a session prepares none. */
  realtimePreemptiveMaxDiscardedMicros: number;
  llmReserveMaxTokens: number;
  creditHoldTtlMs: number;
}

export interface HttpBoundsConfig {
  /** The request line and headers must arrive within this, from the connection or the request's first byte. */
  headersTimeoutMs: number;
  /** A body must arrive within this of its headers, or past it at an average of bodyMinBytesPerSecond since then. */
  bodyTimeoutMs: number;
  bodyMinBytesPerSecond: number;
  /** The longest a body being read may stay without a byte. */
  bodyIdleMs: number;
  maxConnections: number;
  /** Per client address (an IPv6 /64); not applied behind trusted proxies, where the peer is the proxy. */
  maxConnectionsPerAddress: number;
}

export interface TracingConfig {
  /** Where spans are POSTed (OTLP/HTTP, JSON). */
  tracesUrl: string;
  serviceName: string;
  sampler: TraceSampler;
  /** The ratio of the traceidratio samplers (1 when not given). */
  samplerRatio: number;
}

export interface TlsConfig {
  /** PEM certificate (chain) file. */
  certPath: string;
  /** PEM private key file. */
  keyPath: string;
}

export interface MailConfig {
  smtpUrl: string;
  from: string;
}

export interface AgentAuthConfig {
  /** SVC_AGENT_AUTH: off answers 503 agent_auth_unavailable on every registration route. */
  enabled: boolean;
  /** SVC_AGENT_ANONYMOUS: off removes `anonymous` from discovery and refuses it. */
  anonymousEnabled: boolean;
  /** Credit each anonymous trial org starts with. */
  trialCreditsMicros: bigint;
  /** At most this many trial orgs are created per rolling hour, instance-wide (0: none). */
  trialMaxPerHour: number;
  /** At most this many anonymous registrations per client address per rolling hour. */
  trialMaxPerAddressPerHour: number;
  /** Requests per IP per minute on all registration, discovery and token routes. */
  ipRpm: number;
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
  const tls = tlsConfig(env);
  const publicBaseUrl = stripSlash(env.PUBLIC_BASE_URL ?? `${tls ? 'https' : 'http'}://localhost:${env.GATEWAY_PORT}`);
  return {
    dataDir,
    databaseUrl: env.DATABASE_URL ?? `file:${join(dataDir, 'svc.db')}`,
    redisUrl: env.REDIS_URL,
    gatewayHost: env.GATEWAY_HOST,
    gatewayPort: env.GATEWAY_PORT,
    tls,
    dashboardPort: env.DASHBOARD_PORT,
    publicBaseUrl,
    authUrl: stripSlash(env.AUTH_URL ?? publicBaseUrl),
    dashboardUrl: stripSlash(env.DASHBOARD_URL ?? `http://localhost:${env.DASHBOARD_PORT}`),
    logLevel: env.LOG_LEVEL,
    defaultRpm: env.SVC_DEFAULT_RPM,
    registryRefreshMs: env.SVC_REGISTRY_REFRESH_SECONDS * 1000,
    healthCheckMs: env.SVC_HEALTH_CHECK_SECONDS * 1000,
    upstreamTimeoutMs: env.SVC_UPSTREAM_TIMEOUT_SECONDS * 1000,
    circuit: { openMs: env.SVC_CIRCUIT_OPEN_SECONDS * 1000, failures: env.SVC_CIRCUIT_FAILURES },
    llmFailover: { firstTokenMs: env.SVC_LLM_FIRST_TOKEN_SECONDS * 1000, stallMs: env.SVC_LLM_STALL_SECONDS * 1000 },
    ttsFailover: { firstAudioMs: env.SVC_TTS_FIRST_AUDIO_SECONDS * 1000, stallMs: env.SVC_TTS_STALL_SECONDS * 1000 },
    realtimeProfilesFile: env.SVC_REALTIME_PROFILES_FILE,
    webrtc: {
      maxCalls: env.SVC_WEBRTC_MAX_CALLS,
      connectTimeoutMs: env.SVC_WEBRTC_CONNECT_TIMEOUT_SECONDS * 1000,
      announcedAddress: env.SVC_WEBRTC_ANNOUNCED_ADDRESS,
      portRange: env.SVC_WEBRTC_PORT_RANGE ? (env.SVC_WEBRTC_PORT_RANGE.split('-').map(Number) as [number, number]) : undefined,
    },
    jobs: {
      worker: env.SVC_WORKER === 'on',
      concurrency: env.SVC_WORKER_CONCURRENCY,
      pollMs: env.SVC_JOB_POLL_MS,
      leaseMs: env.SVC_JOB_LEASE_SECONDS * 1000,
      offlineGiveUpMs: env.SVC_JOB_OFFLINE_GIVE_UP_SECONDS * 1000,
      maxPerOrg: env.SVC_MAX_JOBS_PER_ORG,
    },
    previews: { enabled: env.SVC_VOICE_PREVIEWS === 'on', concurrency: env.SVC_PREVIEW_CONCURRENCY, pollMs: env.SVC_PREVIEW_POLL_SECONDS * 1000 },
    voiceLimits: {
      maxVoicesPerOrg: env.SVC_MAX_VOICES_PER_ORG,
      maxEngineClonesPerDay: env.SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY,
      trialMaxEngineClonesPerDay: env.SVC_TRIAL_MAX_ENGINE_CLONES_PER_ORG_PER_DAY,
    },
    metricsPort: env.SVC_METRICS_PORT,
    metricsHost: env.SVC_METRICS_HOST,
    metricsToken: env.SVC_METRICS_TOKEN,
    shutdownGraceMs: env.SVC_SHUTDOWN_GRACE_SECONDS * 1000,
    engines: {
      dataDir,
      llama: {
        sequences: env.SVC_LLAMA_SEQUENCES,
        threads: env.SVC_LLAMA_THREADS ?? Math.max(1, availableParallelism() - 1),
        contextSize: env.SVC_LLAMA_CONTEXT_SIZE,
        maxWaiting: env.SVC_LLAMA_MAX_WAITING,
      },
      pocketsphinx: {
        workers: env.SVC_STT_WORKERS ?? Math.max(1, availableParallelism() - 1),
        spareDecoders: env.SVC_STT_SPARE_DECODERS,
        modelDir: env.SVC_POCKETSPHINX_MODEL,
        logFile: env.SVC_POCKETSPHINX_LOG,
        extraArgs: env.SVC_POCKETSPHINX_ARGS,
        keytermBonus: env.SVC_POCKETSPHINX_KEYTERM_BONUS,
      },
    },
    limits: {
      requestsPerKey: env.SVC_MAX_REQUESTS_PER_KEY,
      trialRequestsPerKey: env.SVC_TRIAL_MAX_REQUESTS_PER_KEY,
      streamsPerKey: env.SVC_MAX_STREAMS_PER_KEY,
      trialStreamsPerKey: env.SVC_TRIAL_MAX_STREAMS_PER_KEY,
      streamsPerOrg: env.SVC_MAX_STREAMS_PER_ORG,
      streamsPerProcess: env.SVC_MAX_STREAMS,
      sttDecoders: env.SVC_STT_MAX_DECODERS,
      sttDecodersPerOrg: env.SVC_STT_MAX_DECODERS_PER_ORG ?? env.SVC_STT_MAX_DECODERS,
      ttsEngines: env.SVC_TTS_MAX_ENGINES,
      sttIdleMs: env.SVC_STT_IDLE_SECONDS * 1000,
      sttMaxSilenceMs: env.SVC_STT_MAX_SILENCE_SECONDS * 1000,
      sttStallMs: env.SVC_STT_STALL_SECONDS * 1000,
      sttFinalizeHedgeMs: env.SVC_STT_FINALIZE_HEDGE_MS,
      realtimeIdleMs: env.SVC_REALTIME_IDLE_SECONDS * 1000,
      realtimePreemptiveMaxDiscardedMicros: env.SVC_REALTIME_PREEMPTIVE_MAX_DISCARDED_MICROS,
      llmReserveMaxTokens: env.SVC_LLM_RESERVE_MAX_TOKENS,
      creditHoldTtlMs: env.SVC_CREDIT_HOLD_TTL_SECONDS * 1000,
    },
    http: {
      headersTimeoutMs: env.SVC_HEADERS_TIMEOUT_SECONDS * 1000,
      bodyTimeoutMs: env.SVC_BODY_TIMEOUT_SECONDS * 1000,
      bodyMinBytesPerSecond: env.SVC_BODY_MIN_BYTES_PER_SECOND,
      bodyIdleMs: env.SVC_BODY_IDLE_SECONDS * 1000,
      maxConnections: env.SVC_MAX_CONNECTIONS,
      maxConnectionsPerAddress: env.SVC_MAX_CONNECTIONS_PER_ADDRESS,
    },
    trustedProxies: env.SVC_TRUSTED_PROXIES,
    mail: mailConfig(env),
    agentAuth: {
      enabled: env.SVC_AGENT_AUTH === 'on',
      anonymousEnabled: env.SVC_AGENT_ANONYMOUS === 'on',
      trialCreditsMicros: parseUsdToMicros(env.SVC_TRIAL_CREDITS_USD),
      trialMaxPerHour: env.SVC_TRIAL_MAX_PER_HOUR,
      trialMaxPerAddressPerHour: env.SVC_TRIAL_MAX_PER_ADDRESS_PER_HOUR,
      ipRpm: env.SVC_AGENT_AUTH_IP_RPM,
    },
    tracing: tracingConfig(env),
    requestLog:
      env.SVC_REQUEST_LOG === 'on'
        ? {
            retentionDays: env.SVC_LOG_RETENTION_DAYS,
            maxRows: env.SVC_LOG_MAX_ROWS,
            flushMs: env.SVC_LOG_FLUSH_MS,
            batchRows: env.SVC_LOG_BATCH_ROWS,
            bufferRows: env.SVC_LOG_BUFFER_ROWS,
          }
        : undefined,
  };
}

/**
 * The traces endpoint as the OTLP exporter specification derives it: the signal-specific
 * variable is used as it is, the general one gets `/v1/traces` appended.
 */
function tracingConfig(env: Env): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return undefined;
  const tracesUrl =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${stripSlash(env.OTEL_EXPORTER_OTLP_ENDPOINT)}/v1/traces` : undefined);
  if (!tracesUrl) return undefined;
  return { tracesUrl, serviceName: env.OTEL_SERVICE_NAME, sampler: env.OTEL_TRACES_SAMPLER, samplerRatio: env.OTEL_TRACES_SAMPLER_ARG ?? 1 };
}

/**
 * Both files or neither (one alone is a mistake, not a wish for plain HTTP), each readable now:
 * a path that cannot be read stops the process at start rather than at the first connection.
 * Paths are resolved from the working directory.
 */
function tlsConfig(env: Env): TlsConfig | undefined {
  if (!env.SVC_TLS_CERT && !env.SVC_TLS_KEY) return undefined;
  const missing = !env.SVC_TLS_CERT ? 'SVC_TLS_CERT' : !env.SVC_TLS_KEY ? 'SVC_TLS_KEY' : null;
  if (missing) {
    const given = missing === 'SVC_TLS_CERT' ? 'SVC_TLS_KEY' : 'SVC_TLS_CERT';
    throw new ConfigError(
      `invalid configuration:\n  ${missing}: required when ${given} is set (TLS needs both SVC_TLS_CERT and SVC_TLS_KEY, PEM file paths; set neither for plain HTTP)`,
    );
  }
  const tls = { certPath: resolve(env.SVC_TLS_CERT!), keyPath: resolve(env.SVC_TLS_KEY!) };
  for (const [name, path] of [
    ['SVC_TLS_CERT', tls.certPath],
    ['SVC_TLS_KEY', tls.keyPath],
  ] as const) {
    try {
      accessSync(path, fsConstants.R_OK);
    } catch (e) {
      throw new ConfigError(`invalid configuration:\n  ${name}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  return tls;
}

/**
 * The PEM contents of the TLS files, checked to be a certificate and the key that goes with it
 * (read once, when the gateway starts): a wrong file is a start-up error naming the variables,
 * not an OpenSSL code at the first handshake.
 */
export function readTlsFiles(tls: TlsConfig): { cert: Buffer; key: Buffer } {
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = readFileSync(tls.certPath);
    key = readFileSync(tls.keyPath);
  } catch (e) {
    throw new ConfigError(
      `invalid configuration:\n  SVC_TLS_CERT / SVC_TLS_KEY: cannot read ${(e as NodeJS.ErrnoException).path ?? 'a file'} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new ConfigError(
      `invalid configuration:\n  SVC_TLS_CERT / SVC_TLS_KEY: ${tls.certPath} and ${tls.keyPath} must be a PEM certificate and its PEM private key (${(e as Error).message})`,
    );
  }
  return { cert, key };
}

/** Mail needs both variables: a From address is not something to guess for an operator. */
function mailConfig(env: Env): MailConfig | undefined {
  if (!env.SVC_SMTP_URL && !env.SVC_MAIL_FROM) return undefined;
  if (!env.SVC_SMTP_URL) throw new ConfigError('invalid configuration:\n  SVC_SMTP_URL: required when SVC_MAIL_FROM is set');
  if (!env.SVC_MAIL_FROM)
    throw new ConfigError('invalid configuration:\n  SVC_MAIL_FROM: required when SVC_SMTP_URL is set, e.g. "svc <no-reply@example.com>"');
  return { smtpUrl: env.SVC_SMTP_URL, from: env.SVC_MAIL_FROM };
}

export function ensureDataDir(config: Config): void {
  mkdirSync(config.dataDir, { recursive: true });
}
