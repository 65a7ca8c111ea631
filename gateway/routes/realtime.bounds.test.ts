// WS /v1/realtime: what one client's events cannot make the gateway hold or run without bound
// (issue 29). A response's `input` is counted and sized before anything is built from it; a
// function call's name and call id are bounded and counted in the conversation's size; at most
// two responses run in a session, each counting against the key's cap of requests in flight
// (SVC_MAX_REQUESTS_PER_KEY is 2 here), and all of them end when the session does; a client that
// stops reading is closed once its unread events pass the outgoing buffer's cap. The real gateway
// runtime, flite for the default voice, and scripted OpenAI-compatible LLMs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { openRealtime, type RealtimeClient } from '../../test/support/realtime-client.ts';
import { startScriptedUpstream, type ScriptedUpstream, type StreamRecord } from '../../test/support/scripted-openai-upstream.ts';
import { startSttGateway } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE } from '../../test/support/tts-routes.ts';
import { MAX_CALL_ID, MAX_FUNCTION_NAME } from '../realtime/client-events.ts';
import { MAX_TEXT } from '../realtime/conversation.ts';
import { MAX_RUNNING_RESPONSES } from '../realtime/responses.ts';
import { DEFAULT_LINK_LIMITS, OUTGOING_BUFFER_FULL } from '../sessions/websocket-link.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;
let llm: ScriptedUpstream;
/** A long answer, slowly streamed: responses still running when the test acts. */
let slowLlm: ScriptedUpstream;

beforeAll(async () => {
  h = await startSttGateway({ env: { SVC_MAX_REQUESTS_PER_KEY: '2' } });
  const prisma = h.testDb.db.prisma;
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['Fine', '.'], usage: { prompt_tokens: 10, completion_tokens: 2 } });
  slowLlm = await startScriptedUpstream({
    kind: 'stream',
    chunks: Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `),
    delayMs: 100,
  });
  const prices = { inputPicoPerToken: 1_000n, outputPicoPerToken: 1_000n };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), slowLlm?.close()]);
  await h?.close();
});

async function orgWithKey() {
  const org = await createOrg(h.testDb.db, { name: 'realtime bounds', creditsMicros: 100_000_000n });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' });
  return { orgId: org.id, key: key.key, keyId: key.id };
}

async function session(key: string, model = 'rt-llm'): Promise<RealtimeClient> {
  const c = await openRealtime(h, key, { model });
  await c.next('session.created');
  return c;
}

const userText = (text: string) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });

/** `count` out-of-band text responses on the slow LLM, each running (created, its LLM request streaming); their streams. */
async function runningOutOfBand(c: RealtimeClient, count: number): Promise<StreamRecord[]> {
  const before = slowLlm.streams.length;
  for (let i = 0; i < count; i++)
    c.send({ type: 'response.create', response: { conversation: 'none', output_modalities: ['text'], input: [userText(`Question ${i}`)] } });
  // A delta of each of them (one response may send several before another's first).
  const streaming = new Set<unknown>();
  while (streaming.size < count) streaming.add((await c.next('response.output_text.delta')).response_id);
  expect(slowLlm.streams.length).toBe(before + count);
  return slowLlm.streams.slice(before);
}

const chat = (key: string) =>
  fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'rt-llm', messages: [{ role: 'user', content: 'Hi' }] }),
  });

describe('response.create input', () => {
  it('is counted and sized before anything runs: item references expanded past the conversation’s own bound, or more than 1,000 entries, are refused naming the limit', async () => {
    const { key } = await orgWithKey();
    const c = await session(key);
    c.send({ type: 'conversation.item.create', item: { id: 'big', ...userText('x'.repeat(200_000)) } });
    await c.next('conversation.item.done');
    const asked = llm.received.length;
    // Six references to 200,000 characters: 1.2 million once expanded.
    c.send({
      type: 'response.create',
      event_id: 'ev_refs',
      response: { conversation: 'none', output_modalities: ['text'], input: Array.from({ length: 6 }, () => ({ type: 'item_reference', id: 'big' })) },
    });
    const tooLarge = (await c.next('error')).error as { code: string; param: string; message: string; event_id: string };
    expect(tooLarge).toMatchObject({ code: 'invalid_request', param: 'response.input', event_id: 'ev_refs' });
    expect(tooLarge.message).toContain(`at most ${MAX_TEXT}`);
    c.send({ type: 'conversation.item.create', item: { id: 'small', ...userText('Hi') } });
    await c.next('conversation.item.done');
    c.send({
      type: 'response.create',
      response: { conversation: 'none', output_modalities: ['text'], input: Array.from({ length: 1_001 }, () => ({ type: 'item_reference', id: 'small' })) },
    });
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_request', param: 'response.input', message: expect.stringContaining('at most 1000') });
    expect(c.events.some((e) => e.type === 'response.created')).toBe(false);
    expect(llm.received.length).toBe(asked);
    // Within the bounds, references are expanded where they stand.
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        output_modalities: ['text'],
        input: [{ type: 'item_reference', id: 'small' }, userText('Again'), { type: 'item_reference', id: 'small' }],
      },
    });
    expect(((await c.next('response.done')).response as { status: string }).status).toBe('completed');
    expect((JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: unknown[] }).messages).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'user', content: 'Again' },
      { role: 'user', content: 'Hi' },
    ]);
    await c.close();
  }, 30_000);
});

describe('function call items', () => {
  it('a name longer than 64 characters or a call id longer than 128 is refused; names and call ids count in the conversation’s size', async () => {
    const { key } = await orgWithKey();
    const c = await session(key);
    const call = { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' };
    c.send({ type: 'conversation.item.create', item: { ...call, name: 'n'.repeat(MAX_FUNCTION_NAME + 1) } });
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_request', param: 'item.name' });
    c.send({ type: 'conversation.item.create', item: { ...call, call_id: 'c'.repeat(MAX_CALL_ID + 1) } });
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_request', param: 'item.call_id' });
    // A message just under the conversation's bound, then a call with no arguments: its name and call id take it over.
    const room = MAX_FUNCTION_NAME + MAX_CALL_ID - 1;
    c.send({ type: 'conversation.item.create', item: { id: 'first', ...userText('x'.repeat(MAX_TEXT - room)) } });
    await c.next('conversation.item.done');
    c.send({ type: 'conversation.item.create', item: { ...call, name: 'n'.repeat(MAX_FUNCTION_NAME), call_id: 'c'.repeat(MAX_CALL_ID), arguments: '' } });
    await c.next('conversation.item.done');
    c.send({ type: 'conversation.item.retrieve', item_id: 'first' });
    expect((await c.next('error')).error).toMatchObject({ param: 'item_id', message: expect.stringContaining('no item') });
    await c.close();
  }, 30_000);
});

describe('responses running at once', () => {
  it(`at most ${MAX_RUNNING_RESPONSES} in a session, out-of-band ones included; the next is refused with an error event`, async () => {
    const { key } = await orgWithKey();
    const c = await session(key, 'rt-slow');
    const streams = await runningOutOfBand(c, MAX_RUNNING_RESPONSES);
    c.send({ type: 'response.create', event_id: 'ev_third', response: { conversation: 'none', output_modalities: ['text'] } });
    expect((await c.next('error')).error).toMatchObject({ code: 'rate_limit_exceeded', param: 'response', event_id: 'ev_third' });
    expect(c.events.filter((e) => e.type === 'response.created')).toHaveLength(MAX_RUNNING_RESPONSES);
    // Out-of-band responses are cancelled by id.
    const ids = c.events.filter((e) => e.type === 'response.created').map((e) => (e.response as { id: string }).id);
    for (const id of ids) c.send({ type: 'response.cancel', response_id: id });
    const done = [(await c.next('response.done')).response, (await c.next('response.done')).response] as { id: string; status: string }[];
    expect(done.map((r) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect(new Set(done.map((r) => r.id))).toEqual(new Set(ids));
    await expect.poll(() => streams.every((s) => s.closedEarly)).toBe(true);
    await c.close();
  }, 30_000);

  it('each counts against the key’s cap of requests in flight, and all of them end when the client leaves', async () => {
    const { key } = await orgWithKey();
    const c = await session(key, 'rt-slow');
    const streams = await runningOutOfBand(c, 2);
    const refused = await chat(key);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    await c.close();
    await expect.poll(() => streams.every((s) => s.closedEarly), { timeout: 10_000 }).toBe(true);
    await expect.poll(async () => (await chat(key)).status, { timeout: 10_000 }).toBe(200);
  }, 30_000);

  it('a response past the key’s cap (an HTTP request holding the rest) is refused with rate_limit_exceeded', async () => {
    const { key } = await orgWithKey();
    const c = await session(key, 'rt-slow');
    await runningOutOfBand(c, 1);
    const held = new AbortController();
    const streaming = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'rt-slow', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
      signal: held.signal,
    });
    expect(streaming.status).toBe(200);
    c.send({ type: 'response.create', response: { conversation: 'none', output_modalities: ['text'] } });
    expect((await c.next('error')).error).toMatchObject({ code: 'rate_limit_exceeded', message: expect.stringContaining('requests in flight') });
    held.abort();
    await c.close();
  }, 30_000);

  it('all of them end when the key is revoked: the session closes with 1008 and their LLM requests are cancelled', async () => {
    const { key, keyId } = await orgWithKey();
    const c = await session(key, 'rt-slow');
    const streams = await runningOutOfBand(c, 2);
    await revokeApiKey(h.testDb.db.prisma, { id: keyId });
    expect(await c.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
    await expect.poll(() => streams.every((s) => s.closedEarly), { timeout: 10_000 }).toBe(true);
  }, 30_000);
});

describe('a client that stops reading', () => {
  it('is closed with 1008 outgoing_buffer_full once its unread events pass the cap, however many it asked for', async () => {
    const { key } = await orgWithKey();
    // The gateway's side of the socket, to see what it holds for the client: the sockets a shutdown would cut.
    const gatewaySockets = (h.runtime.ctx.lifecycle as unknown as { sockets: Set<WebSocket> }).sockets;
    const before = new Set(gatewaySockets);
    const c = await session(key);
    const [gatewaySide] = [...gatewaySockets].filter((s) => !before.has(s));
    c.send({ type: 'conversation.item.create', item: { id: 'large', ...userText('y'.repeat(900_000)) } });
    await c.next('conversation.item.done');
    const socket = (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    // 250 small events asking for a 900 KB reply each: 225 MB if the gateway queued them all.
    for (let i = 0; i < 250; i++) c.send({ type: 'conversation.item.retrieve', item_id: 'large' });
    await expect.poll(() => gatewaySide!.readyState, { timeout: 30_000 }).not.toBe(gatewaySide!.OPEN);
    expect(gatewaySide!.bufferedAmount).toBeLessThanOrEqual(DEFAULT_LINK_LIMITS.closeAboveBytes);
    // The client reads what was sent before the close, then the close.
    socket.resume();
    expect(await c.closed).toEqual({ code: 1008, reason: OUTGOING_BUFFER_FULL });
    // What reached the client is what the buffer and the sockets between held: a bounded part of the replies.
    expect(c.events.filter((e) => e.type === 'conversation.item.retrieved').length).toBeLessThan(50);
  }, 60_000);
});
