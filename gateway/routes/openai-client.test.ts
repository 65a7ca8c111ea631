// The official `openai` npm client pointed at the gateway (baseURL {gateway}/v1): what an
// OpenAI-compatible caller sees of /v1/models and /v1/chat/completions, results and typed
// errors, with the real gateway runtime in front of scripted upstreams.
import { createServer } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;
let client: OpenAI;
const upstreams: ScriptedUpstream[] = [];
const ups: Record<string, ScriptedUpstream> = {};

const TOOL_ANSWER = {
  id: 'chatcmpl-tool',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'oa-tools',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_42', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Zürich"}' } }],
      },
      finish_reason: 'tool_calls',
    },
  ],
  usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 },
};

const chunk = (delta: unknown, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'oa-tools-stream', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const TOOL_STREAM =
  chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '' } }] }) +
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }) +
  chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }) +
  chunk({}, 'tool_calls') +
  'data: [DONE]\n\n';

async function deadUrl(): Promise<string> {
  const port = await new Promise<number>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port: p } = srv.address() as { port: number };
      srv.close(() => resolve(p));
    });
  });
  return `http://127.0.0.1:${port}/v1`;
}

async function addModel(id: string, target: Behaviour | string, status: 'active' | 'disabled' = 'active') {
  let url: string;
  if (typeof target === 'string') url = target;
  else {
    const up = await startScriptedUpstream(target);
    upstreams.push(up);
    ups[id] = up;
    url = up.baseUrl;
  }
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id,
    modality: 'llm',
    status,
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url, protocol: 'openai' },
  });
}

beforeAll(async () => {
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  await addModel('oa-chat', { kind: 'ok', text: 'Hello from the scripted upstream.' });
  await addModel('oa-stream', { kind: 'stream', chunks: ['Voice ', 'agents ', 'talk', '.'] });
  await addModel('oa-dies', { kind: 'stream', chunks: ['par', 'tial', 'never'], dieAfter: 2, delayMs: 20 });
  await addModel('oa-tools', { kind: 'raw', status: 200, contentType: 'application/json', body: JSON.stringify(TOOL_ANSWER) });
  await addModel('oa-tools-stream', { kind: 'raw', status: 200, contentType: 'text/event-stream', body: TOOL_STREAM });
  await addModel('oa-bad-request', {
    kind: 'error',
    status: 400,
    body: { error: { message: 'max_tokens must be at least 1, got -5.', type: 'BadRequestError', param: 'max_tokens', code: 400 } },
  });
  await addModel('oa-engine-500', { kind: 'error', status: 500, body: { error: { message: 'CUDA out of memory' } } });
  await addModel('oa-down', await deadUrl());
  await addModel('oa-off', { kind: 'ok' }, 'disabled');
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
});

afterAll(async () => {
  await Promise.allSettled(upstreams.map((u) => u.close()));
  await h?.close();
});

/** The rejection of a call, or a failure if it resolved. */
async function rejection(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call;
  } catch (e) {
    expect(e).toBeInstanceOf(OpenAI.APIError);
    return e as InstanceType<typeof OpenAI.APIError>;
  }
  throw new Error('expected the call to fail');
}

describe('openai client: models', () => {
  it('models.list returns the models with a healthy upstream, not the down or disabled ones', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['oa-bad-request', 'oa-chat', 'oa-dies', 'oa-engine-500', 'oa-stream', 'oa-tools', 'oa-tools-stream']));
    expect(ids).not.toContain('oa-down');
    expect(ids).not.toContain('oa-off');
    for (const m of page.data) {
      expect(m.object).toBe('model');
      expect(typeof m.created).toBe('number');
      expect(typeof m.owned_by).toBe('string');
    }
    const iterated: string[] = [];
    for await (const m of client.models.list()) iterated.push(m.id);
    expect(iterated).toEqual(ids);
  });
});

describe('openai client: chat completions', () => {
  it('non-streaming: the message, the usage and the spend headers', async () => {
    const { data, response } = await client.chat.completions
      .create({ model: 'oa-chat', messages: [{ role: 'user', content: 'Say hello' }], temperature: 0.2, max_tokens: 20 })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]!.message).toEqual({ role: 'assistant', content: 'Hello from the scripted upstream.' });
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.usage).toEqual({ prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 });
    // 12 x 0.15 + 7 x 0.6 USD per million tokens = 6.0 micro-USD
    expect(response.headers.get('x-svc-request-cost-usd')).toBe('0.000006');
    expect(response.headers.get('x-svc-credits-remaining-usd')).toMatch(/^\d+\.\d{6}$/);
    const sent = JSON.parse(ups['oa-chat']!.received.at(-1)!.body.toString('utf8'));
    expect(sent).toEqual({ model: 'oa-chat', messages: [{ role: 'user', content: 'Say hello' }], temperature: 0.2, max_tokens: 20 });
  });

  it('streaming: the deltas add up to the upstream text; no usage chunk unless asked', async () => {
    const stream = await client.chat.completions.create({ model: 'oa-stream', messages: [{ role: 'user', content: 'Talk' }], stream: true });
    let text = '';
    let chunks = 0;
    for await (const c of stream) {
      chunks += 1;
      expect(c.usage ?? undefined).toBeUndefined();
      text += c.choices[0]?.delta?.content ?? '';
    }
    expect(text).toBe('Voice agents talk.');
    expect(chunks).toBe(5); // four deltas and the finish chunk
  });

  it('streaming with include_usage: the last chunk carries the usage', async () => {
    const stream = await client.chat.completions.create({
      model: 'oa-stream',
      messages: [{ role: 'user', content: 'Talk' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const all = [];
    for await (const c of stream) all.push(c);
    expect(all.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('Voice agents talk.');
    expect(all.at(-1)!.choices).toEqual([]);
    expect(all.at(-1)!.usage).toEqual({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 });
  });

  it('tool calls come back typed (non-streaming)', async () => {
    const res = await client.chat.completions.create({
      model: 'oa-tools',
      messages: [{ role: 'user', content: 'Weather in Zürich?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: 'auto',
    });
    expect(res).toEqual(TOOL_ANSWER);
    const call = res.choices[0]!.message.tool_calls![0]!;
    expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ city: 'Zürich' });
    const forwarded = JSON.parse(ups['oa-tools']!.received.at(-1)!.body.toString('utf8'));
    expect(forwarded.tools[0].function.name).toBe('get_weather');
    expect(forwarded.tool_choice).toBe('auto');
  });

  it('streamed tool calls assemble with the client stream helper', async () => {
    const runner = client.chat.completions.stream({ model: 'oa-tools-stream', messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    const call = final.choices[0]!.message.tool_calls![0]!;
    expect(call.id).toBe('call_7');
    expect(call.type === 'function' && [call.function.name, call.function.arguments]).toEqual(['get_weather', '{"city":"Oslo"}']);
  });

  it('an engine that dies mid-stream: the client gets the delivered deltas, then an APIError upstream_error', async () => {
    const stream = await client.chat.completions.create({ model: 'oa-dies', messages: [{ role: 'user', content: 'Go' }], stream: true });
    let text = '';
    const err = await rejection(
      (async () => {
        for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
      })(),
    );
    expect(text).toBe('partial');
    expect(err.code).toBe('upstream_error');
    expect(err.type).toBe('api_error');
  });
});

describe('openai client: typed errors', () => {
  it('AuthenticationError for a key that does not exist', async () => {
    const bad = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: 'sk_svc_thisisnotakey', maxRetries: 0 });
    for (const call of [bad.models.list(), bad.chat.completions.create({ model: 'oa-chat', messages: [] })]) {
      const err = await rejection(call);
      expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
      expect([err.status, err.code, err.type, err.param]).toEqual([401, 'invalid_api_key', 'invalid_request_error', null]);
    }
  });

  it('NotFoundError for an unknown model and for a disabled one', async () => {
    for (const model of ['no-such-model', 'oa-off']) {
      const err = await rejection(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect([err.status, err.code, err.type, err.param]).toEqual([404, 'model_not_found', 'invalid_request_error', 'model']);
    }
  });

  it('RateLimitError once a key with 1 request per minute has used it, with Retry-After', async () => {
    const key = await createApiKey(h.testDb.db.prisma, { orgId: h.orgId, name: 'slow', rateLimitRpm: 1 });
    const slow = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: key.key, maxRetries: 0 });
    const first = await slow.chat.completions.create({ model: 'oa-chat', messages: [{ role: 'user', content: 'one' }] });
    expect(first.choices[0]!.message.content).toBe('Hello from the scripted upstream.');
    // The window is the clock minute: if the second call lands in the next one, the third cannot.
    let err: InstanceType<typeof OpenAI.APIError> | undefined;
    for (let i = 0; i < 2 && !err; i++) {
      try {
        await slow.chat.completions.create({ model: 'oa-chat', messages: [{ role: 'user', content: 'again' }] });
      } catch (e) {
        err = e as InstanceType<typeof OpenAI.APIError>;
      }
    }
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect([err!.status, err!.code, err!.type]).toEqual([429, 'rate_limit_exceeded', 'rate_limit_error']);
    const retryAfter = Number(err!.headers?.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(err!.message).toMatch(new RegExp(`${retryAfter}s$`));
  });

  it('BadRequestError with the engine message when the engine rejects the request', async () => {
    const err = await rejection(client.chat.completions.create({ model: 'oa-bad-request', messages: [{ role: 'user', content: 'hi' }], max_tokens: -5 }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect([err.status, err.code, err.type, err.param]).toEqual([400, 'invalid_request', 'invalid_request_error', 'max_tokens']);
    expect(err.message).toContain('max_tokens must be at least 1, got -5.');
  });

  it('APIError 402 insufficient_quota when the balance is zero', async () => {
    const org = await createOrg(h.testDb.db, { name: 'empty' });
    const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'empty' });
    const broke = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: key.key, maxRetries: 0 });
    for (const stream of [false, true] as const) {
      const err = await rejection(broke.chat.completions.create({ model: 'oa-chat', messages: [{ role: 'user', content: 'hi' }], stream }));
      expect(err.constructor).toBe(OpenAI.APIError);
      expect([err.status, err.code, err.type]).toEqual([402, 'insufficient_quota', 'insufficient_quota']);
    }
    // Listing models is not metered.
    expect((await broke.models.list()).data.length).toBeGreaterThan(0);
  });

  it('InternalServerError for 502 upstream_error, 503 model_offline and 502 upstream_unavailable', async () => {
    const engine500 = await rejection(client.chat.completions.create({ model: 'oa-engine-500', messages: [{ role: 'user', content: 'hi' }] }));
    expect(engine500).toBeInstanceOf(OpenAI.InternalServerError);
    expect([engine500.status, engine500.code, engine500.type]).toEqual([502, 'upstream_error', 'api_error']);
    expect(engine500.message).toContain('CUDA out of memory');

    const offline = await rejection(client.chat.completions.create({ model: 'oa-down', messages: [{ role: 'user', content: 'hi' }], stream: true }));
    expect(offline).toBeInstanceOf(OpenAI.InternalServerError);
    expect([offline.status, offline.code, offline.type]).toEqual([503, 'model_offline', 'api_error']);

    // A model whose only upstream has not been health-checked yet and refuses connections.
    await addModel('oa-unreachable', await deadUrl());
    await h.runtime.ctx.registry.refresh();
    const unreachable = await rejection(client.chat.completions.create({ model: 'oa-unreachable', messages: [{ role: 'user', content: 'hi' }] }));
    expect(unreachable).toBeInstanceOf(OpenAI.InternalServerError);
    expect([unreachable.status, unreachable.code, unreachable.type]).toEqual([502, 'upstream_unavailable', 'api_error']);
  });
});
