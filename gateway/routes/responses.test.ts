// Route tests of POST /v1/responses over real HTTP: the real gateway runtime on a throw-away
// database (SQLite, or PostgreSQL with TEST_DB=postgresql) in front of scripted OpenAI-compatible
// upstreams -- one that serves the Responses API (forwarded) and one that answers 404 there and
// serves chat completions only (translated) -- and the local llama.cpp engine with a tiny GGUF
// whose reply is known exactly (translated). Clients: fetch for exact bytes, and the official
// `openai` package.
import { createServer } from 'node:net';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { writeTinyGguf, type TinyGguf } from '../../test/support/tiny-gguf.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { expectError } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n; // pico-USD per input token
const PRICE_OUT = 600_003n; // pico-USD per output token
const PRICES = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
/** Independent of the product's pricing code: exact pico total, rounded up to a micro-dollar. */
const costOf = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const usd = (micros: bigint): string => `${micros / 1_000_000n}.${(micros % 1_000_000n).toString().padStart(6, '0')}`;

let h: GatewayHarness;
let tiny: TinyGguf;
let client: OpenAI;
const ups: Record<string, ScriptedUpstream> = {};
const keys = { zero: '', limited: '', otherOrg: '', modest: '' };
// Rate-limit windows read a clock held 15 s into a minute: the one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);

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

/** A model on a fresh scripted upstream; `responsesApi: false` makes it a chat-only server. */
async function scripted(id: string, behaviour: Behaviour, options: { responsesApi?: boolean; upstreamModel?: string } = {}) {
  const up = await startScriptedUpstream(behaviour);
  up.responsesApi = options.responsesApi ?? true;
  ups[id] = up;
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id,
    modality: 'llm',
    prices: PRICES,
    upstream: { url: up.baseUrl, protocol: 'openai', upstreamModel: options.upstreamModel },
  });
}

beforeAll(async () => {
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_LLAMA_THREADS: '1' }, clock });
  const prisma = h.testDb.db.prisma;
  // The local engine first, health-checked alone (the scripted upstreams need no check: an
  // upstream not yet checked is used, and a check of everything at once is slow on a busy machine).
  await upsertModel(prisma, checkProtocol, { id: 'a-tts', modality: 'tts', upstream: { url: 'local:flite', protocol: 'flite' } });
  mkdirSync(join(h.testDb.dataDir, 'models'), { recursive: true });
  tiny = await writeTinyGguf(join(h.testDb.dataDir, 'models', 'local-llm.gguf'));
  await upsertModel(prisma, checkProtocol, { id: 'local-llm', modality: 'llm', prices: PRICES, upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp' } });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  await scripted('native', { kind: 'ok', text: 'Hello from the scripted upstream.' });
  await scripted('native-renamed', { kind: 'ok' }, { upstreamModel: 'engine-name' });
  await scripted('native-stream', { kind: 'stream', chunks: ['Voice ', 'agents ', 'talk', '.'] });
  await scripted('native-stream-no-usage', { kind: 'stream', chunks: ['a', 'b', 'c'], usage: null });
  await scripted('native-dies', { kind: 'stream', chunks: ['par', 'tial', 'never'], dieAfter: 2, delayMs: 20 });
  await scripted('chat-only', { kind: 'ok', text: 'Translated hello.', usage: { prompt_tokens: 21, completion_tokens: 3 } }, { responsesApi: false });
  await scripted('chat-only-big', { kind: 'ok', text: 'w'.repeat(16_000) }, { responsesApi: false });
  await scripted('chat-only-stream', { kind: 'stream', chunks: ['Spoken ', 'words ', 'flow', '.'] }, { responsesApi: false });
  await scripted('chat-only-dies', { kind: 'stream', chunks: ['one ', 'two ', 'three'], dieAfter: 2, delayMs: 20 }, { responsesApi: false });
  // A chat stream that ends with an error event (what a gateway relays when its engine dies).
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'x', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const errorStream = `${chunk('half ')}${chunk('said')}data: ${JSON.stringify({ error: { message: 'The model upstream closed the stream unexpectedly.', type: 'api_error', code: 'upstream_error', param: null } })}\n\ndata: [DONE]\n\n`;
  await scripted('chat-only-error-event', { kind: 'raw', status: 200, contentType: 'text/event-stream', body: errorStream }, { responsesApi: false });
  await scripted('engine-400', {
    kind: 'error',
    status: 400,
    body: { error: { message: 'max_output_tokens must be at least 16', type: 'invalid_request_error', param: 'max_output_tokens', code: null } },
  });
  await scripted('engine-500', { kind: 'error', status: 500, body: { error: { message: 'CUDA out of memory' } } });
  // After the health check: its first request finds it unreachable (then it is marked down).
  await upsertModel(prisma, checkProtocol, { id: 'down', modality: 'llm', prices: PRICES, upstream: { url: await deadUrl(), protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();

  const zeroOrg = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  keys.zero = (await createApiKey(prisma, { orgId: zeroOrg.id, name: 'zero' })).key;
  keys.limited = (await createApiKey(prisma, { orgId: h.orgId, name: 'one a minute', rateLimitRpm: 1 })).key;
  const other = await createOrg(h.testDb.db, { name: 'other', creditsMicros: 10_000_000n });
  keys.otherOrg = (await createApiKey(prisma, { orgId: other.id, name: 'other' })).key;
  const modest = await createOrg(h.testDb.db, { name: 'modest', creditsMicros: 100_000n });
  keys.modest = (await createApiKey(prisma, { orgId: modest.id, name: 'modest' })).key;
  client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(Object.values(ups).map((u) => u.close()));
  await h?.close();
});

let rid = 0;
const requestId = (label: string) => `resp-${label}-${++rid}-${Date.now()}`;

function post(body: string | object, options: { key?: string; requestId?: string } = {}) {
  return fetch(`${h.url}/v1/responses`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${options.key ?? h.key}`,
      'content-type': 'application/json',
      ...(options.requestId ? { 'x-request-id': options.requestId } : {}),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** The usage row of one request, once written (a stream's debit lands after its last byte). */
async function usageOf(id: string) {
  await vi.waitFor(async () => expect(await usageRows(h.testDb.db.prisma, { requestId: id })).toHaveLength(1), { timeout: 10_000, interval: 20 });
  return (await usageRows(h.testDb.db.prisma, { requestId: id }))[0]!;
}

async function expectNotBilled(id: string) {
  await h.settled();
  expect(await h.testDb.db.prisma.ledgerEntry.count({ where: { requestId: id } })).toBe(0);
}

interface StreamEvent {
  type: string;
  sequence_number?: number;
  delta?: string;
  response?: { status: string; usage: { input_tokens: number; output_tokens: number } | null; output: { type: string; content?: { text: string }[] }[] };
  [k: string]: unknown;
}

/** Events of a Responses stream, checking that each `event:` line names its data's type. */
function streamEvents(text: string): StreamEvent[] {
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      const lines = block.split('\n');
      const data = JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) as StreamEvent;
      const named = lines.find((l) => l.startsWith('event: '));
      if (named) expect(named).toBe(`event: ${data.type}`);
      return data;
    });
}

const textOf = (events: StreamEvent[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');

// ---------------------------------------------------------------------------------------

describe('an engine that serves the Responses API: forwarded', () => {
  it('non-streaming: the engine answer as it is, usage metered exactly, the client bytes forwarded unchanged', async () => {
    const id = requestId('native');
    const sent = '{"model":"native","input":"Say hello","temperature":0.2,"seed":12345678901234567890,"max_output_tokens":20}';
    const res = await post(sent, { requestId: id });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; output: { content: { text: string }[] }[]; usage: { input_tokens: number; output_tokens: number } };
    expect(body.object).toBe('response');
    expect(body.output[0]!.content[0]!.text).toBe('Hello from the scripted upstream.');
    expect(body.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
    const got = ups.native!.received.at(-1)!;
    expect(got.path).toBe('/v1/responses');
    expect(got.body.toString()).toBe(sent);
    const cost = costOf(12, 7);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    expect(await usageOf(id)).toMatchObject({ modelId: 'native', modality: 'llm', route: 'responses', inputTokens: 12, outputTokens: 7, costMicros: cost });
  });

  it('the upstream model name replaces `model` and nothing else', async () => {
    const sent = '{"input": "x",  "model": "native-renamed", "n":1e2}';
    const res = await post(sent);
    expect(res.status).toBe(200);
    expect(ups['native-renamed']!.received.at(-1)!.body.toString()).toBe('{"input": "x",  "model": "engine-name", "n":1e2}');
  });

  it('streaming: the events relayed as sent, billed from response.completed usage', async () => {
    const id = requestId('native-stream');
    const res = await post({ model: 'native-stream', input: 'Talk', stream: true }, { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
    expect(res.headers.get('x-svc-credits-remaining-usd')).toMatch(/^\d+\.\d{6}$/);
    const events = streamEvents(await res.text());
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(textOf(events)).toBe('Voice agents talk.');
    expect(events.at(-1)).toMatchObject({ type: 'response.completed', response: { usage: { input_tokens: 10, output_tokens: 4 } } });
    expect(await usageOf(id)).toMatchObject({ route: 'responses', inputTokens: 10, outputTokens: 4, costMicros: costOf(10, 4) });
  });

  it('a stream without usage is billed by estimate: prompt bytes / 4 and one token per delta', async () => {
    const id = requestId('no-usage');
    const sent = JSON.stringify({ model: 'native-stream-no-usage', input: 'Count to three please', stream: true });
    const res = await post(sent, { requestId: id });
    expect(textOf(streamEvents(await res.text()))).toBe('abc');
    const input = Math.ceil(Buffer.byteLength(sent) / 4);
    expect(await usageOf(id)).toMatchObject({ inputTokens: input, outputTokens: 3, costMicros: costOf(input, 3) });
  });

  it('an engine that dies mid-stream: what came is relayed, then an error event; billed for what was delivered', async () => {
    const id = requestId('native-dies');
    const res = await post({ model: 'native-dies', input: 'x', stream: true }, { requestId: id });
    expect(res.status).toBe(200);
    const events = streamEvents(await res.text());
    expect(textOf(events)).toBe('partial');
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'error', code: 'upstream_error', param: null });
    expect(last.sequence_number).toBe(events.at(-2)!.sequence_number! + 1);
    const row = await usageOf(id);
    expect(row.outputTokens).toBe(2);
  });

  it('the official openai client: responses.create and responses.stream', async () => {
    const r = await client.responses.create({ model: 'native', input: 'Say hello' });
    expect(r.output_text).toBe('Hello from the scripted upstream.');
    const stream = client.responses.stream({ model: 'native-stream', input: 'Talk' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(deltas.join('')).toBe('Voice agents talk.');
    expect(final.output_text).toBe('Voice agents talk.');
  });
});

describe('an engine with chat completions only: translated', () => {
  it('non-streaming: one 404 probe, then chat; the Response shape; usage from the chat answer, metered exactly', async () => {
    const up = ups['chat-only']!;
    const before = up.received.length;
    const id = requestId('chat-only');
    const res = await post(
      {
        model: 'chat-only',
        instructions: 'Be brief.',
        input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }],
        max_output_tokens: 30,
        temperature: 0.5,
      },
      { requestId: id },
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'chat-only',
      instructions: 'Be brief.',
      max_output_tokens: 30,
      temperature: 0.5,
      error: null,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Translated hello.', annotations: [] }] }],
      usage: {
        input_tokens: 21,
        output_tokens: 3,
        total_tokens: 24,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      },
    });
    const sent = up.received.slice(before);
    expect(sent.map((r) => r.path)).toEqual(['/v1/responses', '/v1/chat/completions']);
    expect(JSON.parse(sent[1]!.body.toString())).toEqual({
      model: 'chat-only',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      max_tokens: 30,
      temperature: 0.5,
    });
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(costOf(21, 3)));
    expect(await usageOf(id)).toMatchObject({ route: 'responses', inputTokens: 21, outputTokens: 3, costMicros: costOf(21, 3) });
    // Remembered: the next request goes to chat directly.
    await post({ model: 'chat-only', input: 'again' });
    expect(up.received.slice(before + 2).map((r) => r.path)).toEqual(['/v1/chat/completions']);
  });

  it('streaming: the Responses events, the exact text, usage from the chat usage chunk the gateway asked for', async () => {
    const id = requestId('chat-stream');
    const res = await post({ model: 'chat-only-stream', input: 'Talk', stream: true }, { requestId: id });
    expect(res.status).toBe(200);
    const events = streamEvents(await res.text());
    expect(events[0]!.type).toBe('response.created');
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(textOf(events)).toBe('Spoken words flow.');
    const done = events.at(-1)!;
    expect(done).toMatchObject({ type: 'response.completed', response: { status: 'completed', usage: { input_tokens: 10, output_tokens: 4 } } });
    expect(done.response!.output[0]!.content![0]!.text).toBe('Spoken words flow.');
    const chatReq = JSON.parse(ups['chat-only-stream']!.received.at(-1)!.body.toString()) as Record<string, unknown>;
    expect(chatReq.stream_options).toEqual({ include_usage: true });
    expect(await usageOf(id)).toMatchObject({ inputTokens: 10, outputTokens: 4, costMicros: costOf(10, 4) });
  });

  it('an engine that dies mid-stream: the deltas so far, then the error event; billed for what was delivered', async () => {
    const id = requestId('chat-dies');
    const sent = JSON.stringify({ model: 'chat-only-dies', input: 'x', stream: true });
    const events = streamEvents(await (await post(sent, { requestId: id })).text());
    expect(textOf(events)).toBe('one two ');
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'upstream_error' });
    expect(events.some((e) => e.type === 'response.completed')).toBe(false);
    expect(await usageOf(id)).toMatchObject({ inputTokens: Math.ceil(Buffer.byteLength(sent) / 4), outputTokens: 2 });
  });

  it('a chat stream that ends with an error event ends as a failed Responses stream, not a completed one', async () => {
    const id = requestId('chat-error-event');
    const events = streamEvents(await (await post({ model: 'chat-only-error-event', input: 'x', stream: true }, { requestId: id })).text());
    expect(textOf(events)).toBe('half said');
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'upstream_error', message: 'The model upstream closed the stream unexpectedly.' });
    expect(events.some((e) => e.type === 'response.completed')).toBe(false);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect((await usageOf(id)).outputTokens).toBe(2);
  });

  it('item_reference to an earlier answer is resolved for its own org only', async () => {
    const first = (await (await post({ model: 'chat-only', input: 'Q1' })).json()) as { output: { id: string }[] };
    const msgId = first.output[0]!.id;
    const res = await post({
      model: 'chat-only',
      input: [
        { role: 'user', content: 'Q1' },
        { type: 'item_reference', id: msgId },
        { role: 'user', content: 'Q2' },
      ],
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(ups['chat-only']!.received.at(-1)!.body.toString()).messages).toEqual([
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'Translated hello.' },
      { role: 'user', content: 'Q2' },
    ]);
    const id = requestId('foreign-ref');
    const err = await expectError(await post({ model: 'chat-only', input: [{ type: 'item_reference', id: msgId }] }, { key: keys.otherOrg, requestId: id }), {
      status: 400,
      code: 'invalid_request',
      param: 'input[0]',
    });
    expect(err.message).toContain(msgId);
    await expectNotBilled(id);
  });

  it('what chat cannot carry is refused before the engine, not billed', async () => {
    const up = ups['chat-only']!;
    for (const [body, param] of [
      [{ model: 'chat-only', input: 'x', previous_response_id: 'resp_123' }, 'previous_response_id'],
      [{ model: 'chat-only', input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0]'],
      [{ model: 'chat-only', input: 'x', top_logprobs: 3 }, 'top_logprobs'],
    ] as const) {
      const before = up.received.length;
      const id = requestId('untranslatable');
      await expectError(await post(body, { requestId: id }), { status: 400, code: 'invalid_request', param });
      expect(up.received.length).toBe(before);
      await expectNotBilled(id);
    }
  });
});

describe('item references: counted and sized before anything is built', () => {
  /** A stored item of about 16 KB in the key's org, as a translated answer keeps it. */
  async function bigItem(key = h.key): Promise<string> {
    const res = await post({ model: 'chat-only-big', input: 'Tell me everything.' }, { key });
    expect(res.status).toBe(200);
    return ((await res.json()) as { output: { id: string }[] }).output[0]!.id;
  }
  const references = (id: string, n: number) => Array.from({ length: n }, () => ({ type: 'item_reference', id }));

  async function expectRefused(body: string | object, key: string, expected: { status: number; code: string; param: string | null }): Promise<string> {
    const up = ups['chat-only-big']!;
    const before = up.received.length;
    const id = requestId('references');
    const err = await expectError(await post(body, { key, requestId: id }), expected);
    expect(up.received.length).toBe(before);
    await expectNotBilled(id);
    return err.message;
  }

  it('more than 1,000 references is 400 naming input, counted before the body is parsed', async () => {
    const message = await expectRefused({ model: 'chat-only-big', input: references('msg_unknown', 1001) }, h.key, {
      status: 400,
      code: 'invalid_request',
      param: 'input',
    });
    expect(message).toBe('input: at most 1000 item references per request (more given, counted before the body is parsed); send the items themselves.');
  });

  it('more references written with escapes are counted after the parse', async () => {
    const escaped = JSON.stringify({ model: 'chat-only-big', input: references('msg_unknown', 1001) }).replaceAll('"item_reference"', '"item\\u005freference"');
    const message = await expectRefused(escaped, h.key, { status: 400, code: 'invalid_request', param: 'input' });
    expect(message).toBe('input: at most 1000 item references per request (1001 given); send the items themselves.');
  });

  it('references that expand past the 10 MiB body limit are 413: a small body cannot become gigabytes', async () => {
    const item = await bigItem();
    // About 35 KB of references; about 11 MB of items.
    const message = await expectRefused({ model: 'chat-only-big', input: references(item, 700) }, h.key, {
      status: 413,
      code: 'body_too_large',
      param: 'input',
    });
    expect(message).toBe('input: with its item references expanded, the request is larger than 10485760 bytes.');
  });

  it('the reservation counts the expanded input: 402 where the raw body alone would be affordable', async () => {
    const item = await bigItem(keys.modest);
    const body = { model: 'chat-only-big', input: references(item, 600), max_output_tokens: 16 };
    await expectRefused(body, keys.modest, { status: 402, code: 'insufficient_quota', param: null });
    // The same number of bytes as plain text is affordable.
    const plain = await post({ model: 'chat-only-big', input: 'p'.repeat(JSON.stringify(body.input).length), max_output_tokens: 16 }, { key: keys.modest });
    expect(plain.status).toBe(200);
  });
});

describe('the local llama.cpp engine: translated', () => {
  it('non-streaming: exactly the model reply; usage from the engine, metered exactly', async () => {
    const id = requestId('llama');
    const res = await post({ model: 'local-llm', input: 'Say something.' }, { requestId: id });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { output: { content: { text: string }[] }[]; usage: { input_tokens: number; output_tokens: number } };
    expect(body.output[0]!.content[0]!.text).toBe(tiny.reply);
    expect(body.usage.output_tokens).toBeGreaterThanOrEqual(tiny.replyTokens);
    expect(body.usage.input_tokens).toBeGreaterThan(5);
    const cost = costOf(body.usage.input_tokens, body.usage.output_tokens);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    expect(await usageOf(id)).toMatchObject({
      modelId: 'local-llm',
      inputTokens: body.usage.input_tokens,
      outputTokens: body.usage.output_tokens,
      costMicros: cost,
    });
  });

  it('streaming through the official openai client: the reply token by token, the same usage as billed', async () => {
    const stream = client.responses.stream({ model: 'local-llm', input: 'Say something.' });
    let deltas = 0;
    stream.on('response.output_text.delta', () => deltas++);
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(tiny.reply);
    expect(deltas).toBeGreaterThanOrEqual(tiny.replyTokens - 1);
    expect(final.usage!.output_tokens).toBeGreaterThanOrEqual(tiny.replyTokens);
    // The stream was read to its end, so it was debited; on SQLite the row commits just after.
    await h.settled();
    const row = (await usageRows(h.testDb.db.prisma, { orgId: h.orgId })).filter((r) => r.modelId === 'local-llm').at(-1)!;
    expect(row).toMatchObject({ inputTokens: final.usage!.input_tokens, outputTokens: final.usage!.output_tokens });
  });

  it('the engine refusing what it cannot do (tools) is the caller 400, with its param', async () => {
    const id = requestId('llama-tools');
    const err = await expectError(
      await post({ model: 'local-llm', input: 'x', tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }] }, { requestId: id }),
      { status: 400, code: 'invalid_request', param: 'tools' },
    );
    expect(err.message).toMatch(/tools/);
    await expectNotBilled(id);
  });
});

describe('errors, as chat answers them', () => {
  it('401 without a key or with a bad one; 402 at zero balance; nothing billed', async () => {
    const noKey = await fetch(`${h.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'native', input: 'x' }),
    });
    await expectError(noKey, { status: 401, code: 'invalid_api_key', param: null, type: 'invalid_request_error' });
    await expectError(await post({ model: 'native', input: 'x' }, { key: 'sk_svc_not_a_real_key_0000000000000000000' }), {
      status: 401,
      code: 'invalid_api_key',
      param: null,
    });
    const id = requestId('zero');
    await expectError(await post({ model: 'native', input: 'x' }, { key: keys.zero, requestId: id }), {
      status: 402,
      code: 'insufficient_quota',
      param: null,
      type: 'insufficient_quota',
    });
    await expectNotBilled(id);
  });

  it('429 past the key rate limit, with Retry-After', async () => {
    expect((await post({ model: 'native', input: 'x' }, { key: keys.limited })).status).toBe(200);
    const res = await post({ model: 'native', input: 'x' }, { key: keys.limited });
    await expectError(res, { status: 429, code: 'rate_limit_exceeded', param: null, type: 'rate_limit_error' });
    expect(res.headers.get('retry-after')).toBe('45');
  });

  it.each([
    ['an unknown model', { model: 'no-such-model', input: 'x' }, 404, 'model_not_found', 'model'],
    ['a tts model', { model: 'a-tts', input: 'x' }, 404, 'model_not_found', 'model'],
    ['no model', { input: 'x' }, 400, 'invalid_request', 'model'],
    ['not JSON', '{"model":', 400, 'invalid_json', null],
    ['an engine 400', { model: 'engine-400', input: 'x', max_output_tokens: 1 }, 400, 'invalid_request', 'max_output_tokens'],
    ['an engine 500', { model: 'engine-500', input: 'x' }, 502, 'upstream_error', null],
    ['an unreachable engine', { model: 'down', input: 'x' }, 502, 'upstream_unavailable', null],
  ] as const)('%s', async (_name, body, status, code, param) => {
    const id = requestId('err');
    await expectError(await post(body, { requestId: id }), { status, code, param });
    await expectNotBilled(id);
  });

  it('the official client raises the typed errors with our code', async () => {
    const e = await client.responses.create({ model: 'no-such-model', input: 'x' }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect((e as InstanceType<typeof OpenAI.APIError>).code).toBe('model_not_found');
    const broke = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: keys.zero, maxRetries: 0 });
    const q = await broke.responses.create({ model: 'native', input: 'x' }).catch((err: unknown) => err);
    expect((q as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
  });
});
