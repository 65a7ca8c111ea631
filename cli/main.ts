// `svc`: the operator interface. With --json every command prints exactly one JSON object
// on stdout and exits 0, or prints an error on stderr and exits non-zero.
import { Command, Option } from 'commander';
import { ConfigError, loadConfig, ensureDataDir } from '../server/config/env.ts';
import { openDatabase, type Database } from '../server/db/database.ts';
import { migrate } from '../server/db/migrate.ts';
import { formatPico, formatUsd, parseUsdToMicros, parseUsdToPico } from '../server/money.ts';
import { grantCredits } from '../server/services/credits/grant-credits.ts';
import { isServiceError } from '../server/services/errors.ts';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../server/services/keys/revoke-api-key.ts';
import { updateApiKeyLimits } from '../server/services/keys/update-api-key-limits.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { createPhoneToken } from '../server/services/phone/create-phone-token.ts';
import { listPhoneTokens } from '../server/services/phone/list-phone-tokens.ts';
import { revokePhoneToken } from '../server/services/phone/revoke-phone-token.ts';
import { listModels, upsertModel, removeUpstream } from '../server/services/models/upsert-model.ts';
import { perMTokToPico } from '../server/services/models/seed-registry.ts';
import { runProcesses } from './run-processes.ts';
import { checkProtocol, PROTOCOLS } from '../gateway/upstreams/protocols/index.ts';
import { importVoicesFromEngine } from '../gateway/voices/engine-catalogue.ts';
import { mapVoiceToEngine } from '../server/services/voices/engine-voices.ts';

class UsageError extends Error {}

const program = new Command('svc')
  .description('Voice-agent inference gateway: operator commands')
  .option('--json', 'print exactly one JSON object on stdout')
  .showHelpAfterError()
  .exitOverride();

const json = () => program.opts<{ json?: boolean }>().json === true;

function print(result: Record<string, unknown>, human: string): void {
  process.stdout.write(json() ? `${JSON.stringify(result)}\n` : `${human}\n`);
}

/** Opens the (migrated) database for one command and closes it afterwards. */
async function withDb<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  const config = loadConfig();
  ensureDataDir(config);
  await migrate(config.databaseUrl);
  const db = openDatabase(config.databaseUrl);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

function usd(value: string, flag: string): bigint {
  try {
    return parseUsdToMicros(value);
  } catch {
    throw new UsageError(`${flag} must be a USD amount with at most 6 decimals, e.g. 10 or 0.25 (got ${value})`);
  }
}

function price(value: string | undefined, flag: string, perMTok = false): bigint | undefined {
  if (value === undefined) return undefined;
  try {
    return perMTok ? perMTokToPico(value) : parseUsdToPico(value);
  } catch {
    throw new UsageError(`${flag} must be a non-negative USD amount (got ${value})`);
  }
}

function positiveInt(value: string, flag: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`${flag} must be a positive integer (got ${value})`);
  return Number(value);
}

program
  .command('migrate')
  .description('apply pending database migrations (idempotent)')
  .action(async () => {
    const config = loadConfig();
    ensureDataDir(config);
    const applied = await migrate(config.databaseUrl);
    print(
      { applied, database: config.databaseUrl.startsWith('file:') ? 'sqlite' : 'postgresql' },
      applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date',
    );
  });

program
  .command('start')
  .description('run the gateway and the dashboard in the foreground')
  .action(async () => runProcesses({ dashboard: true }));

program
  .command('gateway')
  .description('run the gateway only, in the foreground')
  .action(async () => runProcesses({ dashboard: false }));

program
  .command('worker')
  .description("run a job worker only (clone, localize, profile jobs, and voices' previews), in the foreground; pair with SVC_WORKER=off on gateways")
  .action(async () => runProcesses({ dashboard: false, workerOnly: true }));

const org = program.command('org').description('organizations');
org
  .command('create')
  .requiredOption('--name <name>', 'organization name')
  .option('--credits-usd <usd>', 'initial prepaid credit in USD')
  .action(async (o: { name: string; creditsUsd?: string }) => {
    const credits = o.creditsUsd === undefined ? 0n : usd(o.creditsUsd, '--credits-usd');
    const created = await withDb((db) => createOrg(db, { name: o.name, creditsMicros: credits }));
    print(
      { id: created.id, name: created.name, balance_usd: formatUsd(created.balanceMicros) },
      `created org ${created.id} (${created.name}), balance ${formatUsd(created.balanceMicros)} USD`,
    );
  });

program
  .command('credits')
  .description('credit balances')
  .command('grant')
  .requiredOption('--org <id>', 'organization id')
  .requiredOption('--usd <usd>', 'amount in USD; negative to remove credit')
  .action(async (o: { org: string; usd: string }) => {
    const amount = usd(o.usd, '--usd');
    const r = await withDb((db) => grantCredits(db, { orgId: o.org, amountMicros: amount, description: 'granted by operator (svc credits grant)' }));
    print({ org_id: r.orgId, balance_usd: formatUsd(r.balanceMicros) }, `org ${r.orgId} balance ${formatUsd(r.balanceMicros)} USD`);
  });

/** `--expires`: an ISO 8601 date or time (a date alone is midnight UTC), or a time from now: 30d, 12h, 45m. */
function expiry(value: string, now: number): Date {
  const relative = /^(\d{1,6})([dhm])$/.exec(value.trim());
  if (relative) return new Date(now + Number(relative[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[relative[2] as 'd' | 'h' | 'm']);
  const at = /^\d{4}-\d{2}-\d{2}/.test(value.trim()) ? Date.parse(value.trim()) : NaN;
  if (Number.isNaN(at))
    throw new UsageError(`--expires must be an ISO 8601 date or time (2027-01-31, 2027-01-31T18:00:00Z) or a time from now (30d, 12h, 45m); got ${value}`);
  return new Date(at);
}

const key = program.command('key').description('API keys');
key
  .command('create')
  .requiredOption('--org <id>', 'organization id')
  .option('--name <name>', 'a name to recognise the key by', '')
  .option('--rpm <n>', 'requests per minute for this key (default 600)')
  .option('--spend-limit-usd <usd>', "the most this key may spend per window (the org's balance is the limit otherwise)")
  .addOption(new Option('--spend-window <window>', 'the window the spend limit counts over, in UTC (default month)').choices(['day', 'month']))
  .option('--expires <when>', 'refuse the key from then on: an ISO 8601 date or time, or 30d, 12h, 45m from now')
  .option('--models <ids>', 'the only models the key may use, comma-separated (every model otherwise)')
  .action(async (o: { org: string; name: string; rpm?: string; spendLimitUsd?: string; spendWindow?: 'day' | 'month'; expires?: string; models?: string }) => {
    const rpm = o.rpm === undefined ? null : positiveInt(o.rpm, '--rpm');
    const spendLimitMicros = o.spendLimitUsd === undefined ? null : usd(o.spendLimitUsd, '--spend-limit-usd');
    if (o.spendWindow !== undefined && spendLimitMicros === null) throw new UsageError('--spend-window needs --spend-limit-usd');
    const now = new Date();
    const expiresAt = o.expires === undefined ? null : expiry(o.expires, now.getTime());
    const models = o.models === undefined ? null : o.models.split(',').map((m) => m.trim());
    const k = await withDb((db) =>
      createApiKey(db.prisma, { orgId: o.org, name: o.name, rateLimitRpm: rpm, spendLimitMicros, spendWindow: o.spendWindow, expiresAt, models, now }),
    );
    const limits = {
      spend_limit_usd: spendLimitMicros === null ? null : formatUsd(spendLimitMicros),
      spend_window: spendLimitMicros === null ? null : (o.spendWindow ?? 'month'),
      expires_at: expiresAt?.toISOString() ?? null,
      models: models && [...new Set(models)].filter((m) => m !== ''),
    };
    const human = [
      limits.spend_limit_usd && `spend limit ${limits.spend_limit_usd} USD per ${limits.spend_window} (UTC)`,
      limits.expires_at && `expires ${limits.expires_at}`,
      limits.models && `models ${limits.models.join(', ')}`,
    ].filter(Boolean);
    print(
      { id: k.id, key: k.key, prefix: k.prefix, ...limits },
      `created key ${k.id}${human.length ? ` (${human.join('; ')})` : ''}\n${k.key}\n(shown once: store it now)`,
    );
  });
key
  .command('update')
  .description("change an existing key's limits; a flag left out leaves that limit as it is")
  .requiredOption('--id <id>', 'key id')
  .option('--spend-limit-usd <usd>', "the most this key may spend per window, or `none` (the org's balance is the only limit)")
  .addOption(new Option('--spend-window <window>', 'the window the spend limit counts over, in UTC').choices(['day', 'month']))
  .option('--expires <when>', 'refuse the key from then on: an ISO 8601 date or time, 30d, 12h, 45m from now, or `never`')
  .option('--models <ids>', 'the only models the key may use, comma-separated, or `all`')
  .action(async (o: { id: string; spendLimitUsd?: string; spendWindow?: 'day' | 'month'; expires?: string; models?: string }) => {
    if ([o.spendLimitUsd, o.spendWindow, o.expires, o.models].every((v) => v === undefined)) {
      throw new UsageError('name at least one of --spend-limit-usd, --spend-window, --expires, --models');
    }
    const now = new Date();
    const k = await withDb((db) =>
      updateApiKeyLimits(db.prisma, {
        id: o.id,
        now,
        spendLimitMicros: o.spendLimitUsd === undefined ? undefined : o.spendLimitUsd === 'none' ? null : usd(o.spendLimitUsd, '--spend-limit-usd'),
        spendWindow: o.spendWindow,
        expiresAt: o.expires === undefined ? undefined : o.expires === 'never' ? null : expiry(o.expires, now.getTime()),
        models: o.models === undefined ? undefined : o.models === 'all' ? null : o.models.split(',').map((m) => m.trim()),
      }),
    );
    const limits = {
      spend_limit_usd: k.spendLimitMicros === null ? null : formatUsd(k.spendLimitMicros),
      spend_window: k.spendWindow,
      expires_at: k.expiresAt?.toISOString() ?? null,
      models: k.models,
    };
    const human = [
      limits.spend_limit_usd ? `spend limit ${limits.spend_limit_usd} USD per ${limits.spend_window} (UTC)` : 'no spend limit',
      limits.expires_at ? `expires ${limits.expires_at}` : 'never expires',
      limits.models ? `models ${limits.models.join(', ')}` : 'every model',
    ];
    print({ id: k.id, ...limits }, `updated key ${k.id}: ${human.join('; ')}`);
  });
key
  .command('revoke')
  .requiredOption('--id <id>', 'key id')
  .action(async (o: { id: string }) => {
    const r = await withDb((db) => revokeApiKey(db.prisma, { id: o.id }));
    print({ id: r.id, status: r.status }, `revoked key ${r.id}`);
  });

const phoneToken = program.command('phone').description('phone carriers (docs/phone.md)').command('token').description("phone numbers' tokens");
phoneToken
  .command('create')
  .description("a token for a carrier's stream URL: its calls are admitted and billed as the key, and talk to the profile")
  .requiredOption('--org <id>', 'organization id')
  .requiredOption('--key-id <id>', 'the API key (of the org) the calls are admitted and billed as')
  .requiredOption('--profile <id>', 'the realtime profile (or LLM) the calls talk to, as /v1/realtime?model= names one')
  .option('--name <name>', 'a name to recognise the token by (the phone number, say)', '')
  .action(async (o: { org: string; keyId: string; profile: string; name: string }) => {
    const t = await withDb((db) => createPhoneToken(db.prisma, { orgId: o.org, apiKeyId: o.keyId, profile: o.profile, name: o.name }));
    print(
      { id: t.id, token: t.token, prefix: t.prefix, org_id: t.orgId, key_id: t.apiKeyId, profile: t.profile, name: t.name },
      `created phone token ${t.id}\n${t.token}\n(shown once: store it now; the stream URL ends in it, docs/phone.md)`,
    );
  });
phoneToken
  .command('list')
  .requiredOption('--org <id>', 'organization id')
  .action(async (o: { org: string }) => {
    const tokens = await withDb((db) => listPhoneTokens(db.prisma, { orgId: o.org }));
    const rows = tokens.map((t) => ({
      id: t.id,
      name: t.name,
      prefix: t.prefix,
      profile: t.profile,
      key_id: t.apiKeyId,
      status: t.status,
      created_at: t.createdAt.toISOString(),
      last_used_at: t.lastUsedAt?.toISOString() ?? null,
      revoked_at: t.revokedAt?.toISOString() ?? null,
    }));
    print({ tokens: rows }, rows.map((t) => `${t.id}\t${t.prefix}…\t${t.status}\t${t.profile}\t${t.key_id}\t${t.name}`).join('\n') || 'no phone tokens');
  });
phoneToken
  .command('revoke')
  .requiredOption('--id <id>', 'phone token id')
  .action(async (o: { id: string }) => {
    const r = await withDb((db) => revokePhoneToken(db.prisma, { id: o.id }));
    print({ id: r.id, status: r.status }, `revoked phone token ${r.id} (its calls end within a second)`);
  });

/** `--setting key=value`, repeatable: values are JSON where they parse (numbers, booleans), else text. */
function collectSetting(pair: string, settings: Record<string, unknown> = {}): Record<string, unknown> {
  const at = pair.indexOf('=');
  if (at < 1) throw new UsageError(`--setting takes key=value (got ${JSON.stringify(pair)})`);
  const raw = pair.slice(at + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // plain text
  }
  return { ...settings, [pair.slice(0, at)]: value };
}

const model = program.command('model').description('model registry');
model
  .command('upsert')
  .requiredOption('--id <id>', 'model id clients send')
  .addOption(new Option('--modality <m>', 'llm, tts or stt').choices(['llm', 'tts', 'stt']).makeOptionMandatory())
  .option('--upstream <url>', 'engine URL (OpenAI-compatible servers: the base URL including /v1) or local:<engine>')
  .option(
    '--protocol <name>',
    `how to talk to the engine: ${PROTOCOLS.map((p) => p.name).join(', ')} (\`svc model protocols\` lists what each serves)`,
    'openai',
  )
  .option('--setting <key=value>', 'a protocol setting of this upstream (repeatable; values are JSON where they parse, else text)', collectSetting, undefined)
  .option('--upstream-model <name>', 'model name to send upstream (default: the id)')
  .option('--weight <n>', 'load-balancing weight of this upstream', '1')
  .option('--api-key-env <VAR>', 'environment variable holding the upstream API key')
  .option('--display-name <name>', 'display name')
  .option('--price-input-per-mtok <usd>', 'llm: USD per million input tokens')
  .option('--price-output-per-mtok <usd>', 'llm: USD per million output tokens')
  .option('--price-per-char <usd>', 'tts: USD per character')
  .option('--price-per-second <usd>', 'stt: USD per second of audio')
  .option('--sample-rates <list>', 'stt: comma-separated sample rates the model accepts')
  .option('--max-output-tokens <n>', 'llm: output reserved for a request without max_tokens (default SVC_LLM_RESERVE_MAX_TOKENS)')
  .addOption(
    new Option('--hedge <on|off>', 'race two upstreams for the first token, audio or transcript, keep the first (docs/failover.md)').choices(['on', 'off']),
  )
  .addOption(new Option('--status <s>', 'active or disabled').choices(['active', 'disabled']))
  .action(async (o: Record<string, string | undefined> & { setting?: Record<string, unknown> }) => {
    const weight = Number(o.weight);
    if (!Number.isInteger(weight) || weight < 0) throw new UsageError('--weight must be a non-negative integer');
    const sampleRates = o.sampleRates?.split(',').map((s) => positiveInt(s.trim(), '--sample-rates'));
    const m = await withDb((db) =>
      upsertModel(db.prisma, checkProtocol, {
        id: o.id!,
        modality: o.modality as 'llm' | 'tts' | 'stt',
        ...(o.displayName !== undefined && { displayName: o.displayName }),
        ...(o.status !== undefined && { status: o.status as 'active' | 'disabled' }),
        ...(sampleRates && { sampleRates }),
        ...(o.maxOutputTokens !== undefined && { maxOutputTokens: positiveInt(o.maxOutputTokens, '--max-output-tokens') }),
        ...(o.hedge !== undefined && { hedge: o.hedge === 'on' }),
        prices: {
          inputPicoPerToken: price(o.priceInputPerMtok, '--price-input-per-mtok', true),
          outputPicoPerToken: price(o.priceOutputPerMtok, '--price-output-per-mtok', true),
          picoPerChar: price(o.pricePerChar, '--price-per-char'),
          picoPerSecond: price(o.pricePerSecond, '--price-per-second'),
        },
        ...(o.upstream && {
          upstream: {
            url: o.upstream,
            protocol: o.protocol ?? 'openai',
            upstreamModel: o.upstreamModel ?? null,
            weight,
            apiKeyEnv: o.apiKeyEnv ?? null,
            ...(o.setting && { settings: o.setting }),
          },
        }),
      }),
    );
    print(modelJson(m), `model ${m.id} (${m.modality}) with ${m.upstreams.length} upstream(s)`);
  });
model
  .command('remove-upstream')
  .requiredOption('--id <id>', 'model id')
  .requiredOption('--upstream <url>', 'upstream URL to remove')
  .action(async (o: { id: string; upstream: string }) => {
    await withDb((db) => removeUpstream(db.prisma, { modelId: o.id, url: o.upstream }));
    print({ id: o.id, removed: o.upstream }, `removed ${o.upstream} from ${o.id}`);
  });
model
  .command('protocols')
  .description('the upstream protocols and what each serves')
  .action(() => {
    const rows = PROTOCOLS.map((p) => ({
      name: p.name,
      capabilities: [...p.capabilities],
      settings: Object.keys((p.settings as unknown as { shape?: object }).shape ?? {}),
      summary: p.summary,
    }));
    print({ protocols: rows }, rows.map((r) => `${r.name}\t${r.capabilities.join(',')}\t${r.summary}`).join('\n'));
  });
model.command('list').action(async () => {
  const models = await withDb((db) => listModels(db.prisma));
  print(
    { models: models.map(modelJson) },
    models.map((m) => `${m.id}\t${m.modality}\t${m.status}\t${m.upstreams.map((u) => `${u.url}(${u.health})`).join(' ')}`).join('\n') || 'no models',
  );
});

const voices = program.command('voices').description('voices of engines');
voices
  .command('import')
  .description("imports a TTS model's engine voice catalogue as platform voices with ready profiles for the model")
  .requiredOption('--model <id>', 'the TTS model whose engine lists its voices (protocols cartesia, elevenlabs, deepgram)')
  .option('--dry-run', 'list what would be imported, change nothing')
  .action(async (o: { model: string; dryRun?: boolean }) => {
    const config = loadConfig();
    const result = await withDb((db) => importVoicesFromEngine(db.prisma, config.engines, o.model, { dryRun: o.dryRun }));
    print(
      result,
      o.dryRun
        ? `${result.listed} voices listed by the engine of ${o.model} (dry run)`
        : `${result.listed} voices listed: ${result.created} imported, ${result.updated} updated`,
    );
  });
voices
  .command('map')
  .description("makes a voice speak through a TTS model as one of its engine's voices")
  .requiredOption('--voice <id>', 'voice id (a platform or org voice)')
  .requiredOption('--model <id>', 'TTS model id')
  .requiredOption('--upstream-id <engine voice id>', "the engine's own voice id")
  .option('--upstream <url>', "only on this upstream of the model (its URL): the voice's id there, for failover between engines")
  .action(async (o: { voice: string; model: string; upstreamId: string; upstream?: string }) => {
    await withDb((db) => mapVoiceToEngine(db.prisma, { voiceId: o.voice, modelId: o.model, upstreamId: o.upstreamId, upstreamUrl: o.upstream }));
    const where = o.upstream ? ` on ${o.upstream}` : '';
    print(
      { voice_id: o.voice, model: o.model, upstream_id: o.upstreamId, upstream: o.upstream ?? null },
      `${o.voice} speaks through ${o.model}${where} as ${o.upstreamId}`,
    );
  });

function modelJson(m: Awaited<ReturnType<typeof listModels>>[number]) {
  return {
    id: m.id,
    modality: m.modality,
    status: m.status,
    display_name: m.displayName,
    prices: {
      input_per_mtok_usd: formatPico(m.priceInputPicoPerToken * 1_000_000n),
      output_per_mtok_usd: formatPico(m.priceOutputPicoPerToken * 1_000_000n),
      per_char_usd: formatPico(m.pricePicoPerChar),
      per_second_usd: formatPico(m.pricePicoPerSecond),
    },
    sample_rates: m.sampleRates ?? null,
    upstreams: m.upstreams.map((u) => ({
      id: u.id,
      url: u.url,
      protocol: u.protocol,
      upstream_model: u.upstreamModel,
      weight: u.weight,
      api_key_env: u.apiKeyEnv,
      settings: u.settings ?? null,
      health: u.health,
      last_checked_at: u.lastCheckedAt?.toISOString() ?? null,
      latency_ms: u.latencyMs,
      last_error: u.lastError,
    })),
  };
}

try {
  await program.parseAsync(process.argv);
} catch (e) {
  const err = e as Error & { code?: string; exitCode?: number };
  if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') process.exit(0);
  if (err.code?.startsWith('commander.')) process.exit(err.exitCode ?? 2);
  const message = e instanceof ConfigError || e instanceof UsageError || isServiceError(e) ? err.message : `unexpected error: ${err.stack ?? err.message}`;
  const retry = isServiceError(e) && e.retryAfterSeconds !== undefined ? ` (retry in ${Math.ceil(e.retryAfterSeconds)} s)` : '';
  process.stderr.write(`svc: ${message}${retry}\n`);
  process.exit(1);
}
