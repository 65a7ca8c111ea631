// ElevenLabs' streaming-input sockets (stream-input, multi-stream-input) over real sockets with a
// raw `ws` client, sending what ElevenLabs' API reference describes (elevenlabs.io/docs/
// api-reference/text-to-speech/v-1-text-to-speech-voice-id-stream-input and …/multi-stream-input;
// @elevenlabs/elevenlabs-js 2.73 has no client for these sockets): real gateway runtime, a
// throw-away SQLite or PostgreSQL database, the local flite engine. The utterance's audio sample
// for sample, ElevenLabs' message shapes, contexts, close_context and close_socket, the bounds
// and refusals, and the usage rows.
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import WebSocket from 'ws';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { EventLog, socketEvents } from '../../test/support/socket-events.ts';
import { refusedUpgrade } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, decodeRaw, expectSpeechLevel, natural, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { FIRST_MESSAGE_MAX_BYTES, FIRST_MESSAGE_MS } from './tts-socket-route.ts';

const CALL = 'Please call me tomorrow morning about the meeting.';

let h: GatewayHarness;
// The sessions' timers run on this clock: moved, not waited for.
const clock = manualClock(A_WINDOW_START + 15_000);

beforeAll(async () => {
  h = await startTtsGateway({ clock });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

type Message = { audio?: string; isFinal?: boolean; contextId?: string; error?: string; [k: string]: unknown };

let seq = 0;

async function connect(
  path: string,
  query: Record<string, string> = { model_id: 'local-flite', output_format: 'pcm_16000' },
  voice = 'flite-slt',
  key: string | null = h.key,
) {
  const requestId = `el-ws-${++seq}-${Date.now()}`;
  const url = `${h.url.replace(/^http/, 'ws')}/v1/text-to-speech/${voice}/${path}?${new URLSearchParams(query)}`;
  const ws = new WebSocket(url, { headers: { ...(key === null ? {} : { 'xi-api-key': key }), 'x-request-id': requestId } });
  const { log, closed } = socketEvents<Message>(ws);
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, log, closed, requestId, send: (m: unknown) => ws.send(typeof m === 'string' ? m : JSON.stringify(m)) };
}

const audioOf = (log: EventLog<Message>, contextId?: string) =>
  Buffer.concat(log.events.filter((m) => m.audio !== undefined && m.contextId === contextId).map((m) => Buffer.from(m.audio!, 'base64')));

async function expectBilled(requestId: string, characters: number): Promise<void> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(async () => expect((await usageRows(prisma, { requestId })).reduce((n, r) => n + r.characters, 0)).toBe(characters), {
    timeout: 10_000,
    interval: 25,
  });
  for (const r of await usageRows(prisma, { requestId }))
    expect({ route: r.route, modelId: r.modelId, costMicros: r.costMicros }).toEqual({
      route: 'elevenlabs.tts.websocket',
      modelId: 'local-flite',
      costMicros: costOf(r.characters, FLITE_PRICE),
    });
}

describe('stream-input', () => {
  it('BOS, text in pieces, EOS: flite\u2019s speech in audio messages (alignment null), then isFinal and a normal close; billed per character', async () => {
    const s = await connect('stream-input');
    s.send({ text: ' ', voice_settings: { stability: 0.5, similarity_boost: 0.8 }, generation_config: { chunk_length_schedule: [120, 160, 250, 290] } });
    for (const piece of FOX.match(/.{1,6}/gs)!) s.send({ text: piece });
    s.send({ text: '' });
    expect(await s.closed).toEqual({ code: 1000, reason: 'done' });
    const messages = s.log.events;
    expect(messages.at(-1)).toEqual({ isFinal: true });
    const chunks = messages.slice(0, -1);
    expect(chunks.length).toBeGreaterThan(0);
    for (const m of chunks) expect(Object.keys(m).sort()).toEqual(['alignment', 'audio', 'isFinal', 'normalizedAlignment']);
    for (const m of chunks) expect(m).toMatchObject({ isFinal: false, alignment: null, normalizedAlignment: null });
    const samples = decodeRaw(audioOf(s.log), 'pcm_s16le');
    expectSpeechLevel(samples);
    expect(samples.length).toBe(natural('flite', 'slt', FOX).samples.length);
    await expectBilled(s.requestId, codePoints(FOX));
  });

  it('ulaw_8000 and flush: one byte a sample at 8 kHz, the flushed text spoken before the end', async () => {
    const s = await connect('stream-input', { model_id: 'local-flite', output_format: 'ulaw_8000' });
    s.send({ text: ' ' });
    s.send({ text: CALL, flush: true });
    await s.log.first((m) => m.audio !== undefined);
    s.send({ text: '' });
    expect((await s.closed).code).toBe(1000);
    const audio = audioOf(s.log);
    expect(audio.length).toBe(Math.round((natural('flite', 'slt', CALL).samples.length * 8000) / 16000));
    expectSpeechLevel(decodeRaw(audio, 'pcm_mulaw'));
  });

  it('bad JSON: an error message ({message, error, code}) and the socket closes with 1008; nothing billed', async () => {
    const s = await connect('stream-input');
    s.send('{not json');
    expect(await s.closed).toEqual({ code: 1008, reason: 'error' });
    expect(s.log.events).toEqual([{ message: expect.stringMatching(/JSON object/), error: 'invalid_json', code: 400, param: null, request_id: s.requestId }]);
    expect(await usageRows(h.testDb.db.prisma, { requestId: s.requestId })).toEqual([]);
  });

  it('a text over 5000 characters, a speed other than 1, an unknown voice: each an error naming the field', async () => {
    const cases: [unknown, string, string, string][] = [
      [{ text: 'a'.repeat(5001) }, 'flite-slt', 'invalid_request', 'text'],
      [{ text: ' ', voice_settings: { speed: 1.1 } }, 'flite-slt', 'invalid_request', 'voice_settings.speed'],
      [{ text: ' ' }, 'no-such-voice', 'voice_not_found', 'voice_id'],
    ];
    for (const [message, voice, error, param] of cases) {
      const s = await connect('stream-input', undefined, voice);
      s.send(message);
      expect((await s.closed).code).toBe(1008);
      expect(s.log.events).toEqual([expect.objectContaining({ error, param })]);
    }
  });
});

describe('multi-stream-input', () => {
  it('two contexts side by side: each one\u2019s audio under its contextId; close_socket speaks both to their end, then closes', async () => {
    const s = await connect('multi-stream-input');
    s.send({ text: ' ', context_id: 'a' });
    s.send({ text: ' ', context_id: 'b' });
    s.send({ text: FOX, context_id: 'a' });
    s.send({ text: CALL, context_id: 'b', flush: true });
    s.send({ close_socket: true });
    expect(await s.closed).toEqual({ code: 1000, reason: 'close_socket' });
    for (const [id, text] of [
      ['a', FOX],
      ['b', CALL],
    ] as const) {
      const mine = s.log.events.filter((m) => m.contextId === id);
      expect(mine.at(-1)).toEqual({ isFinal: true, contextId: id });
      expect(decodeRaw(audioOf(s.log, id), 'pcm_s16le').length).toBe(natural('flite', 'slt', text).samples.length);
    }
    await expectBilled(s.requestId, codePoints(FOX) + codePoints(CALL));
  });

  it('close_context after an empty flush ends a context\u2019s input: the text it was given is spoken to its end, then its isFinal; a second close_context changes nothing; the others go on', async () => {
    const s = await connect('multi-stream-input');
    // As LiveKit's plugin ends each context: its text flushed, an empty flush, then close_context at once.
    s.send({ text: ' ', context_id: 'a' });
    s.send({ text: `${FOX} `, context_id: 'a', flush: true });
    s.send({ text: '', context_id: 'a', flush: true });
    s.send({ context_id: 'a', close_context: true });
    s.send({ context_id: 'a', close_context: true });
    s.send({ text: CALL, context_id: 'b', flush: true });
    await s.log.first((m) => m.contextId === 'a' && m.isFinal === true);
    s.send({ close_socket: true });
    expect(await s.closed).toEqual({ code: 1000, reason: 'close_socket' });
    const mine = s.log.events.filter((m) => m.contextId === 'a');
    expect(mine.at(-1)).toEqual({ isFinal: true, contextId: 'a' });
    expect(mine.filter((m) => m.isFinal)).toHaveLength(1);
    expect(s.log.events.some((m) => m.error !== undefined)).toBe(false);
    expect(decodeRaw(audioOf(s.log, 'a'), 'pcm_s16le').length).toBe(natural('flite', 'slt', FOX).samples.length);
    expect(decodeRaw(audioOf(s.log, 'b'), 'pcm_s16le').length).toBe(natural('flite', 'slt', CALL).samples.length);
    await expectBilled(s.requestId, codePoints(`${FOX} `) + codePoints(CALL));
  });

  it('close_context right after text (an interruption) stops the context at once: its isFinal, nothing of it after; the others go on', async () => {
    const s = await connect('multi-stream-input');
    s.send({ text: `${FOX} ${FOX} ${FOX}`, context_id: 'long', flush: true });
    await s.log.first((m) => m.contextId === 'long' && m.audio !== undefined);
    s.send({ context_id: 'long', close_context: true });
    await s.log.first((m) => m.contextId === 'long' && m.isFinal === true);
    s.send({ text: CALL, context_id: 'next', flush: true });
    s.send({ close_socket: true });
    expect((await s.closed).code).toBe(1000);
    const afterFinal = s.log.events.slice(s.log.events.findIndex((m) => m.contextId === 'long' && m.isFinal));
    expect(afterFinal.filter((m) => m.contextId === 'long')).toHaveLength(1);
    expect(decodeRaw(audioOf(s.log, 'next'), 'pcm_s16le').length).toBe(natural('flite', 'slt', CALL).samples.length);
  });

  it('a sixth context is refused (ElevenLabs allows five), with its contextId; the socket stays open', async () => {
    const s = await connect('multi-stream-input');
    for (const id of ['1', '2', '3', '4', '5', '6']) s.send({ text: ' ', context_id: id });
    const refused = await s.log.first((m) => m.error !== undefined);
    expect(refused).toMatchObject({ contextId: '6', error: 'rate_limit_exceeded', code: 429, param: 'context_id' });
    s.send({ context_id: '1', close_context: true });
    await s.log.first((m) => m.contextId === '1' && m.isFinal === true);
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    s.ws.close();
    await s.closed;
  });
});

describe('inactivity_timeout', () => {
  it('a socket with nothing sent for inactivity_timeout seconds is closed (1000 idle_timeout), not before', async () => {
    const s = await connect('multi-stream-input', { model_id: 'local-flite', output_format: 'pcm_16000', inactivity_timeout: '5' });
    s.send({ text: 'Hello.', context_id: 'a', flush: true });
    await s.log.first((m) => m.contextId === 'a' && m.audio !== undefined);
    s.send({ context_id: 'a', close_context: true });
    await s.log.first((m) => m.contextId === 'a' && m.isFinal === true);
    clock.advance(4000);
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    clock.advance(1000);
    expect(await s.closed).toEqual({ code: 1000, reason: 'idle_timeout' });
  });
});

describe('the key as xi_api_key in the first message (ElevenLabs\u2019 other way to give it)', () => {
  const keyless = async (path: 'stream-input' | 'multi-stream-input') => {
    const s = await connect(path, undefined, undefined, null);
    onTestFinished(async () => {
      if (s.ws.readyState !== WebSocket.CLOSED) s.ws.terminate();
      await s.closed;
    });
    return s;
  };
  const noKey = (requestId: string) => ({
    message: expect.stringMatching(/xi_api_key/),
    error: 'invalid_api_key',
    code: 401,
    param: null,
    request_id: requestId,
  });

  it('stream-input: the first message’s key admits the socket; the text sent before the key is checked is all spoken; billed to the key’s org', async () => {
    const s = await keyless('stream-input');
    // Sent at once, without waiting for anything: the key is checked while the text arrives.
    s.send({ text: ' ', xi_api_key: h.key, voice_settings: { stability: 0.5 } });
    for (const piece of FOX.match(/.{1,12}/gs)!) s.send({ text: piece });
    s.send({ text: '' });
    expect(await s.closed).toEqual({ code: 1000, reason: 'done' });
    expect(s.log.events.at(-1)).toEqual({ isFinal: true });
    expect(decodeRaw(audioOf(s.log), 'pcm_s16le').length).toBe(natural('flite', 'slt', FOX).samples.length);
    await expectBilled(s.requestId, codePoints(FOX));
    expect((await usageRows(h.testDb.db.prisma, { requestId: s.requestId })).every((r) => r.orgId === h.orgId)).toBe(true);
  });

  it('multi-stream-input: the same, in a context', async () => {
    const s = await keyless('multi-stream-input');
    s.send({ text: ' ', context_id: 'a', xi_api_key: h.key });
    s.send({ text: CALL, context_id: 'a', flush: true });
    s.send({ close_socket: true });
    expect(await s.closed).toEqual({ code: 1000, reason: 'close_socket' });
    expect(decodeRaw(audioOf(s.log, 'a'), 'pcm_s16le').length).toBe(natural('flite', 'slt', CALL).samples.length);
    await expectBilled(s.requestId, codePoints(CALL));
  });

  it.each(['stream-input', 'multi-stream-input'] as const)(
    '%s: a wrong key, a first message without one, a key with no credit: ElevenLabs’ error message and a 1008 close; nothing billed',
    async (path) => {
      const broke = await createOrg(h.testDb.db, { name: `broke ${path}`, creditsMicros: 0n });
      const brokeKey = (await createApiKey(h.testDb.db.prisma, { orgId: broke.id, name: 'broke' })).key;
      const cases: [unknown, object][] = [
        [
          { text: ' ', xi_api_key: 'sk_svc_not_a_key' },
          { error: 'invalid_api_key', code: 401 },
        ],
        [{ text: ' ' }, { error: 'invalid_api_key', code: 401, message: expect.stringMatching(/xi_api_key/) }],
        [
          { text: ' ', xi_api_key: brokeKey },
          { error: 'insufficient_quota', code: 402 },
        ],
      ];
      for (const [first, expected] of cases) {
        const s = await keyless(path);
        s.send(first);
        s.send({ text: FOX });
        expect(await s.closed).toEqual({ code: 1008, reason: 'error' });
        expect(s.log.events).toEqual([{ message: expect.any(String), param: null, request_id: s.requestId, ...expected }]);
        expect(await usageRows(h.testDb.db.prisma, { requestId: s.requestId })).toEqual([]);
      }
    },
  );

  it('no message within 5 s: the error, then a 1008 close', async () => {
    const s = await keyless('stream-input');
    clock.advance(FIRST_MESSAGE_MS - 1000);
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    clock.advance(1000);
    expect(await s.closed).toEqual({ code: 1008, reason: 'error' });
    expect(s.log.events).toEqual([noKey(s.requestId)]);
  });

  it('a first message over 16 KiB is refused before it is read for a key', async () => {
    const s = await keyless('stream-input');
    s.send({ text: 'a'.repeat(FIRST_MESSAGE_MAX_BYTES), xi_api_key: h.key });
    expect(await s.closed).toEqual({ code: 1008, reason: 'error' });
    expect(s.log.events).toEqual([expect.objectContaining({ error: 'body_too_large', code: 413 })]);
  });
});

describe('refused before the upgrade, in ElevenLabs\u2019 error shape', () => {
  const path = '/v1/text-to-speech/flite-slt/stream-input';
  it.each([
    ['mp3 (ElevenLabs\u2019 default format)', {}, { 'xi-api-key': 'KEY' }, 400, 'invalid_output_format'],
    ['an inactivity_timeout over 180', { output_format: 'pcm_16000', inactivity_timeout: '181' }, { 'xi-api-key': 'KEY' }, 400, 'invalid_request'],
    // No key at all is upgraded, for the first message to carry one (below); a wrong one given with the upgrade is not.
    ['a wrong key', { output_format: 'pcm_16000' }, { 'xi-api-key': 'sk_svc_wrong' }, 401, 'invalid_api_key'],
  ])('%s: %s', async (_label, query, headers, status, code) => {
    const keyed = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v === 'KEY' ? h.key : v]));
    const res = await refusedUpgrade(h, query, keyed, path);
    expect(res.status).toBe(status);
    const body = JSON.parse(res.body) as { detail: { status: string; message: string }; error: { code: string } };
    expect(body.detail.status).toBe(code);
    expect(body.error.code).toBe(code);
  });
});
