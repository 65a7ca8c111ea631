// Route tests of POST /v1/chat/completions and GET /v1/models over real HTTP: the real gateway
// runtime (test/support/gateway-harness.ts) on a throw-away database (SQLite, or PostgreSQL with
// TEST_DB=postgresql) in front of scripted OpenAI-compatible upstreams that record the exact
// bytes they receive and misbehave on demand.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sseData, sseReader } from '../../test/support/sse-client.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

// Prices chosen so that costs are not whole micro-dollars: every cost below is rounded up.
const PRICE_IN = 150_001n; // pico-USD per input token
const PRICE_OUT = 600_003n; // pico-USD per output token
const PRICES = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
const MiB = 1024 * 1024;

/** Independent of the product's pricing code: exact pico total, rounded up to a micro-dollar. */
const costOf = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const usd = (micros: bigint): string => `${micros / 1_000_000n}.${(micros % 1_000_000n).toString().padStart(6, '0')}`;

let h: GatewayHarness; // default deadline (300 s); health checks only when a test runs them
let hd: GatewayHarness; // 1 s upstream deadline
const upstreams: ScriptedUpstream[] = [];
let seq = 0;

beforeAll(async () => {
  [h, hd] = await Promise.all([
    startGateway({ creditsMicros: 10_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } }),
    startGateway({ creditsMicros: 10_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_UPSTREAM_TIMEOUT_SECONDS: '1' } }),
  ]);
});

afterAll(async () => {
  await Promise.allSettled(upstreams.map((u) => u.close()));
  await Promise.allSettled([h?.close(), hd?.close()]);
});

/** A port on loopback where nothing listens. */
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

async function upstream(behaviour: Behaviour): Promise<ScriptedUpstream> {
  const up = await startScriptedUpstream(behaviour);
  upstreams.push(up);
  return up;
}

/** Registers a fresh LLM model served by the given upstreams and reloads the gateway's registry. */
async function model(
  g: GatewayHarness,
  ups: { url: string; upstreamModel?: string; weight?: number }[],
  options: { id?: string; modality?: 'llm' | 'tts'; status?: 'active' | 'disabled' } = {},
): Promise<string> {
  const id = options.id ?? `chat-${++seq}`;
  for (const u of ups) {
    await upsertModel(g.testDb.db.prisma, checkProtocol, {
      id,
      modality: options.modality ?? 'llm',
      status: options.status,
      prices: PRICES,
      upstream: { url: u.url, protocol: 'openai', upstreamModel: u.upstreamModel, weight: u.weight },
    });
  }
  await g.runtime.ctx.registry.refresh();
  return id;
}

/** A fresh model on a fresh scripted upstream. */
async function scripted(behaviour: Behaviour, g: GatewayHarness = h, upstreamModel?: string) {
  const up = await upstream(behaviour);
  const id = await model(g, [{ url: up.baseUrl, upstreamModel }]);
  return { up, id };
}

function post(body: string | object, options: { g?: GatewayHarness; headers?: Record<string, string>; signal?: AbortSignal } = {}) {
  const g = options.g ?? h;
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return fetch(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { ...g.headers, ...options.headers }, body: payload, signal: options.signal });
}

const contentOf = (events: string[]) =>
  events
    .filter((d) => d !== '[DONE]')
    .map((d) => JSON.parse(d) as { choices?: { delta?: { content?: string } }[] })
    .map((c) => c.choices?.[0]?.delta?.content ?? '')
    .join('');

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;

/** The ledger and usage rows of one request, once its debit has been written. */
async function billingOf(requestId: string, g: GatewayHarness = h) {
  await vi.waitFor(
    async () => {
      expect(await prisma(g).ledgerEntry.count({ where: { requestId } })).toBeGreaterThan(0);
    },
    { timeout: 10_000, interval: 20 },
  );
  const ledger = await prisma(g).ledgerEntry.findMany({ where: { requestId } });
  const usage = await usageRows(prisma(g), { requestId });
  return { ledger, usage };
}

async function expectNotBilled(requestId: string, g: GatewayHarness = h) {
  await g.settled();
  expect(await prisma(g).ledgerEntry.count({ where: { requestId } })).toBe(0);
}

async function expectError(res: Response, status: number, code: string, type?: string) {
  const body = (await res.json()) as { error: { message: string; type: string; code: string; param: string | null } };
  expect({ status: res.status, code: body.error?.code }).toEqual({ status, code });
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  if (type) expect(body.error.type).toBe(type);
  return body.error;
}

let rid = 0;
const newRequestId = (label: string) => `test-${label}-${++rid}-${Date.now()}`;

// -----------------------------------------------------------------------------------------

describe('POST /v1/chat/completions: forwarding', () => {
  // Whitespace, key order, escapes, unicode, a 20-digit seed, 1.0e2 and unknown vendor fields:
  // anything a re-serialisation would change.
  const arbitrary = (modelId: string, extra = '') => `{
  "messages" : [ {"role":"system","content":"R\\u00e9ponds en fran\u00e7ais \u{1F399}\uFE0F \u2014 \\ud83d\\ude00\\n"},
                 {"role":"user","content":"Quel temps fait-il \u00e0 \u6771\u4eac ?","name":"z\u00fc"} ],
  "model":"${modelId}",   "n": 2, "logprobs": true, "top_logprobs": 3,
  "tools": [{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
  "tool_choice": "auto",
  "response_format": {"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}},
  "temperature": 0.70, "seed": 12345678901234567890, "max_tokens": 1.0e2,
  "logit_bias": {"z": 1, "50256": -100},
  "vendor_x": {"nested": [1, 2.50, null, true, "\\"q\\""]}, "chat_template_kwargs": {"enable_thinking": false}${extra}
}
`;

  it('forwards an arbitrary non-streaming body byte for byte and returns the engine answer', async () => {
    const { up, id } = await scripted({ kind: 'ok', text: 'Il fait beau.' });
    const raw = arbitrary(id);
    const res = await post(raw);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = (await res.json()) as { choices: { message: { content: string } }[]; usage: unknown };
    expect(answer.choices[0]!.message.content).toBe('Il fait beau.');
    expect(answer.usage).toEqual({ prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 });
    expect(up.received).toHaveLength(1);
    expect(up.received[0]!.path).toBe('/v1/chat/completions');
    expect(up.received[0]!.headers['content-type']).toBe('application/json');
    expect(up.received[0]!.body.equals(Buffer.from(raw))).toBe(true);
  });

  it('forwards a streaming body that already asks for usage byte for byte', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['Bon', 'jour'] });
    const raw = arbitrary(id, ',\n  "stream":true, "stream_options": {"include_usage": true}');
    const res = await post(raw);
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(contentOf(events)).toBe('Bonjour');
    expect(up.received[0]!.body.equals(Buffer.from(raw))).toBe(true);
  });

  it('rewrites only `model` when the upstream knows the model by another name', async () => {
    const { up, id } = await scripted({ kind: 'ok' }, h, 'org/engine-name:q4');
    // Nested "model" keys and a quoted "model" inside a string come after the top-level one.
    const raw = arbitrary(id, `,\n  "metadata": {"model":"${id}", "note": "\\"model\\":\\"${id}\\""}, "tools_x": [{"model":"${id}"}]`);
    const res = await post(raw);
    expect(res.status).toBe(200);
    const received = up.received[0]!.body.toString('utf8');
    expect(JSON.parse(received).model).toBe('org/engine-name:q4');
    expect(JSON.parse(received).metadata).toEqual(JSON.parse(raw).metadata);
    // Everything else keeps its bytes: whitespace, key order, the 20-digit seed, 1.0e2, escapes.
    expect(received).toBe(raw.replace(`"model":"${id}"`, '"model":"org/engine-name:q4"'));
  });

  it('rewrites `model` and adds include_usage to the client stream_options together, nothing else changes', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['ok'] }, h, 'engine-2');
    const raw = `{ "stream_options" : {"continuous_usage_stats": true} ,\n "model" : "${id}", "stream": true, "seed": 98765432109876543210, "messages": [] }`;
    const res = await post(raw);
    expect(contentOf(sseData(await res.text()))).toBe('ok');
    expect(up.received[0]!.body.toString('utf8')).toBe(
      `{ "stream_options" : {"continuous_usage_stats":true,"include_usage":true} ,\n "model" : "engine-2", "stream": true, "seed": 98765432109876543210, "messages": [] }`,
    );
  });

  it('a stream request that does not mention stream_options gets it appended, the rest byte for byte', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['ok'] });
    const raw = `{"model":"${id}",  "stream":true, "seed": 12345678901234567890, "messages":[{"role":"user","content":"\u00e9"}]}\n`;
    const res = await post(raw);
    expect(res.status).toBe(200);
    await res.text();
    expect(up.received[0]!.body.toString('utf8')).toBe(
      `{"model":"${id}",  "stream":true, "seed": 12345678901234567890, "messages":[{"role":"user","content":"\u00e9"}],"stream_options":{"include_usage":true}}\n`,
    );
  });

  it('streams without stream_options: include_usage is added upstream, the usage chunk is not relayed', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['Hel', 'lo', ' there'] });
    const sent = { model: id, stream: true, messages: [{ role: 'user', content: 'hi' }], temperature: 0.5, vendor: { a: [1, 2] } };
    const res = await post(sent);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sseData(await res.text());
    const received = JSON.parse(up.received[0]!.body.toString('utf8')) as Record<string, unknown>;
    expect(received).toEqual({ ...sent, stream_options: { include_usage: true } });
    expect(Object.keys(received)).toEqual([...Object.keys(sent), 'stream_options']);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((d) => JSON.parse(d) as { choices: unknown[]; usage?: unknown });
    expect(chunks).toHaveLength(4); // three deltas and the finish chunk
    expect(chunks.every((c) => c.choices.length === 1 && c.usage === undefined)).toBe(true);
    expect(contentOf(events)).toBe('Hello there');
  });

  it('streams with include_usage false: the other stream options are kept, usage is metered but not shown', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['a', 'b'] });
    const res = await post({ model: id, stream: true, stream_options: { include_usage: false, continuous_usage_stats: false }, messages: [] });
    const events = sseData(await res.text());
    expect(JSON.parse(up.received[0]!.body.toString('utf8')).stream_options).toEqual({ include_usage: true, continuous_usage_stats: false });
    expect(events.some((d) => d !== '[DONE]' && 'usage' in JSON.parse(d))).toBe(false);
    const { usage } = await billingOf(res.headers.get('x-request-id')!);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens])).toEqual([[10, 2]]);
  });

  it('streams with include_usage true: the client gets the final usage chunk', async () => {
    const { id } = await scripted({ kind: 'stream', chunks: ['x', 'y', 'z'], usage: { prompt_tokens: 21, completion_tokens: 3 } });
    const res = await post({ model: id, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'go' }] });
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    const last = JSON.parse(events.at(-2)!) as { choices: unknown[]; usage: unknown };
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 21, completion_tokens: 3, total_tokens: 24 });
    expect(contentOf(events)).toBe('xyz');
  });

  it('relays a tool-call answer byte for byte (non-streaming)', async () => {
    const answer = JSON.stringify({
      id: 'chatcmpl-tool',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"\u00b0C"}' } },
              { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 40, completion_tokens: 20, total_tokens: 60 },
    });
    const { id } = await scripted({ kind: 'raw', status: 200, contentType: 'application/json', body: answer });
    const res = await post({ model: id, messages: [{ role: 'user', content: 'weather?' }], tools: [{ type: 'function', function: { name: 'get_weather' } }] });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(answer);
    const { usage } = await billingOf(res.headers.get('x-request-id')!);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[40, 20, costOf(40, 20)]]);
  });

  it('relays a streamed tool call byte for byte', async () => {
    const chunk = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const sse =
      chunk({
        role: 'assistant',
        content: null,
        tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }) +
      chunk({}, 'tool_calls') +
      'data: [DONE]\n\n';
    const { id } = await scripted({ kind: 'raw', status: 200, contentType: 'text/event-stream', body: sse });
    const res = await post({ model: id, stream: true, messages: [{ role: 'user', content: 'weather?' }] });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(sse);
  });
});

describe('POST /v1/chat/completions: engine errors', () => {
  it.each([
    {
      status: 400,
      body: { error: { message: 'max_tokens must be at least 1, got 0.', type: 'BadRequestError', param: 'max_tokens', code: 400 } },
      message: 'max_tokens must be at least 1, got 0.',
      param: 'max_tokens',
    },
    {
      status: 400,
      body: { object: 'error', message: "This model's maximum context length is 4096 tokens.", type: 'BadRequestError', param: null, code: 400 },
      message: "This model's maximum context length is 4096 tokens.",
      param: null,
    },
    { status: 422, body: { error: { message: 'messages: field required' } }, message: 'messages: field required', param: null },
    {
      status: 422,
      body: { detail: 'Unprocessable: tools[0].function.name is missing' },
      message: 'Unprocessable: tools[0].function.name is missing',
      param: null,
    },
    { status: 413, body: { error: 'prompt too long' }, message: 'prompt too long', param: null },
  ])('engine $status -> 400 invalid_request with the engine message ($message)', async ({ status, body, message, param }) => {
    for (const stream of [false, true]) {
      const { up, id } = await scripted({ kind: 'error', status, body });
      const res = await post({ model: id, stream, messages: [] });
      const err = await expectError(res, 400, 'invalid_request', 'invalid_request_error');
      expect(err.message).toBe(message);
      expect(err.param).toBe(param);
      expect(up.received).toHaveLength(1);
      await expectNotBilled(res.headers.get('x-request-id')!);
    }
  });

  it.each([500, 401, 404, 503, 429])('engine %i -> 502 upstream_error', async (status) => {
    const { id } = await scripted({ kind: 'error', status, body: { error: { message: `engine says ${status}` } } });
    for (const stream of [false, true]) {
      const res = await post({ model: id, stream, messages: [] });
      const err = await expectError(res, 502, 'upstream_error', 'api_error');
      expect(err.message).toContain(String(status));
      expect(err.message).toContain(`engine says ${status}`);
      await expectNotBilled(res.headers.get('x-request-id')!);
    }
  });

  it.each([
    { name: 'HTML with status 200', contentType: 'text/html', body: '<html>Bad Gateway</html>' },
    { name: 'truncated JSON with status 200', contentType: 'application/json', body: '{"id":"chatcmpl","choices":[' },
    { name: 'an empty body', contentType: 'application/json', body: '' },
  ])('engine answers $name to a non-streaming request -> 502 upstream_error, not billed', async ({ contentType, body }) => {
    const { id } = await scripted({ kind: 'raw', status: 200, contentType, body });
    const res = await post({ model: id, messages: [] });
    await expectError(res, 502, 'upstream_error', 'api_error');
    await expectNotBilled(res.headers.get('x-request-id')!);
  });

  it('engine drops the connection in the middle of a non-streaming answer -> 502 upstream_error, not billed', async () => {
    const { id } = await scripted({ kind: 'partial', status: 200, contentType: 'application/json', body: '{"id":"chatcmpl","choi', then: 'die' });
    const res = await post({ model: id, messages: [] });
    const body = (await res.clone().json()) as { error: { code: string } };
    // upstream_error when the headers were in before the connection went (the usual case),
    // upstream_unavailable when the drop overtook them: both are the spec's 502.
    await expectError(res, 502, body.error.code === 'upstream_unavailable' ? 'upstream_unavailable' : 'upstream_error', 'api_error');
    await expectNotBilled(res.headers.get('x-request-id')!);
  });
});

describe('POST /v1/chat/completions: deadline (SVC_UPSTREAM_TIMEOUT_SECONDS=1)', () => {
  it.each([false, true])('engine never answers (stream %s) -> 504 upstream_timeout, not billed', async (stream) => {
    const { up, id } = await scripted({ kind: 'hang' }, hd);
    const res = await post({ model: id, stream, messages: [] }, { g: hd });
    const err = await expectError(res, 504, 'upstream_timeout', 'api_error');
    expect(err.message).toMatch(/1 s/);
    expect(up.received).toHaveLength(1);
    await expectNotBilled(res.headers.get('x-request-id')!, hd);
  });

  it('engine sends headers then stalls a non-streaming body -> 504 upstream_timeout', async () => {
    const { id } = await scripted({ kind: 'partial', status: 200, contentType: 'application/json', body: '{"id":', then: 'hang' }, hd);
    const res = await post({ model: id, messages: [] }, { g: hd });
    await expectError(res, 504, 'upstream_timeout', 'api_error');
    await expectNotBilled(res.headers.get('x-request-id')!, hd);
  });

  it('a stream that stalls past the deadline ends with an upstream_timeout error event, then [DONE]; one chunk billed', async () => {
    const { id } = await scripted({ kind: 'stream', chunks: ['first', 'never'], delayMs: 4_000 }, hd);
    const raw = JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'stall please' }] });
    const res = await post(raw, { g: hd });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events).toHaveLength(3);
    expect(contentOf(events.slice(0, 1))).toBe('first');
    expect(JSON.parse(events[1]!)).toMatchObject({ error: { code: 'upstream_timeout', type: 'api_error', param: null } });
    expect(events[2]).toBe('[DONE]');
    const { usage } = await billingOf(res.headers.get('x-request-id')!, hd);
    const input = Math.ceil(Buffer.byteLength(raw) / 4);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[input, 1, costOf(input, 1)]]);
  });
});

describe('POST /v1/chat/completions: streaming', () => {
  it('a slow first token still relays the whole stream', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['after', ' a', ' pause'], firstDelayMs: 700 });
    const res = await post({ model: id, stream: true, messages: [] });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(contentOf(events)).toBe('after a pause');
    expect(events.at(-1)).toBe('[DONE]');
    expect(up.streams[0]).toMatchObject({ ended: true, closedEarly: false });
  });

  it('relays each event as it comes: the first chunk arrives while the engine is still between chunks', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: ['one', 'two'], delayMs: 1_500 });
    const res = await post({ model: id, stream: true, messages: [] });
    const reader = sseReader(res);
    const first = await reader.next();
    const sentWhenFirstArrived = up.streams[0]!.sent;
    expect(contentOf([first!])).toBe('one');
    expect(sentWhenFirstArrived).toBe(1); // 'two', the finish chunk and [DONE] were still to come
    const rest = await reader.rest();
    expect(contentOf(rest)).toBe('two');
    expect(rest.at(-1)).toBe('[DONE]');
  });

  it('the engine dies mid-stream: the stream ends with an upstream_error event and [DONE]; delivered chunks are billed', async () => {
    const { id } = await scripted({ kind: 'stream', chunks: ['a', 'b', 'c', 'd', 'e'], dieAfter: 2, delayMs: 20 });
    const raw = JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'tell me a long story' }] });
    const before = await h.balanceMicros();
    const res = await post(raw);
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events).toHaveLength(4);
    expect(contentOf(events.slice(0, 2))).toBe('ab');
    expect(JSON.parse(events[2]!)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'upstream_error', param: null } });
    expect(events[3]).toBe('[DONE]');
    const requestId = res.headers.get('x-request-id')!;
    const { ledger, usage } = await billingOf(requestId);
    const input = Math.ceil(Buffer.byteLength(raw) / 4);
    const cost = costOf(input, 2);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[input, 2, cost]]);
    expect(ledger.map((l) => l.amountMicros)).toEqual([-cost]);
    expect(await h.balanceMicros()).toBe(before - cost);
  });

  it('a complete stream without engine usage is billed one token per content chunk and prompt bytes / 4', async () => {
    const { id } = await scripted({ kind: 'stream', chunks: ['w', 'x', 'y'], usage: null });
    const raw = JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'count the chunks, not the finish' }] });
    const res = await post(raw);
    expect(contentOf(sseData(await res.text()))).toBe('wxy');
    const { usage } = await billingOf(res.headers.get('x-request-id')!);
    const input = Math.ceil(Buffer.byteLength(raw) / 4);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[input, 3, costOf(input, 3)]]);
  });

  it('client disconnect mid-stream: the engine connection is closed and exactly one usage row is written', async () => {
    const { up, id } = await scripted({ kind: 'stream', chunks: Array.from({ length: 20 }, (_, i) => `t${i}`), delayMs: 1_000 });
    const id1 = newRequestId('disconnect');
    const raw = JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'talk' }] });
    const abort = new AbortController();
    const res = await post(raw, { headers: { 'x-request-id': id1 }, signal: abort.signal });
    expect(res.headers.get('x-request-id')).toBe(id1);
    const reader = sseReader(res);
    expect(contentOf([(await reader.next())!, (await reader.next())!])).toBe('t0t1');
    abort.abort();
    await vi.waitFor(() => expect(up.streams[0]!.closedEarly).toBe(true), { timeout: 10_000, interval: 20 });
    expect(up.streams[0]!.ended).toBe(false);
    expect(up.streams[0]!.sent).toBeLessThan(20);
    const { ledger, usage } = await billingOf(id1);
    // Everything the request does, its stream's debit included, is done: a second debit would be in.
    expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    await h.settled();
    expect(await prisma().ledgerEntry.count({ where: { requestId: id1 } })).toBe(1);
    expect(await usageRows(prisma(), { requestId: id1 })).toHaveLength(1);
    const input = Math.ceil(Buffer.byteLength(raw) / 4);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[input, 2, costOf(input, 2)]]);
    expect(ledger[0]!.amountMicros).toBe(-costOf(input, 2));
  });

  it('client disconnect before the engine answers: the engine request is cancelled, nothing is billed', async () => {
    const { up, id } = await scripted({ kind: 'hang' });
    const id1 = newRequestId('early-disconnect');
    const abort = new AbortController();
    const pending = post({ model: id, messages: [] }, { headers: { 'x-request-id': id1 }, signal: abort.signal });
    await vi.waitFor(() => expect(up.received).toHaveLength(1), { timeout: 10_000, interval: 20 });
    const connections = up.openConnections();
    abort.abort();
    await expect(pending).rejects.toThrow();
    await vi.waitFor(() => expect(up.openConnections()).toBeLessThan(connections), { timeout: 10_000, interval: 20 });
    // The handler has returned: nothing it could still bill is left.
    expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    await expectNotBilled(id1);
  });
});

describe('POST /v1/chat/completions: billing', () => {
  it('non-streaming: cost and remaining headers exact to the micro-dollar; ledger and usage rows match', async () => {
    const { id } = await scripted({ kind: 'ok' }); // engine usage: 12 prompt, 7 completion tokens
    const before = await h.balanceMicros();
    const res = await post({ model: id, messages: [{ role: 'user', content: 'bill me' }] });
    expect(res.status).toBe(200);
    await res.json();
    // 12 x 150001 + 7 x 600003 = 6,000,033 pico-USD -> 7 micro-USD (rounded up)
    expect(costOf(12, 7)).toBe(7n);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe('0.000007');
    expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(usd(before - 7n));
    const requestId = res.headers.get('x-request-id')!;
    const { ledger, usage } = await billingOf(requestId);
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({
      orgId: h.orgId,
      kind: 'usage',
      amountMicros: -7n,
      balanceAfterMicros: before - 7n,
      apiKeyId: h.keyId,
      requestId,
      description: `llm ${id}`,
    });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({
      orgId: h.orgId,
      apiKeyId: h.keyId,
      modelId: id,
      modality: 'llm',
      route: 'chat.completions',
      requestId,
      inputTokens: 12,
      outputTokens: 7,
      characters: 0,
      audioMillis: 0,
      costMicros: 7n,
    });
    expect(await h.balanceMicros()).toBe(before - 7n);
  });

  it('non-streaming with large usage: 1234 + 5678 tokens cost 0.003592 USD', async () => {
    const { id } = await scripted({ kind: 'ok', usage: { prompt_tokens: 1234, completion_tokens: 5678 } });
    const before = await h.balanceMicros();
    const res = await post({ model: id, messages: [] });
    // 1234 x 150001 + 5678 x 600003 = 3,591,918,268 pico-USD -> 3592 micro-USD
    expect(res.headers.get('x-svc-request-cost-usd')).toBe('0.003592');
    expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(usd(before - 3592n));
    const { ledger, usage } = await billingOf(res.headers.get('x-request-id')!);
    expect(ledger.map((l) => [l.amountMicros, l.balanceAfterMicros])).toEqual([[-3592n, before - 3592n]]);
    expect(usage.map((u) => [u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[1234, 5678, 3592n]]);
  });

  it('non-streaming without engine usage: the prompt is estimated at bytes / 4', async () => {
    const { id } = await scripted({ kind: 'ok', usage: null });
    const raw = JSON.stringify({ model: id, messages: [{ role: 'user', content: 'x'.repeat(401) }] });
    const res = await post(raw);
    expect(res.status).toBe(200);
    const { usage } = await billingOf(res.headers.get('x-request-id')!);
    expect(usage).toHaveLength(1);
    expect(usage[0]!.inputTokens).toBe(Math.ceil(Buffer.byteLength(raw) / 4));
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(usage[0]!.costMicros));
  });

  it('streaming: only the pre-request balance header; the debit follows the engine usage', async () => {
    const { id } = await scripted({ kind: 'stream', chunks: ['p', 'q', 'r'] }); // engine usage: 10 prompt, 3 completion
    const before = await h.balanceMicros();
    const res = await post({ model: id, stream: true, messages: [] });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
    expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(usd(before));
    await res.text();
    // 10 x 150001 + 3 x 600003 = 3,300,019 pico-USD -> 4 micro-USD
    const requestId = res.headers.get('x-request-id')!;
    const { ledger, usage } = await billingOf(requestId);
    expect(ledger.map((l) => [l.kind, l.amountMicros, l.balanceAfterMicros, l.apiKeyId])).toEqual([['usage', -4n, before - 4n, h.keyId]]);
    expect(usage.map((u) => [u.modelId, u.route, u.inputTokens, u.outputTokens, u.costMicros])).toEqual([[id, 'chat.completions', 10, 3, 4n]]);
    expect(await h.balanceMicros()).toBe(before - 4n);
  });

  it('402 insufficient_quota when the balance is 0, for streaming and not; the engine is not called', async () => {
    const { up, id } = await scripted({ kind: 'ok' });
    const org = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
    const key = await createApiKey(prisma(), { orgId: org.id, name: 'broke' });
    for (const stream of [false, true]) {
      const res = await post({ model: id, stream, messages: [] }, { headers: { authorization: `Bearer ${key.key}` } });
      const err = await expectError(res, 402, 'insufficient_quota', 'insufficient_quota');
      expect(err.param).toBeNull();
    }
    expect(up.received).toHaveLength(0);
    expect(await prisma().ledgerEntry.count({ where: { orgId: org.id } })).toBe(0);
  });
});

describe('POST /v1/chat/completions: upstream choice', () => {
  it('two upstreams, one down: every request succeeds via the other and the down one is marked down', async () => {
    const live = await upstream({ kind: 'ok', text: 'from live' });
    const dead = await deadUrl();
    // The dead upstream is the weighted pick (weight 1000 against 1, Math.random fixed at 0.5).
    const id = await model(h, [
      { url: dead, weight: 1000 },
      { url: live.baseUrl, weight: 1 },
    ]);
    const entries = h.runtime.ctx.registry.all().find((m) => m.id === id)!.upstreams;
    const deadEntry = entries.find((u) => u.url === dead)!;
    const liveEntry = entries.find((u) => u.url === live.baseUrl)!;
    expect(h.runtime.ctx.registry.healthOf(deadEntry.id)).not.toBe('down');
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.5);
    try {
      const first = await post({ model: id, messages: [] });
      expect(first.status).toBe(200);
      expect(((await first.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('from live');
      expect(h.runtime.ctx.registry.healthOf(deadEntry.id)).toBe('down');
    } finally {
      random.mockRestore();
    }
    for (const stream of [false, true, false, true, false]) {
      const res = await post({ model: id, stream, messages: [] });
      expect(res.status).toBe(200);
      await res.text();
    }
    expect(live.received).toHaveLength(6);
    await h.runtime.ctx.health.checkAll();
    const rows = await prisma().upstream.findMany({ where: { modelId: id } });
    expect(Object.fromEntries(rows.map((r) => [r.url, r.health]))).toEqual({ [dead]: 'down', [live.baseUrl]: 'up' });
    expect(h.runtime.ctx.registry.healthOf(deadEntry.id)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(liveEntry.id)).toBe('up');
  });

  it('all upstreams down: 502 upstream_unavailable, then 503 model_offline once known down (and after a health check)', async () => {
    const id = await model(h, [{ url: await deadUrl() }, { url: await deadUrl() }]);
    const first = await post({ model: id, messages: [] });
    await expectError(first, 502, 'upstream_unavailable', 'api_error');
    await expectNotBilled(first.headers.get('x-request-id')!);
    const second = await post({ model: id, stream: true, messages: [] });
    await expectError(second, 503, 'model_offline', 'api_error');
    await h.runtime.ctx.health.checkAll();
    const third = await post({ model: id, messages: [] });
    const err = await expectError(third, 503, 'model_offline', 'api_error');
    expect(err.message).toContain(id);
    const list = (await (await fetch(`${h.url}/v1/models`, { headers: h.headers })).json()) as { data: { id: string }[] };
    expect(list.data.map((m) => m.id)).not.toContain(id);
  });

  it('an upstream that was down serves again after a good health check', async () => {
    const up = await upstream({ kind: 'ok' });
    up.modelsStatus = 500;
    const id = await model(h, [{ url: up.baseUrl }]);
    await h.runtime.ctx.health.checkAll();
    await expectError(await post({ model: id, messages: [] }), 503, 'model_offline');
    up.modelsStatus = 200;
    await h.runtime.ctx.health.checkAll();
    const res = await post({ model: id, messages: [] });
    expect(res.status).toBe(200);
    expect(up.received).toHaveLength(1);
  });
});

describe('POST /v1/chat/completions: admission and request errors', () => {
  it('413 body_too_large just over 10 MB; exactly 10 MB is forwarded byte for byte', async () => {
    const { up, id } = await scripted({ kind: 'ok' });
    const head = `{"model":"${id}","messages":[{"role":"user","content":"hi"}],"pad":"`;
    const tail = '"}';
    const exact = head + 'x'.repeat(10 * MiB - head.length - tail.length) + tail;
    expect(Buffer.byteLength(exact)).toBe(10 * MiB);
    const over = head + 'x'.repeat(10 * MiB + 1 - head.length - tail.length) + tail;
    const big = await post(over);
    await expectError(big, 413, 'body_too_large');
    expect(up.received).toHaveLength(0);
    const ok = await post(exact);
    expect(ok.status).toBe(200);
    await ok.json();
    expect(up.received).toHaveLength(1);
    expect(up.received[0]!.body.equals(Buffer.from(exact))).toBe(true);
  });

  it.each([
    { name: 'no key', headers: { authorization: '' }, body: () => ({ model: 'x', messages: [] }), status: 401, code: 'invalid_api_key' },
    {
      name: 'unknown key',
      headers: { authorization: 'Bearer sk_svc_doesnotexist' },
      body: () => ({ model: 'x', messages: [] }),
      status: 401,
      code: 'invalid_api_key',
    },
    { name: 'malformed JSON', headers: {}, body: () => '{"model":', status: 400, code: 'invalid_json' },
    { name: 'a JSON array', headers: {}, body: () => '[1,2]', status: 400, code: 'invalid_json' },
    { name: 'no model', headers: {}, body: () => ({ messages: [] }), status: 400, code: 'invalid_request', param: 'model' },
    { name: 'unknown model', headers: {}, body: () => ({ model: 'no-such-model', messages: [] }), status: 404, code: 'model_not_found', param: 'model' },
  ])('$name -> $status $code', async ({ headers, body, status, code, param }) => {
    const res = await post(body(), { headers: headers as Record<string, string> });
    const err = await expectError(res, status, code);
    if (param !== undefined) expect(err.param).toBe(param);
  });

  it('404 model_not_found for a disabled model and for a non-LLM model; the engine is not called', async () => {
    const up = await upstream({ kind: 'ok' });
    const disabled = await model(h, [{ url: up.baseUrl }], { status: 'disabled' });
    const tts = await model(h, [{ url: up.baseUrl }], { modality: 'tts' });
    for (const id of [disabled, tts]) await expectError(await post({ model: id, messages: [] }), 404, 'model_not_found');
    expect(up.received).toHaveLength(0);
  });
});

describe('GET /v1/models', () => {
  it('lists the active models that have a healthy upstream, sorted, in the OpenAI list shape', async () => {
    const up = await upstream({ kind: 'ok' });
    const sick = await upstream({ kind: 'ok' });
    sick.modelsStatus = 503;
    const g = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
    try {
      await model(g, [{ url: up.baseUrl }], { id: 'zeta-llm' });
      await model(g, [{ url: up.baseUrl }], { id: 'alpha-llm' });
      await model(g, [{ url: up.baseUrl }, { url: await deadUrl() }], { id: 'mixed-llm' });
      await model(g, [{ url: sick.baseUrl }], { id: 'sick-llm' });
      await model(g, [{ url: await deadUrl() }], { id: 'dead-llm' });
      await model(g, [{ url: up.baseUrl }], { id: 'off-llm', status: 'disabled' });
      await model(g, [{ url: up.baseUrl }], { id: 'speech-tts', modality: 'tts' });
      await g.runtime.ctx.health.checkAll();
      const res = await fetch(`${g.url}/v1/models`, { headers: { authorization: g.headers.authorization! } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { object: string; data: { id: string; object: string; created: number; owned_by: string }[] };
      expect(body.object).toBe('list');
      const ids = body.data.map((m) => m.id);
      expect(ids).toEqual([...ids].sort());
      // Platform models the runtime may seed by itself are not this test's business.
      const mine = ['alpha-llm', 'dead-llm', 'mixed-llm', 'off-llm', 'sick-llm', 'speech-tts', 'zeta-llm'];
      expect(ids.filter((x) => mine.includes(x))).toEqual(['alpha-llm', 'mixed-llm', 'speech-tts', 'zeta-llm']);
      for (const m of body.data) {
        expect(m.object).toBe('model');
        expect(Number.isInteger(m.created)).toBe(true);
        expect(typeof m.owned_by).toBe('string');
      }
      // A listed model answers on the chat route.
      expect((await post({ model: 'mixed-llm', messages: [] }, { g })).status).toBe(200);
    } finally {
      await g.close();
    }
  });

  it('401 invalid_api_key without a key or with an unknown key', async () => {
    await expectError(await fetch(`${h.url}/v1/models`), 401, 'invalid_api_key', 'invalid_request_error');
    await expectError(await fetch(`${h.url}/v1/models`, { headers: { authorization: 'Bearer sk_svc_nope' } }), 401, 'invalid_api_key');
  });

  it('is not metered: a zero balance still lists models', async () => {
    const org = await createOrg(h.testDb.db, { name: 'zero', creditsMicros: 0n });
    const key = await createApiKey(prisma(), { orgId: org.id, name: 'zero' });
    const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${key.key}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe('list');
  });
});
