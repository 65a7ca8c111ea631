// GET /v1/responses upgraded to a WebSocket (OpenAI's Responses WebSocket mode:
// developers.openai.com/api/docs/guides/websocket-mode and .../api/reference/resources/responses/
// websocket-events) over real sockets: the real gateway runtime on a throw-away database (SQLite,
// or PostgreSQL with TEST_DB=postgresql) in front of scripted OpenAI-compatible upstreams, one
// that serves the Responses API (forwarded) and one with chat completions only (translated).
// Clients: the official `openai` package's ResponsesWS, unmodified but for its base URL, and a raw
// `ws` socket for the errors and bounds. Timers (idle, maximum length) run on the test's clock.
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import type { ResponsesServerEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import WebSocket from 'ws';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { startScriptedUpstream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { EventLog, socketEvents } from '../../test/support/socket-events.ts';
import { refusedUpgrade } from '../../test/support/stt-routes.ts';
import { until } from '../../test/support/poll.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { RESPONSES_SOCKET_LIMITS } from '../llm/responses-socket.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n; // pico-USD per input token
const PRICE_OUT = 600_003n; // pico-USD per output token
/** Independent of the product's pricing code: exact pico total, rounded up to a micro-dollar. */
const costOf = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;

let h: GatewayHarness;
const ups: Record<string, ScriptedUpstream> = {};
// Held 15 s into a minute, moved by whole minutes: the rate-limit windows keep their place.
const clock = manualClock(A_WINDOW_START + 15_000);

async function scripted(id: string, behaviour: Behaviour, responsesApi = true): Promise<void> {
  const up = await startScriptedUpstream(behaviour);
  up.responsesApi = responsesApi;
  ups[id] = up;
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id,
    modality: 'llm',
    prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
    upstream: { url: up.baseUrl, protocol: 'openai' },
  });
}

/** A fresh org with `credits` and a key of its own: its balance and holds are the test's alone. */
async function orgWithKey(name: string, credits: bigint) {
  const org = await createOrg(h.testDb.db, { name, creditsMicros: credits });
  const { key, id } = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name });
  return { orgId: org.id, key, keyId: id };
}

async function orgState(orgId: string) {
  await h.settled();
  const org = await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  return { balance: org.balanceMicros, held: org.heldMicros };
}

beforeAll(async () => {
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' }, clock });
  await scripted('native-stream', { kind: 'stream', chunks: ['Voice ', 'agents ', 'talk', '.'] });
  await scripted('native-dies', { kind: 'stream', chunks: ['par', 'tial', 'never'], dieAfter: 2, delayMs: 20 });
  await scripted('chat-stream', { kind: 'stream', chunks: ['Spoken ', 'words ', 'flow', '.'] }, false);
  // Asked to stream, it answers with one whole completion: the socket still gets the response's ending.
  await scripted('chat-whole', { kind: 'ok', text: 'All at once.', usage: { prompt_tokens: 21, completion_tokens: 3 } }, false);
  await scripted('hang', { kind: 'hang' });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(Object.values(ups).map((u) => u.close()));
  await h?.close();
});

type Event = {
  type: string;
  status?: number;
  sequence_number?: number;
  delta?: string;
  error?: { type: string; code: string; message: string; param: string | null };
  response?: { id: string; status: string; output: unknown[]; usage: { input_tokens: number; output_tokens: number } | null };
};

let seq = 0;
const wsBase = () => h.url.replace(/^http/, 'ws');

/** A raw socket on /v1/responses, closed when the test ends however it ends. */
async function open(options: { key?: string } = {}) {
  const requestId = `responses-ws-${++seq}-${Date.now()}`;
  const ws = new WebSocket(`${wsBase()}/v1/responses`, { headers: { authorization: `Bearer ${options.key ?? h.key}`, 'x-request-id': requestId } });
  const { log, closed } = socketEvents<Event>(ws);
  ws.on('error', () => {});
  onTestFinished(async () => {
    if (ws.readyState !== ws.CLOSED) ws.terminate();
    await closed;
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const send = (m: unknown) => ws.send(typeof m === 'string' ? m : JSON.stringify(m));
  const create = (body: Record<string, unknown>) => send({ type: 'response.create', ...body });
  /** The events of the next response, through its ending (completed, incomplete, failed) or an error event. */
  const next = () =>
    log.through((e) => e.type === 'error' || e.type === 'response.completed' || e.type === 'response.incomplete' || e.type === 'response.failed');
  return { ws, log, closed, requestId, send, create, next };
}

const textOf = (events: Event[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');

const lastBody = (id: string) => JSON.parse(ups[id]!.received.at(-1)!.body.toString()) as Record<string, unknown>;

async function usageOf(requestId: string, count: number) {
  await vi.waitFor(async () => expect(await usageRows(h.testDb.db.prisma, { requestId })).toHaveLength(count), { timeout: 10_000, interval: 20 });
  return usageRows(h.testDb.db.prisma, { requestId });
}

const wsError = (status: number, code: string, param: string | null = null, type = 'invalid_request_error') => ({
  type: 'error',
  status,
  error: { type, code, message: expect.any(String), param },
});

describe('the official openai client (ResponsesWS)', () => {
  it('two responses on one socket, the second continuing the first by previous_response_id with store false; each metered exactly', async () => {
    const payer = await orgWithKey('ws-sdk', 10_000_000n);
    const requestId = `responses-ws-sdk-${Date.now()}`;
    const client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: payer.key, maxRetries: 0 });
    const rws = new ResponsesWS(client, { headers: { 'x-request-id': requestId } });
    const log = new EventLog<ResponsesServerEvent>();
    rws.on('event', log.push);
    const errors: unknown[] = [];
    rws.on('error', (e) => errors.push(e));
    const closed = new Promise<number>((resolve) => rws.on('close', (code) => resolve(code)));
    onTestFinished(async () => {
      rws.close();
      await closed;
    });

    rws.send({ type: 'response.create', model: 'chat-stream', instructions: 'Be brief.', input: 'Hello', store: false });
    const first = await log.through((e) => e.type === 'response.completed');
    expect(first[0]!.type).toBe('response.created');
    expect(first.map((e) => e.sequence_number)).toEqual(first.map((_, i) => i));
    const deltas = first.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta);
    expect(deltas.join('')).toBe('Spoken words flow.');
    const done = first.at(-1) as Extract<ResponsesServerEvent, { type: 'response.completed' }>;
    expect(done.response.usage).toMatchObject({ input_tokens: 10, output_tokens: 4 });

    // Only the new input: the socket holds the first response (store false: nothing kept elsewhere).
    rws.send({ type: 'response.create', model: 'chat-stream', input: 'And then?', previous_response_id: done.response.id, store: false });
    const second = await log.through((e) => e.type === 'response.completed');
    expect(second.filter((e) => e.type === 'response.output_text.delta').length).toBe(4);
    // The engine got the whole conversation; the first instructions are not carried (OpenAI's rule).
    expect(lastBody('chat-stream').messages).toEqual([
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Spoken words flow.' },
      { role: 'user', content: 'And then?' },
    ]);
    expect(errors).toEqual([]);

    const rows = await usageOf(requestId, 2);
    for (const r of rows)
      expect(r).toMatchObject({ modelId: 'chat-stream', modality: 'llm', route: 'responses', inputTokens: 10, outputTokens: 4, costMicros: costOf(10, 4) });
    expect(await orgState(payer.orgId)).toEqual({ balance: 10_000_000n - 2n * costOf(10, 4), held: 0n });
  });

  it('an engine that serves the Responses API: its events relayed one a message; the request it gets has no `type`, streams, and continues by items', async () => {
    const client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
    const rws = new ResponsesWS(client);
    const log = new EventLog<ResponsesServerEvent>();
    rws.on('event', log.push);
    const closed = new Promise<number>((resolve) => rws.on('close', (code) => resolve(code)));
    onTestFinished(async () => {
      rws.close();
      await closed;
    });
    rws.send({ type: 'response.create', model: 'native-stream', input: 'First', store: false });
    const first = await log.through((e) => e.type === 'response.completed');
    expect(first.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(lastBody('native-stream')).toEqual({ model: 'native-stream', input: 'First', store: false, stream: true });
    const id = (first.at(-1) as Extract<ResponsesServerEvent, { type: 'response.completed' }>).response.id;

    rws.send({ type: 'response.create', model: 'native-stream', input: [{ role: 'user', content: 'Next' }], previous_response_id: id, store: false });
    await log.through((e) => e.type === 'response.completed');
    expect(lastBody('native-stream')).toEqual({
      model: 'native-stream',
      input: [
        { role: 'user', content: 'First' },
        {
          type: 'message',
          id: 'msg_scripted',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'Voice agents talk.', annotations: [] }],
        },
        { role: 'user', content: 'Next' },
      ],
      store: false,
      stream: true,
    });
  });
});

describe('responses on a raw socket', () => {
  it('an engine that answers whole: the response.completed event alone, billed from its usage', async () => {
    const s = await open();
    s.create({ model: 'chat-whole', input: 'Hi' });
    const events = await s.next();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: 'response.completed',
      sequence_number: 0,
      response: { status: 'completed', usage: { input_tokens: 21, output_tokens: 3 } },
    });
    const [row] = await usageOf(s.requestId, 1);
    expect(row).toMatchObject({ route: 'responses', inputTokens: 21, outputTokens: 3, costMicros: costOf(21, 3) });
  });

  it('an engine that dies mid-stream: the deltas so far, then an error event in the WebSocket shape; the socket goes on; billed for what came', async () => {
    const s = await open();
    s.create({ model: 'native-dies', input: 'x' });
    const events = await s.next();
    expect(textOf(events)).toBe('partial');
    const last = events.at(-1)!;
    expect(last).toEqual({
      type: 'error',
      sequence_number: events.at(-2)!.sequence_number! + 1,
      error: { type: 'api_error', code: 'upstream_error', message: expect.any(String), param: null },
    });
    const [row] = await usageOf(s.requestId, 1);
    expect(row!.outputTokens).toBe(2);
    s.create({ model: 'chat-whole', input: 'still there?' });
    expect((await s.next()).at(-1)!.type).toBe('response.completed');
  });

  it('bad messages: an error event each (invalid_json, unknown type, binary, background, unknown model, previous_response_id), the socket stays open, none billed', async () => {
    const s = await open();
    s.create({ model: 'chat-whole', input: 'first, properly' });
    expect((await s.next()).at(-1)!.type).toBe('response.completed');
    const cases: [unknown, ReturnType<typeof wsError>][] = [
      ['{not json', wsError(400, 'invalid_json')],
      ['[1,2]', wsError(400, 'invalid_json')],
      [{ type: 'response.cancel' }, wsError(400, 'invalid_request', 'type')],
      [Buffer.from('{"type":"response.create"}'), wsError(400, 'invalid_request')],
      [{ type: 'response.create', model: 'chat-whole', input: 'x', background: true }, wsError(400, 'invalid_request', 'background')],
      [{ type: 'response.create', model: 'no-such-model', input: 'x' }, wsError(404, 'model_not_found', 'model')],
      [
        { type: 'response.create', model: 'chat-whole', input: 'x', previous_response_id: 'resp_unknown', store: false },
        wsError(400, 'previous_response_not_found', 'previous_response_id'),
      ],
      // Not stored here, not the socket's latest, store not false: over to the engine as over HTTP (chat cannot carry it).
      [
        { type: 'response.create', model: 'chat-whole', input: 'x', previous_response_id: 'resp_unknown' },
        wsError(400, 'invalid_request', 'previous_response_id'),
      ],
    ];
    const before = ups['chat-whole']!.received.length;
    for (const [message, expected] of cases) {
      if (Buffer.isBuffer(message)) s.ws.send(message, { binary: true });
      else s.send(message);
      expect((await s.next()).at(-1)).toEqual(expected);
    }
    expect(ups['chat-whole']!.received.length).toBe(before);
    s.create({ model: 'chat-whole', input: 'properly again' });
    expect((await s.next()).at(-1)!.type).toBe('response.completed');
    expect(await usageOf(s.requestId, 2)).toHaveLength(2);
  });

  it('a second response.create while one runs is refused with an error event; closing the socket stops the engine, nothing billed, the hold given back', async () => {
    const payer = await orgWithKey('ws-busy', 10_000_000n);
    const s = await open({ key: payer.key });
    const asked = ups.hang!.received.length;
    s.create({ model: 'hang', input: 'think long' });
    s.create({ model: 'chat-whole', input: 'me too' });
    expect((await s.next()).at(-1)).toEqual(wsError(400, 'conversation_already_has_active_response'));
    await until('the engine asked', () => ups.hang!.received.length > asked, { intervalMs: 10 });
    expect((await orgState(payer.orgId)).held).toBeGreaterThan(0n);
    s.ws.close();
    await s.closed;
    await vi.waitFor(async () => expect(await orgState(payer.orgId)).toEqual({ balance: 10_000_000n, held: 0n }), { timeout: 10_000, interval: 25 });
    expect(await usageRows(h.testDb.db.prisma, { requestId: s.requestId })).toEqual([]);
  });

  it('402: a response whose most it may cost is more than the balance is refused with an error event, before the engine; a smaller one goes', async () => {
    const payer = await orgWithKey('ws-modest', 100_000n);
    const s = await open({ key: payer.key });
    const before = ups['chat-whole']!.received.length;
    s.create({ model: 'chat-whole', input: 'x', max_output_tokens: 1_000_000 });
    expect((await s.next()).at(-1)).toEqual(wsError(402, 'insufficient_quota', null, 'insufficient_quota'));
    expect(ups['chat-whole']!.received.length).toBe(before);
    s.create({ model: 'chat-whole', input: 'x', max_output_tokens: 16 });
    expect((await s.next()).at(-1)!.type).toBe('response.completed');
    await usageOf(s.requestId, 1);
    expect(await orgState(payer.orgId)).toEqual({ balance: 100_000n - costOf(21, 3), held: 0n });
  });
});

describe('before the upgrade, and the socket’s bounds', () => {
  it('refused before the upgrade in the envelope: 401 without a key or with a wrong one, 402 with no credit', async () => {
    const broke = await orgWithKey('ws-broke', 0n);
    const cases: [Record<string, string>, number, string][] = [
      [{}, 401, 'invalid_api_key'],
      [{ authorization: 'Bearer svc_not_a_key' }, 401, 'invalid_api_key'],
      [{ authorization: `Bearer ${broke.key}` }, 402, 'insufficient_quota'],
    ];
    for (const [headers, status, code] of cases) {
      const r = await refusedUpgrade(h, {}, headers, '/v1/responses');
      expect(r.status).toBe(status);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code } });
    }
  });

  it('a plain GET is 400 upgrade_required; POST /v1/responses is unchanged', async () => {
    const r = await fetch(`${h.url}/v1/responses`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('upgrade_required');
  });

  it('a message over 1 MiB closes the socket (1009)', async () => {
    const s = await open();
    s.create({ model: 'chat-whole', input: 'x'.repeat(1024 * 1024) });
    expect((await s.closed).code).toBe(1009);
  });

  it('idle: no message and no response for 5 minutes closes it (an error event, then 1000 idle_timeout); a response running is not idle', async () => {
    const s = await open();
    const asked = ups.hang!.received.length;
    s.create({ model: 'hang', input: 'slow' });
    await until('the engine asked', () => ups.hang!.received.length > asked, { intervalMs: 10 });
    clock.advance(RESPONSES_SOCKET_LIMITS.idleMs + 60_000);
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    s.ws.close();
    await s.closed;

    const idle = await open();
    clock.advance(RESPONSES_SOCKET_LIMITS.idleMs);
    expect(await idle.closed).toEqual({ code: 1000, reason: 'idle_timeout' });
    expect(idle.log.events).toEqual([wsError(408, 'idle_timeout')]);
  });

  it('at 60 minutes: websocket_connection_limit_reached, then 1000', async () => {
    const s = await open();
    // A message every 4 minutes keeps it from being idle.
    for (let minutes = 0; minutes < 60; minutes += 4) {
      s.send({ type: 'keepalive' });
      await s.next();
      clock.advance(4 * 60_000);
    }
    expect(await s.closed).toEqual({ code: 1000, reason: 'max_duration' });
    expect(s.log.events.at(-1)).toEqual(wsError(400, 'websocket_connection_limit_reached'));
  });

  it('a revoked key ends the socket: an error event, then 1008 api_key_disabled; the running response is not billed', async () => {
    const payer = await orgWithKey('ws-revoked', 10_000_000n);
    const s = await open({ key: payer.key });
    const asked = ups.hang!.received.length;
    s.create({ model: 'hang', input: 'x' });
    await until('the engine asked', () => ups.hang!.received.length > asked, { intervalMs: 10 });
    await revokeApiKey(h.testDb.db.prisma, { id: payer.keyId });
    expect(await s.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
    expect(s.log.events.at(-1)).toEqual(wsError(401, 'api_key_disabled'));
    await vi.waitFor(async () => expect(await orgState(payer.orgId)).toEqual({ balance: 10_000_000n, held: 0n }), { timeout: 10_000, interval: 25 });
  });
});
