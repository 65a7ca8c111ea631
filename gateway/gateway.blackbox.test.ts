// Black-box tests of the real gateway process (`svc gateway`) over real HTTP, set up with the
// real `svc` CLI in separate processes, against a scripted OpenAI-compatible upstream and the
// test database (SQLite file by default, PostgreSQL with TEST_DB=postgresql). The Redis part
// runs two more gateway processes on the same database sharing one rate-limit window.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../test/support/test-database.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import { usageRows } from '../test/support/usage-rows.ts';
import { countedInOneMinute } from '../test/support/rate-window.ts';
import { freePort } from '../test/support/svc-process.ts';
import { until } from '../test/support/poll.ts';
import { openApiResponseChecker, type OpenApiResponseChecker } from '../test/support/openapi-responses.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SVC = join(ROOT, 'bin/svc.mjs');
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const CLI_TIMEOUT_MS = 60_000;
const START_TIMEOUT_MS = 45_000;

// Each test runs several CLI processes (about 1.5 s each, more on a loaded machine).
vi.setConfig({ testTimeout: 120_000 });

// ---------------------------------------------------------------------------------------
// Processes

interface GatewayProcess {
  name: string;
  base: string;
  child: ChildProcess;
  output: () => string;
  /**
   * Resolves with what `find` returns once it finds something in the output, looked for as
   * each piece arrives: the gateway writes its log in batches (at most 100 ms apart).
   */
  outputWhere<T>(find: (output: string) => T | undefined): Promise<T>;
  /** Resolves once the process has exited and every line it wrote has been read (the rest of a batch is written at exit). */
  outputClosed: Promise<void>;
}

const children = new Set<ChildProcess>();
const gateways: GatewayProcess[] = [];
// Last resort if the worker goes away without running afterAll.
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

let t: TestDatabase;
/** A minimal environment for the processes (cast: the dashboard's types require NODE_ENV in ProcessEnv). */
const processEnv = (vars: Record<string, string>) => vars as unknown as NodeJS.ProcessEnv;
const baseEnv = () => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '/tmp',
  SVC_DATA_DIR: t.dataDir,
  DATABASE_URL: t.url,
  // No seeded models: the registry holds only what these tests put there.
  SVC_MODELS_FILE: join(t.dataDir, 'no-models.json'),
});

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `svc --json <args>` as its own process. */
function cli(...args: string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC, '--json', ...args], { cwd: ROOT, env: processEnv(baseEnv()), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} did not finish within ${CLI_TIMEOUT_MS} ms\n${stderr}`));
    }, CLI_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `svc --json ...` that must succeed: exit 0 and exactly one JSON object on stdout. */
async function cliOk(...args: string[]): Promise<Record<string, any>> {
  const r = await cli(...args);
  expect(r.code, `svc ${args.join(' ')} failed:\n${r.stderr}`).toBe(0);
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines, `stdout of svc ${args.join(' ')}`).toHaveLength(1);
  const parsed = JSON.parse(lines[0]!) as unknown;
  expect(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)).toBe(true);
  return parsed as Record<string, any>;
}

async function startGateway(name: string, extraEnv: Record<string, string> = {}): Promise<GatewayProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [SVC, 'gateway'], {
    cwd: ROOT,
    env: processEnv({
      ...baseEnv(),
      GATEWAY_PORT: String(port),
      GATEWAY_HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SVC_REGISTRY_REFRESH_SECONDS: '0.2',
      SVC_HEALTH_CHECK_SECONDS: '0.2',
      ...extraEnv,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  const lookers = new Set<() => void>();
  const append = (d: Buffer) => {
    output += d.toString();
    for (const look of lookers) look();
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  let exited: number | null | undefined;
  child.on('exit', (code) => {
    exited = code;
    children.delete(child);
  });
  const outputClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const outputWhere = <T>(find: (out: string) => T | undefined) =>
    new Promise<T>((resolve, reject) => {
      const look = () => {
        const found = find(output);
        if (found === undefined) return;
        lookers.delete(look);
        resolve(found);
      };
      lookers.add(look);
      look();
      void outputClosed.then(() => reject(new Error(`gateway ${name} exited without writing what was looked for:\n${output}`)));
    });
  const gw: GatewayProcess = { name, base: `http://127.0.0.1:${port}`, child, output: () => output, outputWhere, outputClosed };
  gateways.push(gw);
  await until(
    `gateway ${name} to answer /health`,
    async () => {
      if (exited !== undefined) {
        await outputClosed; // the reason it gave may still be in the pipe
        throw new Error(`gateway ${name} exited with ${exited} before it answered /health:\n${output}`);
      }
      return fetch(`${gw.base}/health`, { signal: AbortSignal.timeout(1_000) })
        .then((r) => r.status === 200)
        .catch(() => false);
    },
    { timeoutMs: START_TIMEOUT_MS, seen: () => output },
  );
  return gw;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await gone;
  clearTimeout(timer);
}

// ---------------------------------------------------------------------------------------
// HTTP

interface Res {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

async function call(
  gw: GatewayProcess,
  method: string,
  path: string,
  opts: { key?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Res> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  if (opts.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  const res = await fetch(`${gw.base}${path}`, { method, headers, body: opts.body, signal: AbortSignal.timeout(20_000) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  // Every answer is as GET /openapi.json documents it (status, content type, JSON body).
  expect(documented?.problems({ method, path, status: res.status, contentType: res.headers.get('content-type'), json }) ?? [], text.slice(0, 300)).toEqual([]);
  return { status: res.status, headers: res.headers, text, json };
}

const chat = (gw: GatewayProcess, key: string | undefined, body: unknown, headers?: Record<string, string>) =>
  call(gw, 'POST', '/v1/chat/completions', { key, body: typeof body === 'string' ? body : JSON.stringify(body), headers });

/** Asserts the OpenAI error envelope with the expected status and code. */
function expectError(res: Res, status: number, code: string) {
  expect({ status: res.status, code: res.json?.error?.code }, res.text.slice(0, 500)).toEqual({ status, code });
  expect(Object.keys(res.json).sort()).toEqual(['error']);
  expect(Object.keys(res.json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof res.json.error.message).toBe('string');
  expect(res.json.error.message.length).toBeGreaterThan(0);
  expect(typeof res.json.error.type).toBe('string');
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
}

// ---------------------------------------------------------------------------------------

let upstream: ScriptedUpstream;
let gw: GatewayProcess;
/** The gateway's own OpenAPI document, read once it is up; call() checks each answer against it. */
let documented: OpenApiResponseChecker | undefined;
/** Every full key created in this file: none may appear in any process's output. */
const allKeys: string[] = [];

async function newOrg(creditsUsd: string): Promise<string> {
  const org = await cliOk('org', 'create', '--name', `bb ${creditsUsd}`, '--credits-usd', creditsUsd);
  expect(org).toMatchObject({ name: `bb ${creditsUsd}`, balance_usd: Number(creditsUsd).toFixed(6) });
  expect(org.id).toMatch(/^org_[0-9a-z]{20}$/);
  return org.id as string;
}

async function newKey(orgId: string, rpm?: number): Promise<{ id: string; key: string }> {
  const k = await cliOk('key', 'create', '--org', orgId, ...(rpm ? ['--rpm', String(rpm)] : []));
  expect(k.key).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
  expect(k.prefix).toBe(k.key.slice(0, 11));
  allKeys.push(k.key);
  return { id: k.id, key: k.key };
}

let orgId: string;
let key: string;

beforeAll(async () => {
  t = await createTestDatabase();
  upstream = await startScriptedUpstream();
  const m = await cliOk(
    'model',
    'upsert',
    '--id',
    'bb-llm',
    '--modality',
    'llm',
    '--upstream',
    upstream.baseUrl,
    '--protocol',
    'openai',
    '--price-input-per-mtok',
    '0.15',
    '--price-output-per-mtok',
    '0.6',
  );
  expect(m).toMatchObject({ id: 'bb-llm', modality: 'llm', status: 'active', prices: { input_per_mtok_usd: '0.15', output_per_mtok_usd: '0.6' } });
  expect(m.upstreams).toHaveLength(1);
  expect(m.upstreams[0]).toMatchObject({ url: upstream.baseUrl, protocol: 'openai' });
  await cliOk('model', 'upsert', '--id', 'bb-tts', '--modality', 'tts', '--price-per-char', '0.00001');
  orgId = await newOrg('5');
  ({ key } = await newKey(orgId));
  // The main gateway logs every request (info), so that the secret check below has logs to read.
  gw = await startGateway('main', { LOG_LEVEL: 'info' });
  const doc = await fetch(`${gw.base}/openapi.json`);
  expect(doc.status).toBe(200);
  documented = openApiResponseChecker((await doc.json()) as Record<string, unknown>);
  await until('bb-llm to be served', async () => {
    const r = await call(gw, 'GET', '/v1/models', { key });
    return r.json?.data?.some((d: { id: string }) => d.id === 'bb-llm');
  });
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([...children].map(stopProcess));
  await upstream?.close();
  await t?.drop();
}, 60_000);

describe('svc CLI', () => {
  it('model protocols lists every protocol with what it serves', async () => {
    const { protocols } = await cliOk('model', 'protocols');
    const byName = Object.fromEntries(protocols.map((p: { name: string; capabilities: string[] }) => [p.name, p.capabilities]));
    expect(byName.openai).toEqual(expect.arrayContaining(['chat', 'speech', 'transcription', 'streaming_transcription']));
    expect(byName.pocketsphinx).toEqual(['transcription', 'streaming_transcription']);
  });

  it('model list prints one JSON object with the registered models', async () => {
    const list = await cliOk('model', 'list');
    expect(list.models.map((m: { id: string }) => m.id)).toEqual(expect.arrayContaining(['bb-llm', 'bb-tts']));
  });

  it('credits grant prints the new balance', async () => {
    const org = await newOrg('1');
    expect(await cliOk('credits', 'grant', '--org', org, '--usd', '2.5')).toEqual({ org_id: org, balance_usd: '3.500000' });
    expect(await cliOk('credits', 'grant', '--org', org, '--usd', '-4')).toEqual({ org_id: org, balance_usd: '-0.500000' });
  });

  it.each([
    { name: 'key for an org that does not exist', args: ['key', 'create', '--org', 'org_doesnotexist'], stderr: /No organization with id org_doesnotexist/ },
    { name: 'revoking a key that does not exist', args: ['key', 'revoke', '--id', 'key_doesnotexist'], stderr: /No API key with id key_doesnotexist/ },
    { name: 'credits with seven decimals', args: ['credits', 'grant', '--org', 'org_x', '--usd', '0.0000001'], stderr: /--usd must be a USD amount/ },
    { name: '--rpm 0', args: ['key', 'create', '--org', 'org_x', '--rpm', '0'], stderr: /--rpm must be a positive integer/ },
    {
      name: 'upstream that is not http(s)',
      args: ['model', 'upsert', '--id', 'bad', '--modality', 'llm', '--upstream', 'ftp://example.com/v1'],
      stderr: /http\(s\)/,
    },
    { name: 'missing required option', args: ['org', 'create'], stderr: /--name/ },
    {
      name: 'an unknown protocol',
      args: ['model', 'upsert', '--id', 'bad', '--modality', 'stt', '--upstream', 'http://127.0.0.1:9', '--protocol', 'nonsense'],
      stderr: /Unknown protocol "nonsense"; a stt model can use: openai, .*pocketsphinx/,
    },
    {
      name: 'a protocol that lacks the modality',
      args: ['model', 'upsert', '--id', 'bad', '--modality', 'llm', '--upstream', 'local:flite', '--protocol', 'flite'],
      stderr: /Protocol 'flite' cannot serve a llm model \(it has speech, clone\); a llm model can use: openai, llama-cpp/,
    },
    {
      name: 'a setting the protocol does not have',
      args: ['model', 'upsert', '--id', 'bad', '--modality', 'llm', '--upstream', 'http://127.0.0.1:9', '--setting', 'colour=blue'],
      stderr: /Invalid settings for protocol 'openai'/,
    },
  ])('$name: exits non-zero, nothing on stdout', async ({ args, stderr }) => {
    const r = await cli(...args);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(stderr);
  });
});

describe('HTTP edge', () => {
  it('GET /health answers 200 {"status":"ok"} without a key', async () => {
    const r = await call(gw, 'GET', '/health');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ok' });
  });

  it.each([
    { name: 'unknown path', method: 'GET', path: '/v1/nope', status: 404, code: 'not_found', allow: null },
    { name: 'unknown native path', method: 'POST', path: '/does/not/exist', status: 404, code: 'not_found', allow: null },
    { name: 'GET on the chat route', method: 'GET', path: '/v1/chat/completions', status: 405, code: 'method_not_allowed', allow: 'POST' },
    { name: 'DELETE on the model list', method: 'DELETE', path: '/v1/models', status: 405, code: 'method_not_allowed', allow: 'GET' },
  ])('$name ($method $path) -> $status $code in the envelope', async ({ method, path, status, code, allow }) => {
    const r = await call(gw, method, path, { key });
    expectError(r, status, code);
    if (allow) expect(r.headers.get('allow')).toBe(allow);
  });

  it('every response carries x-request-id; a well-formed incoming id is kept, anything else replaced', async () => {
    const own = await call(gw, 'GET', '/v1/models', { key, headers: { 'x-request-id': 'trace-42.a:b_c' } });
    expect(own.headers.get('x-request-id')).toBe('trace-42.a:b_c');
    const replaced = await call(gw, 'GET', '/v1/models', { key, headers: { 'x-request-id': 'no spaces allowed' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{20}$/);
    const err = await call(gw, 'GET', '/v1/models');
    expect(err.status).toBe(401);
    expect(err.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{20}$/);
    const a = await call(gw, 'GET', '/health');
    const b = await call(gw, 'GET', '/health');
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
  });

  it('each answer gets one access-log line (info): request id, method, URL, status, milliseconds', async () => {
    const ids = ['access-log-1', 'access-log-2'];
    expect((await call(gw, 'GET', '/v1/models', { key, headers: { 'x-request-id': ids[0]! } })).status).toBe(200);
    expect((await call(gw, 'GET', '/v1/nope', { key, headers: { 'x-request-id': ids[1]! } })).status).toBe(404);
    const lines = await gw.outputWhere((out) => {
      const whole = out.slice(0, out.lastIndexOf('\n')); // complete lines only
      const found = whole.split('\n').filter((l) => ids.some((id) => l.includes(`"reqId":"${id}"`)));
      return found.length === 2 ? found.map((l) => JSON.parse(l) as Record<string, any>) : undefined;
    });
    expect(lines.map((l) => [l.reqId, l.msg, l.level, l.req.method, l.req.url, l.res.statusCode])).toEqual([
      [ids[0], 'request completed', 30, 'GET', '/v1/models', 200],
      [ids[1], 'request completed', 30, 'GET', '/v1/nope', 404],
    ]);
    for (const l of lines) expect(l.responseTime).toBeGreaterThan(0);
    expect(gw.output()).not.toContain('incoming request');
  });
});

describe('authentication over HTTP', () => {
  it.each([
    { name: 'no Authorization header', auth: undefined, code: 'invalid_api_key', message: /did not provide an API key/ },
    { name: 'malformed key', auth: 'Bearer not-a-key', code: 'invalid_api_key', message: /^Incorrect API key provided/ },
    { name: 'unknown well-formed key', auth: `Bearer sk_svc_${'Q'.repeat(43)}`, code: 'invalid_api_key', message: /^Incorrect API key provided/ },
    { name: 'key only in ?api_key= on an HTTP route', auth: undefined, query: true, code: 'invalid_api_key', message: /did not provide an API key/ },
  ])('$name -> 401 $code', async ({ auth, code, message, query }) => {
    const headers: Record<string, string> = auth ? { authorization: auth } : {};
    const path = query ? `/v1/models?api_key=${key}` : '/v1/models';
    const r = await call(gw, 'GET', path, { headers });
    expectError(r, 401, code);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: null });
    expect(r.json.error.message).toMatch(message);
    expect(r.text).not.toContain(`sk_svc_${'Q'.repeat(43)}`);
  });

  it('a key revoked by `svc key revoke` (another process) is refused on the very next request', async () => {
    const org = await newOrg('1');
    const k = await newKey(org);
    expect((await chat(gw, k.key, { model: 'bb-llm', messages: [] })).status).toBe(200);
    expect(await cliOk('key', 'revoke', '--id', k.id)).toEqual({ id: k.id, status: 'revoked' });
    const r = await chat(gw, k.key, { model: 'bb-llm', messages: [] });
    expectError(r, 401, 'api_key_disabled');
    expect(r.json.error.message).toMatch(/disabled/i);
    expectError(await call(gw, 'GET', '/v1/models', { key: k.key }), 401, 'api_key_disabled');
  });

  it('an org with no credit gets 402 insufficient_quota on chat, but may still list models', async () => {
    const org = await newOrg('0');
    const k = await newKey(org);
    const r = await chat(gw, k.key, { model: 'bb-llm', messages: [] });
    expectError(r, 402, 'insufficient_quota');
    expect(r.json.error.type).toBe('insufficient_quota');
    expect((await call(gw, 'GET', '/v1/models', { key: k.key })).status).toBe(200);
    await cliOk('credits', 'grant', '--org', org, '--usd', '0.01');
    expect((await chat(gw, k.key, { model: 'bb-llm', messages: [] })).status).toBe(200);
  });
});

describe('POST /v1/chat/completions: request validation', () => {
  const TEN_MIB = 10 * 1024 * 1024;
  it.each([
    { name: 'invalid JSON', body: '{"model": "bb-llm",', status: 400, code: 'invalid_json' },
    { name: 'a JSON array', body: '[{"model":"bb-llm"}]', status: 400, code: 'invalid_json' },
    { name: 'a JSON string', body: '"bb-llm"', status: 400, code: 'invalid_json' },
    { name: 'JSON null', body: 'null', status: 400, code: 'invalid_json' },
    { name: 'an empty body', body: '', status: 400, code: 'invalid_json' },
    { name: 'no model', body: '{"messages":[]}', status: 400, code: 'invalid_request' },
    { name: 'model not a string', body: '{"model":42,"messages":[]}', status: 400, code: 'invalid_request' },
    { name: 'unknown model', body: '{"model":"no-such-model","messages":[]}', status: 404, code: 'model_not_found' },
    { name: 'a TTS model on the LLM route', body: '{"model":"bb-tts","messages":[]}', status: 404, code: 'model_not_found' },
    { name: 'a body over 10 MiB', body: `{"model":"bb-llm","pad":"${'x'.repeat(TEN_MIB)}"}`, status: 413, code: 'body_too_large' },
  ])('$name -> $status $code', async ({ body, status, code }) => {
    const before = upstream.received.length;
    const r = await chat(gw, key, body);
    expectError(r, status, code);
    if (code === 'invalid_request' || code === 'model_not_found') expect(r.json.error.param).toBe('model');
    expect(upstream.received.length).toBe(before); // nothing reached the engine
  });

  it('accepts a 10 MB body (the cap is not the framework default of 1 MiB)', async () => {
    upstream.behaviour = { kind: 'ok', usage: { prompt_tokens: 1, completion_tokens: 1 } };
    const filler = 'y'.repeat(10_000_000 - 100);
    const body = JSON.stringify({ model: 'bb-llm', messages: [{ role: 'user', content: filler }] });
    expect(body.length).toBeLessThanOrEqual(10_000_000);
    const r = await chat(gw, key, body);
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(upstream.received.at(-1)!.body.length).toBe(body.length);
  });
});

describe('POST /v1/chat/completions: proxying and metering', () => {
  it('non-streaming: returns the upstream body byte for byte, with cost and balance computed from the prices', async () => {
    const org = await newOrg('5');
    const k = await newKey(org);
    // Unusual but valid formatting, so that any re-serialisation would show.
    const upstreamBody =
      '{ "id":"chatcmpl-bb", "object":"chat.completion", "model":"bb-llm",\n  "choices":[{"index":0,"message":{"role":"assistant","content":"hi ✓"},"finish_reason":"stop"}],\n  "usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}, "x_extra": [1.50, 2e3] }';
    upstream.behaviour = { kind: 'raw', status: 200, contentType: 'application/json', body: upstreamBody };
    // Sent as-is: odd spacing and a parameter the gateway knows nothing about.
    const requestBody = '{"model":"bb-llm",  "messages":[{"role":"user","content":"hello"}], "temperature":0.2, "vendor_knob":{"a":[1,2]}}';

    const r = await chat(gw, k.key, requestBody);
    expect(r.status).toBe(200);
    expect(r.text).toBe(upstreamBody);
    // 12 x 0.15 + 7 x 0.6 micro-USD = 6 micro-USD
    expect(r.headers.get('x-svc-request-cost-usd')).toBe('0.000006');
    expect(r.headers.get('x-svc-credits-remaining-usd')).toBe('4.999994');
    expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{20}$/);
    const received = upstream.received.at(-1)!;
    expect(received.path).toBe('/v1/chat/completions');
    expect(received.body.toString('utf8')).toBe(requestBody);
    expect(received.headers.authorization).toBeUndefined(); // the client's key never goes upstream

    // A second request: the balance header follows the debits.
    const r2 = await chat(gw, k.key, requestBody);
    expect(r2.headers.get('x-svc-credits-remaining-usd')).toBe('4.999988');
    // On SQLite the gateway commits a debit just after writing its answer (same event-loop
    // turn), so another process may look a moment too early.
    await vi.waitFor(async () => expect(await t.db.hot.getBalance(org)).toBe(4_999_988n), { timeout: 5_000, interval: 10 });
    const events = await usageRows(t.db.prisma, { orgId: org });
    expect(events.map((e) => [e.modelId, e.inputTokens, e.outputTokens, e.costMicros, e.requestId])).toEqual(
      expect.arrayContaining([
        ['bb-llm', 12, 7, 6n, r.headers.get('x-request-id')],
        ['bb-llm', 12, 7, 6n, r2.headers.get('x-request-id')],
      ]),
    );
  });

  it.each([
    // prompt, completion, cost, remaining (of 5 USD)
    [1000, 0, '0.000150', '4.999850'],
    [0, 1000, '0.000600', '4.999400'],
    [1, 1, '0.000001', '4.999999'], // 0.75 micro-USD, rounded up
    [1_000_000, 1_000_000, '0.750000', '4.250000'],
  ])('%i prompt + %i completion tokens -> cost %s, remaining %s', async (prompt, completion, cost, remaining) => {
    const org = await newOrg('5');
    const k = await newKey(org);
    upstream.behaviour = { kind: 'ok', usage: { prompt_tokens: prompt, completion_tokens: completion } };
    const r = await chat(gw, k.key, { model: 'bb-llm', messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(200);
    expect(r.json.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: completion });
    expect(r.headers.get('x-svc-request-cost-usd')).toBe(cost);
    expect(r.headers.get('x-svc-credits-remaining-usd')).toBe(remaining);
  });

  it('streaming: SSE relayed, only the pre-request balance header, usage metered without showing the added usage chunk', async () => {
    const org = await newOrg('2');
    const k = await newKey(org);
    upstream.behaviour = { kind: 'stream', chunks: ['Hel', 'lo'], usage: { prompt_tokens: 10, completion_tokens: 2 } };
    const r = await chat(gw, k.key, { model: 'bb-llm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(r.headers.get('x-svc-request-cost-usd')).toBeNull();
    expect(r.headers.get('x-svc-credits-remaining-usd')).toBe('2.000000');
    const datas = r.text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice(6));
    expect(datas.at(-1)).toBe('[DONE]');
    const chunks = datas.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? null)).toEqual(['Hel', 'lo', null]);
    expect(chunks.some((c) => c.usage)).toBe(false);
    // The gateway asked the engine for usage on the client's behalf...
    expect(JSON.parse(upstream.received.at(-1)!.body.toString()).stream_options).toEqual({ include_usage: true });
    // ...and debited 10 x 0.15 + 2 x 0.6 = 2.7 -> 3 micro-USD.
    await until('the stream to be debited', async () => (await t.db.hot.getBalance(org)) === 1_999_997n, { timeoutMs: 10_000 });
  });

  it('an upstream error becomes a 502 upstream_error in the envelope', async () => {
    upstream.behaviour = { kind: 'error', status: 500, body: { error: { message: 'engine exploded' } } };
    const r = await chat(gw, key, { model: 'bb-llm', messages: [] });
    expectError(r, 502, 'upstream_error');
    expect(r.json.error.type).toBe('api_error');
    upstream.behaviour = { kind: 'ok' };
  });
});

describe('model registry while running', () => {
  it('a model added with `svc model upsert` appears in GET /v1/models within seconds', async () => {
    const before = await call(gw, 'GET', '/v1/models', { key });
    expect(before.status).toBe(200);
    expect(before.json.object).toBe('list');
    expect(before.json.data.map((d: { id: string }) => d.id)).not.toContain('bb-added-late');
    await cliOk(
      'model',
      'upsert',
      '--id',
      'bb-added-late',
      '--modality',
      'llm',
      '--upstream',
      upstream.baseUrl,
      '--price-input-per-mtok',
      '1',
      '--price-output-per-mtok',
      '2',
    );
    const entry = await until('bb-added-late in /v1/models', async () => {
      const r = await call(gw, 'GET', '/v1/models', { key });
      return r.json?.data?.find((d: { id: string }) => d.id === 'bb-added-late');
    });
    expect(entry).toMatchObject({ id: 'bb-added-late', object: 'model' });
    upstream.behaviour = { kind: 'ok' };
    expect((await chat(gw, key, { model: 'bb-added-late', messages: [] })).status).toBe(200);
  });

  it('an upstream that goes down -> 503 model_offline once the health check has seen it', async () => {
    const doomed = await startScriptedUpstream();
    let closed = false;
    try {
      await cliOk(
        'model',
        'upsert',
        '--id',
        'bb-doomed',
        '--modality',
        'llm',
        '--upstream',
        doomed.baseUrl,
        '--price-input-per-mtok',
        '0.1',
        '--price-output-per-mtok',
        '0.1',
      );
      await until('bb-doomed to answer 200', async () => (await chat(gw, key, { model: 'bb-doomed', messages: [] })).status === 200);
      await doomed.close();
      closed = true;
      const r = await until('503 model_offline', async () => {
        const res = await chat(gw, key, { model: 'bb-doomed', messages: [] });
        return res.status === 503 ? res : undefined;
      });
      expectError(r, 503, 'model_offline');
      expect(r.json.error.type).toBe('api_error');
      const models = await call(gw, 'GET', '/v1/models', { key });
      expect(models.json.data.map((d: { id: string }) => d.id)).not.toContain('bb-doomed');
    } finally {
      if (!closed) await doomed.close();
    }
  });
});

describe('rate limit over HTTP', () => {
  it('a key created with --rpm 3 gets 3 x 200, then 429 with Retry-After and the wait at the end of the message', async () => {
    const org = await newOrg('1');
    const { statuses, refused } = await countedInOneMinute(async () => {
      const k = await newKey(org, 3);
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await call(gw, 'GET', '/v1/models', { key: k.key })).status);
      return { statuses, refused: await call(gw, 'GET', '/v1/models', { key: k.key }) };
    });
    expect(statuses).toEqual([200, 200, 200]);
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.json.error.type).toBe('rate_limit_error');
    const retryAfter = refused.headers.get('retry-after');
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    expect(refused.json.error.message).toMatch(new RegExp(`try again in ${retryAfter}s$`));
    // Other keys are not affected.
    expect((await call(gw, 'GET', '/v1/models', { key })).status).toBe(200);
  });
});

describe('two gateway processes sharing Redis', () => {
  let a: GatewayProcess;
  let b: GatewayProcess;
  let redis: Redis;
  /** Ids of keys used through these gateways: their window counters are removed afterwards. */
  const redisKeyIds: string[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
    await redis.connect();
    [a, b] = await Promise.all([startGateway('redis-a', { REDIS_URL }), startGateway('redis-b', { REDIS_URL })]);
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled([a?.child, b?.child].filter((c): c is ChildProcess => !!c).map(stopProcess));
    if (redis) {
      for (const id of redisKeyIds) {
        const keys = await redis.keys(`svc:rl:${id}:*`);
        if (keys.length) await redis.del(...keys);
      }
      redis.disconnect();
    }
  }, 60_000);

  it('a key with --rpm 10: 20 requests alternated across both -> exactly 10 x 200 and 10 x 429', async () => {
    const org = await newOrg('1');
    const results = await countedInOneMinute(async () => {
      const k = await newKey(org, 10);
      redisKeyIds.push(k.id);
      const results: { via: string; status: number; code?: string }[] = [];
      for (let i = 0; i < 20; i++) {
        const via = i % 2 === 0 ? a : b;
        const r = await call(via, 'GET', '/v1/models', { key: k.key });
        results.push({ via: via.name, status: r.status, code: r.json?.error?.code });
      }
      return results;
    });
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    expect(results.filter((r) => r.status === 429 && r.code === 'rate_limit_exceeded')).toHaveLength(10);
    // Fixed window: the first ten pass, whichever process they went through.
    expect(results.map((r) => r.status)).toEqual([...Array(10).fill(200), ...Array(10).fill(429)]);
    // Both processes refused some: the window really is shared.
    expect(new Set(results.filter((r) => r.status === 429).map((r) => r.via))).toEqual(new Set(['redis-a', 'redis-b']));
  });

  it('both processes see a revocation made by the CLI on their very next request', async () => {
    const org = await newOrg('1');
    const k = await newKey(org);
    redisKeyIds.push(k.id);
    expect((await call(a, 'GET', '/v1/models', { key: k.key })).status).toBe(200);
    expect((await call(b, 'GET', '/v1/models', { key: k.key })).status).toBe(200);
    await cliOk('key', 'revoke', '--id', k.id);
    expectError(await call(a, 'GET', '/v1/models', { key: k.key }), 401, 'api_key_disabled');
    expectError(await call(b, 'GET', '/v1/models', { key: k.key }), 401, 'api_key_disabled');
  });
});

describe('secrets in logs (runs last)', () => {
  it('no API key appears in any gateway output, even when sent as ?api_key=', async () => {
    // Requests that put the key in the URL, on routes that answer 200, 400, 404 and 405.
    await call(gw, 'GET', `/v1/models?api_key=${key}`, { key });
    await call(gw, 'GET', `/v1/models?foo=1&API_KEY=${key}&bar=2`, { key });
    await chat(gw, key, '[]', { 'x-ignored': 'x' });
    await call(gw, 'GET', `/nowhere?api_key=${key}`, { key });
    await call(gw, 'GET', `/v1/chat/completions?api_key=${key}`, { key });
    await chat(gw, `${key}x`, { model: 'bb-llm', messages: [] }); // malformed variant of a real key
    // Every line is read once the gateways have exited: lines are written in batches while a
    // gateway runs, and the rest at exit.
    for (const g of gateways) {
      await stopProcess(g.child);
      await g.outputClosed;
    }

    const out = gw.output();
    // The logs are there (info level) and show the URL with the key removed.
    expect(out).toContain('"url":"/v1/models?api_key=[redacted]"');
    expect(out).toContain('API_KEY=[redacted]&bar=2');
    expect(gateways.length).toBe(3); // main and the two Redis gateways
    for (const g of gateways) {
      const text = g.output();
      for (const k of allKeys) {
        expect(text.includes(k), `a full API key was found in the output of gateway ${g.name}`).toBe(false);
        expect(text.includes(k.slice(11)), `the secret part of an API key was found in the output of gateway ${g.name}`).toBe(false);
      }
    }
  });
});
