// Route tests of WS /tts/websocket (Cartesia's TTS WebSocket protocol) over real sockets with a
// raw `ws` client: real gateway runtime, throw-away SQLite or PostgreSQL database, the local
// flite engine. Refusals before the upgrade (401, 402, 429, 400) as HTTP responses in the
// envelope; every event type; contexts in parallel; text in pieces (audio starts at the first
// speakable span, before the context ends); flush; cancel; timestamps; error events; the
// session caps and closes; metering exact to the micro-dollar, with the 1008 close when the
// balance runs out. The official clients are in tts-websocket.clients.test.ts.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import {
  FLITE_PRICE,
  FOX,
  codePoints,
  costOf,
  decodeRaw,
  expectSpeechLevel,
  expectWithin,
  natural,
  post,
  startTtsGateway,
  type Encoding,
} from '../../test/support/tts-routes.ts';
import { openTtsSocket, refusedTtsUpgrade, summary, type TtsEvent, type TtsSocket } from '../../test/support/tts-socket.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { DEFAULT_LINK_LIMITS, TOO_MANY_INVALID_MESSAGES } from '../sessions/websocket-link.ts';
import { ttsSessionLimits } from '../tts/tts-stream-session.ts';

const CALL = 'Please call me tomorrow morning about the meeting.';
const TABLE = 'I would like to book a table for two people tonight.';

let h: GatewayHarness;
const keys = { zero: '', limited: '', trial: '' };
// Rate-limit windows read a clock held 15 s into a minute: the one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);

beforeAll(async () => {
  h = await startTtsGateway({ clock });
  const prisma = h.testDb.db.prisma;
  const zeroOrg = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  keys.zero = (await createApiKey(prisma, { orgId: zeroOrg.id, name: 'zero' })).key;
  keys.limited = (await createApiKey(prisma, { orgId: h.orgId, name: 'one per minute', rateLimitRpm: 1 })).key;
  keys.trial = (await createApiKey(prisma, { orgId: h.orgId, name: 'trial', isTrial: true })).key;
}, 60_000);

afterAll(async () => {
  await h?.close();
});

let seq = 0;
/** A request id of our own (x-request-id): every debit of the session carries it. */
const newRequestId = (label: string) => `tts-ws-${label}-${++seq}-${Date.now()}`;

async function open(
  label: string,
  options: { key?: string; headers?: Record<string, string>; query?: Record<string, string> } = {},
): Promise<TtsSocket & { requestId: string }> {
  const requestId = newRequestId(label);
  const s = await openTtsSocket(h, {
    query: options.query,
    headers: { authorization: `Bearer ${options.key ?? h.key}`, 'x-request-id': requestId, ...options.headers },
  });
  return Object.assign(s, { requestId });
}

const RAW16 = { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 };

/** A generation request with the context's settings (flite, slt, raw s16 at flite's own 16 kHz). */
function gen(contextId: string, transcript: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_id: 'local-flite',
    voice: { mode: 'id', id: 'flite-slt' },
    output_format: RAW16,
    language: 'en',
    context_id: contextId,
    transcript,
    continue: false,
    ...over,
  };
}

/** `text` as LLM-sized pieces (4 characters). */
const pieces = (text: string) => text.match(/.{1,4}/gs)!;

/** Sends `text` in pieces with continue: true, then the empty last input. */
function sendInPieces(s: TtsSocket, contextId: string, text: string, over: Record<string, unknown> = {}): void {
  for (const p of pieces(text)) s.send(gen(contextId, p, { continue: true, ...over }));
  s.send(gen(contextId, '', { continue: false, ...over }));
}

/** Checks a context's events: chunks (Cartesia's fields, flush_id as given), then one done, last. */
function expectChunksThenDone(s: TtsSocket, contextId: string): TtsEvent[] {
  const events = s.of(contextId);
  expect(events.length, summary(s.events)).toBeGreaterThanOrEqual(2);
  expect(events.at(-1)).toEqual({ type: 'done', done: true, status_code: 200, context_id: contextId });
  const chunks = events.filter((e) => e.type === 'chunk');
  for (const c of chunks) {
    expect(Object.keys(c).sort()).toEqual(['context_id', 'data', 'done', 'flush_id', 'status_code', 'step_time', 'type']);
    expect(c).toMatchObject({ done: false, status_code: 206, context_id: contextId });
    expect(c.data).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    expect(Number.isInteger(c.step_time) && (c.step_time as number) >= 0).toBe(true);
  }
  return chunks;
}

const samplesOf = (s: TtsSocket, contextId: string, encoding: Encoding = 'pcm_s16le') => decodeRaw(s.audio(contextId), encoding);

/** The session's debits are for exactly `characters`, each span at flite's price (rounded up once per span). */
async function expectBilled(requestId: string, characters: number): Promise<void> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      const rows = await usageRows(prisma, { requestId });
      expect(rows.reduce((n, r) => n + r.characters, 0)).toBe(characters);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { requestId });
  // Each span is priced on its own: its characters at the per-character price, rounded up.
  expect(rows.reduce((n, r) => n + r.costMicros, 0n)).toBe(rows.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
  for (const r of rows)
    expect({ modality: r.modality, route: r.route, modelId: r.modelId, costMicros: r.costMicros }).toEqual({
      modality: 'tts',
      route: 'tts.websocket',
      modelId: 'local-flite',
      costMicros: costOf(r.characters, FLITE_PRICE),
    });
  const ledger = await prisma.ledgerEntry.findMany({ where: { requestId } });
  expect(ledger.every((l) => l.kind === 'usage')).toBe(true);
}

async function ledgerRowCount(): Promise<number> {
  return h.testDb.db.prisma.ledgerEntry.count();
}

/** The error event of a context (or of no context): Cartesia's fields and our envelope's. */
function expectErrorEvent(
  e: TtsEvent | undefined,
  expected: { status: number; code: string; param: string | null; contextId?: string },
  requestId: string,
): void {
  expect(e, 'an error event').toBeDefined();
  const keys = [
    'code',
    'done',
    'error',
    'error_code',
    'message',
    'param',
    'request_id',
    'status_code',
    'title',
    'type',
    ...(expected.contextId === undefined ? [] : ['context_id']),
  ];
  expect(Object.keys(e!).sort()).toEqual(keys.sort());
  expect(e).toMatchObject({
    type: 'error',
    done: true,
    status_code: expected.status,
    code: expected.code,
    error_code: expected.code,
    title: expected.code,
    param: expected.param,
    request_id: requestId,
  });
  expect(e!.error).toBe(e!.message);
  expect((e!.message as string).length).toBeGreaterThan(0);
  if (expected.contextId !== undefined) expect(e!.context_id).toBe(expected.contextId);
}

// ---------------------------------------------------------------------------------------

describe('refusals before the upgrade (HTTP responses in the error envelope), and the ways in', () => {
  async function refused(
    query: Record<string, string>,
    headers: Record<string, string>,
    expected: { status: number; code: string; param: string | null; type?: string },
  ) {
    const before = await ledgerRowCount();
    const res = await refusedTtsUpgrade(h, query, headers);
    expect(res.status, res.body).toBe(expected.status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(res.body) as { error: { message: string; type: string; code: string; param: string | null } };
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect({ code: body.error.code, param: body.error.param }, body.error.message).toEqual({ code: expected.code, param: expected.param });
    if (expected.type) expect(body.error.type).toBe(expected.type);
    expect(await ledgerRowCount()).toBe(before);
    return { ...res, error: body.error };
  }

  it('401 invalid_api_key without a key (the message names the ways to send one) or with an unknown one, in each place a key may be', async () => {
    const { error } = await refused({}, {}, { status: 401, code: 'invalid_api_key', param: null, type: 'invalid_request_error' });
    expect(error.message).toContain('api_key');
    expect(error.message).toContain('X-API-Key');
    await refused({ api_key: 'sk_svc_nope' }, {}, { status: 401, code: 'invalid_api_key', param: null });
    await refused({}, { authorization: 'Bearer sk_svc_nope' }, { status: 401, code: 'invalid_api_key', param: null });
    await refused({}, { 'x-api-key': 'sk_svc_nope' }, { status: 401, code: 'invalid_api_key', param: null });
  });

  it('402 insufficient_quota for an org with a zero balance', async () => {
    await refused({ api_key: keys.zero }, {}, { status: 402, code: 'insufficient_quota', param: null, type: 'insufficient_quota' });
  });

  it('429 rate_limit_exceeded with Retry-After once the key has used its one request of the minute', async () => {
    const s = await openTtsSocket(h, { query: { api_key: keys.limited } });
    s.ws.close();
    await s.closed;
    const res = await refused({ api_key: keys.limited }, {}, { status: 429, code: 'rate_limit_exceeded', param: null, type: 'rate_limit_error' });
    expect(res.headers['retry-after']).toBe('45');
  });

  it('429 rate_limit_exceeded past the key\u2019s cap of open sessions (a trial key: 2), and a place again once one closes', async () => {
    const a = await openTtsSocket(h, { query: { api_key: keys.trial } });
    const b = await openTtsSocket(h, { query: { api_key: keys.trial } });
    const res = await refused({ api_key: keys.trial }, {}, { status: 429, code: 'rate_limit_exceeded', param: null });
    expect(res.error.message).toContain('streaming sessions');
    a.ws.close();
    await a.closed;
    await vi.waitFor(async () => {
      const c = await openTtsSocket(h, { query: { api_key: keys.trial } });
      c.ws.close();
      await c.closed;
    });
    b.ws.close();
    await b.closed;
  });

  it('400 for a Cartesia-Version that is not a date; 400 upgrade_required for a plain GET', async () => {
    await refused({ api_key: h.key, cartesia_version: 'latest' }, {}, { status: 400, code: 'invalid_request', param: 'cartesia_version' });
    await refused({ api_key: h.key }, { 'cartesia-version': 'v2' }, { status: 400, code: 'invalid_request', param: 'cartesia_version' });
    const plain = await fetch(`${h.url}/tts/websocket`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { error: { code: string } }).error.code).toBe('upgrade_required');
  });

  it('the key in X-API-Key, in ?api_key= or in Authorization; the version in Cartesia-Version or ?cartesia_version=: each speaks', async () => {
    const ways: { query?: Record<string, string>; headers?: Record<string, string> }[] = [
      { headers: { 'x-api-key': h.key, 'cartesia-version': '2025-04-16' } },
      { query: { api_key: h.key, cartesia_version: '2026-08-14' } },
      { headers: { authorization: `Bearer ${h.key}` } },
    ];
    for (const [i, way] of ways.entries()) {
      const s = await openTtsSocket(h, way);
      s.send(gen(`way-${i}`, 'Hello.'));
      await s.end(`way-${i}`);
      expectChunksThenDone(s, `way-${i}`);
      s.ws.close();
      await s.closed;
    }
  });
});

// ---------------------------------------------------------------------------------------

describe('generation: contexts, pieces, flush, timestamps', () => {
  it('one whole transcript: chunks of raw s16 (exactly flite\u2019s own audio), then done; billed per character', async () => {
    const s = await open('whole');
    s.send(gen('c1', FOX));
    await s.end('c1');
    const chunks = expectChunksThenDone(s, 'c1');
    expect(chunks.every((c) => c.flush_id === 1)).toBe(true);
    const samples = samplesOf(s, 'c1');
    expect(samples.length).toBe(natural('flite', 'slt', FOX).samples.length);
    expectSpeechLevel(samples);
    await expectBilled(s.requestId, codePoints(FOX));
    s.ws.close();
    await s.closed;
  });

  it('text in LLM-sized pieces: audio starts once the first sentence is complete, before the context ends; billed for every character spoken', async () => {
    const s = await open('pieces');
    const first = FOX;
    const rest = ` ${CALL} ${TABLE}`;
    for (const p of pieces(first)) s.send(gen('p', p, { continue: true }));
    // Nothing more is sent until audio comes: a server that waited for the end would never answer.
    await s.until((e) => e.context_id === 'p' && e.type === 'chunk');
    expect(s.of('p').some((e) => e.type === 'done')).toBe(false);
    sendInPieces(s, 'p', rest);
    await s.end('p');
    expectChunksThenDone(s, 'p');
    const samples = samplesOf(s, 'p');
    // The sentences are spoken as flite speaks them one by one.
    const expected = [FOX, CALL, TABLE].reduce((n, t) => n + natural('flite', 'slt', t).samples.length, 0);
    expectWithin(samples.length, expected, 0.02);
    expectSpeechLevel(samples);
    await expectBilled(s.requestId, codePoints(first + rest));
    s.ws.close();
    await s.closed;
  });

  it('a clause with enough words starts audio too; text without any boundary starts once max_buffer_delay_ms has passed', async () => {
    const s = await open('clauses');
    const clause = 'I checked the order you placed with us yesterday, ';
    for (const p of pieces(clause + 'and')) s.send(gen('cl', p, { continue: true }));
    await s.until((e) => e.context_id === 'cl' && e.type === 'chunk');
    // No punctuation at all: spoken after the delay, the context still open.
    for (const p of pieces('hello there my good friend ')) s.send(gen('dl', p, { continue: true, max_buffer_delay_ms: 50 }));
    await s.until((e) => e.context_id === 'dl' && e.type === 'chunk');
    expect(s.of('dl').some((e) => e.type === 'done')).toBe(false);
    s.send(gen('cl', ' it left this morning.'));
    s.send(gen('dl', 'and goodbye', { max_buffer_delay_ms: 50 }));
    await Promise.all([s.end('cl'), s.end('dl')]);
    expectChunksThenDone(s, 'cl');
    expectChunksThenDone(s, 'dl');
    await expectBilled(s.requestId, codePoints(clause + 'and it left this morning.') + codePoints('hello there my good friend and goodbye'));
    s.ws.close();
    await s.closed;
  });

  it('max_buffer_delay_ms 0 (no buffering, as LiveKit sends): each piece\u2019s complete words are spoken at once; a growing word waits', async () => {
    const s = await open('nobuffer');
    s.send(gen('z', 'hello there my frie', { continue: true, max_buffer_delay_ms: 0 }));
    await s.until((e) => e.context_id === 'z' && e.type === 'chunk');
    s.send(gen('z', 'nd.', { continue: true, max_buffer_delay_ms: 0 }));
    // LiveKit ends a context with a lone space: nothing to say, nothing billed for it.
    s.send(gen('z', ' ', { continue: false, max_buffer_delay_ms: 0 }));
    await s.end('z');
    expectChunksThenDone(s, 'z');
    await expectBilled(s.requestId, codePoints('hello there my friend.'));
    s.ws.close();
    await s.closed;
  });

  it('flush: the audio of the text before it (flush_id 1), flush_done 1, then the next part\u2019s (flush_id 2), then done', async () => {
    const s = await open('flush');
    s.send(gen('f', 'Stay hungry, ', { continue: true }));
    s.send(gen('f', '', { continue: true, flush: true }));
    s.send(gen('f', 'stay foolish.', { continue: true }));
    s.send(gen('f', '', { continue: false }));
    await s.end('f');
    const events = s.of('f');
    const flushAt = events.findIndex((e) => e.type === 'flush_done');
    expect(events[flushAt]).toEqual({ type: 'flush_done', done: false, flush_done: true, flush_id: 1, status_code: 200, context_id: 'f' });
    expect(events.filter((e) => e.type === 'flush_done')).toHaveLength(1);
    const before = events.slice(0, flushAt);
    const after = events.slice(flushAt + 1, -1);
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((e) => e.type === 'chunk' && e.flush_id === 1)).toBe(true);
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((e) => e.type === 'chunk' && e.flush_id === 2)).toBe(true);
    expectChunksThenDone(s, 'f');
    const bytes = (list: TtsEvent[]) => list.reduce((n, e) => n + Buffer.from(e.data as string, 'base64').length, 0);
    expect(bytes(before) / 2).toBe(natural('flite', 'slt', 'Stay hungry, ').samples.length);
    expect(bytes(after) / 2).toBe(natural('flite', 'slt', 'stay foolish.').samples.length);
    await expectBilled(s.requestId, codePoints('Stay hungry, stay foolish.'));
    s.ws.close();
    await s.closed;
  });

  it('three contexts in parallel on one socket, their pieces interleaved: each gets exactly its own audio and its done', async () => {
    const s = await open('parallel');
    const texts: Record<string, string> = { a: FOX, b: CALL, c: TABLE };
    const split = Object.fromEntries(Object.entries(texts).map(([id, t]) => [id, pieces(t)]));
    const longest = Math.max(...Object.values(split).map((p) => p.length));
    for (let i = 0; i < longest; i++)
      for (const id of Object.keys(texts)) if (split[id]![i]) s.send(gen(id, split[id]![i]!, { continue: true, max_buffer_delay_ms: 5000 }));
    for (const id of Object.keys(texts)) s.send(gen(id, '', { continue: false }));
    await Promise.all(Object.keys(texts).map((id) => s.end(id)));
    for (const [id, text] of Object.entries(texts)) {
      expectChunksThenDone(s, id);
      const samples = samplesOf(s, id);
      expect(samples.length).toBe(natural('flite', 'slt', text).samples.length);
      expectSpeechLevel(samples);
    }
    await expectBilled(s.requestId, codePoints(FOX + CALL + TABLE));
    s.ws.close();
    await s.closed;
  });

  it('other encodings and rates: pcm_f32le 24 kHz, pcm_mulaw 8 kHz, pcm_alaw 44.1 kHz', async () => {
    const s = await open('formats');
    const formats: [string, Encoding, number][] = [
      ['f32', 'pcm_f32le', 24000],
      ['mulaw', 'pcm_mulaw', 8000],
      ['alaw', 'pcm_alaw', 44100],
    ];
    for (const [id, encoding, rate] of formats) s.send(gen(id, FOX, { output_format: { container: 'raw', encoding, sample_rate: rate } }));
    await Promise.all(formats.map(([id]) => s.end(id)));
    const seconds = natural('flite', 'slt', FOX).seconds;
    for (const [id, encoding, rate] of formats) {
      expectChunksThenDone(s, id);
      const samples = samplesOf(s, id, encoding);
      expectWithin(samples.length / rate, seconds, 0.01);
      expectSpeechLevel(samples);
    }
    await expectBilled(s.requestId, 3 * codePoints(FOX));
    s.ws.close();
    await s.closed;
  });

  it('add_timestamps: no timestamps event (the local engines give no word times: none are invented); the audio as without', async () => {
    const s = await open('timestamps');
    s.send(gen('t', FOX, { add_timestamps: true, add_phoneme_timestamps: true, use_normalized_timestamps: true }));
    await s.end('t');
    expectChunksThenDone(s, 't');
    expect(s.events.filter((e) => e.type === 'timestamps' || e.type === 'phoneme_timestamps')).toEqual([]);
    expect(samplesOf(s, 't').length).toBe(natural('flite', 'slt', FOX).samples.length);
    s.ws.close();
    await s.closed;
  });

  it('a pronunciation dictionary applies to each span; the characters billed are those sent', async () => {
    const res = await post(h, '/pronunciation-dicts', { name: 'ws', entries: [{ grapheme: 'nasa', alias: 'the agency' }] });
    expect(res.status).toBe(201);
    const dictId = ((await res.json()) as { id: string }).id;
    const s = await open('dict');
    sendInPieces(s, 'd', 'NASA launched it.', { pronunciation_dict_id: dictId });
    await s.end('d');
    expectChunksThenDone(s, 'd');
    expect(samplesOf(s, 'd').length).toBe(natural('flite', 'slt', 'the agency launched it.').samples.length);
    await expectBilled(s.requestId, codePoints('NASA launched it.'));
    s.ws.close();
    await s.closed;
  });
});

// ---------------------------------------------------------------------------------------

describe('cancel', () => {
  it('cancels a context mid-audio: no event for it once the cancel is read, never its done; text not begun is not billed', async () => {
    const s = await open('cancel');
    const first = 'This is the first sentence of a long answer. ';
    const more = Array.from({ length: 8 }, (_, i) => `This is sentence number ${i + 2} of it.`).join(' ');
    s.send(gen('long', first + more, { continue: true }));
    await s.until((e) => e.context_id === 'long' && e.type === 'chunk');
    s.send({ context_id: 'long', cancel: true });
    // Read after the cancel: once its first event arrives, the cancel was handled.
    s.send(gen('after', 'Hello.'));
    await s.end('after');
    const firstAfter = s.events.findIndex((e) => e.context_id === 'after');
    expect(
      s.events.slice(firstAfter).filter((e) => e.context_id === 'long'),
      summary(s.events),
    ).toEqual([]);
    expect(s.of('long').every((e) => e.type === 'chunk')).toBe(true);
    // Text that never arrives is never spoken: a context in pieces cancelled before its end.
    s.send(gen('pieces', first, { continue: true }));
    await s.until((e) => e.context_id === 'pieces' && e.type === 'chunk');
    s.send({ context_id: 'pieces', cancel: true });
    // Cancelling again (it ended) is no error; nor is a cancel that crossed a done.
    s.send({ context_id: 'long', cancel: true });
    s.send({ context_id: 'after', cancel: true });
    s.send(gen('marker', 'Bye.'));
    await s.end('marker');
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
    expect(s.of('pieces').every((e) => e.type === 'chunk')).toBe(true);
    s.ws.close();
    await s.closed;
    // The session gives back its hold once its last debit is written.
    const prisma = h.testDb.db.prisma;
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: h.orgId } })).heldMicros).toBe(0n);
    const rows = await usageRows(prisma, { requestId: s.requestId });
    // Billed: every span begun (the first of 'long' at least, at most all of it), the others exactly.
    const billed = rows.reduce((n, r) => n + r.characters, 0) - codePoints('Hello.') - codePoints('Bye.') - codePoints(first);
    expect(billed).toBeGreaterThanOrEqual(codePoints(first));
    expect(billed).toBeLessThanOrEqual(codePoints(first + more));
  });

  it('cancelling a context the socket never had is an error event (404 not_found) naming it; without a context_id, 400', async () => {
    const s = await open('cancel-unknown');
    s.send({ context_id: 'never', cancel: true });
    expectErrorEvent(await s.until((e) => e.type === 'error'), { status: 404, code: 'not_found', param: 'context_id', contextId: 'never' }, s.requestId);
    s.send({ cancel: true });
    expectErrorEvent(await s.until((e) => e.type === 'error' && !e.context_id), { status: 400, code: 'invalid_request', param: 'context_id' }, s.requestId);
    s.ws.close();
    await s.closed;
  });
});

// ---------------------------------------------------------------------------------------

describe('error events (the socket goes on serving other contexts)', () => {
  const cases: { name: string; message: unknown; expected: { status: number; code: string; param: string | null }; context: boolean }[] = [
    {
      name: 'an unknown voice',
      message: gen('e', 'Hi.', { voice: { mode: 'id', id: 'no-such-voice' } }),
      expected: { status: 404, code: 'voice_not_found', param: 'voice.id' },
      context: true,
    },
    {
      name: 'an unknown model',
      message: gen('e', 'Hi.', { model_id: 'no-such-model' }),
      expected: { status: 404, code: 'model_not_found', param: 'model_id' },
      context: true,
    },
    {
      name: 'a wav container',
      message: gen('e', 'Hi.', { output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: 16000 } }),
      expected: { status: 400, code: 'invalid_output_format', param: 'output_format.container' },
      context: true,
    },
    {
      name: 'an unknown sample rate',
      message: gen('e', 'Hi.', { output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 12345 } }),
      expected: { status: 400, code: 'invalid_output_format', param: 'output_format.sample_rate' },
      context: true,
    },
    {
      name: 'speed other than 1 (a stream)',
      message: gen('e', 'Hi.', { generation_config: { speed: 1.2 } }),
      expected: { status: 400, code: 'invalid_generation_config', param: 'generation_config.speed' },
      context: true,
    },
    {
      name: 'continue that is not a boolean',
      message: gen('e', 'Hi.', { continue: 'yes' }),
      expected: { status: 400, code: 'invalid_request', param: 'continue' },
      context: true,
    },
    {
      name: 'flush that is not a boolean',
      message: gen('e', 'Hi.', { flush: 1 }),
      expected: { status: 400, code: 'invalid_request', param: 'flush' },
      context: true,
    },
    {
      name: 'a context_id that is not a string',
      message: { ...gen('e', 'Hi.'), context_id: 7 },
      expected: { status: 400, code: 'invalid_request', param: 'context_id' },
      context: false,
    },
    {
      name: 'max_buffer_delay_ms out of range',
      message: gen('e', 'Hi.', { max_buffer_delay_ms: 9000 }),
      expected: { status: 400, code: 'invalid_request', param: 'max_buffer_delay_ms' },
      context: true,
    },
    {
      name: 'a transcript over 5000 characters',
      message: gen('e', 'a'.repeat(5001)),
      expected: { status: 400, code: 'invalid_request', param: 'transcript' },
      context: true,
    },
    { name: 'a NUL in the transcript', message: gen('e', 'Hi\u0000.'), expected: { status: 400, code: 'invalid_request', param: 'transcript' }, context: true },
    { name: 'text that is not JSON', message: '{"context_id": "e", nope', expected: { status: 400, code: 'invalid_json', param: null }, context: false },
    { name: 'a JSON array', message: '[1, 2]', expected: { status: 400, code: 'invalid_json', param: null }, context: false },
    { name: 'JSON null', message: 'null', expected: { status: 400, code: 'invalid_json', param: null }, context: false },
  ];

  it.each(cases)('$name', async ({ message, expected, context }) => {
    const s = await open('error');
    s.send(message);
    const error = await s.until((e) => e.type === 'error');
    expectErrorEvent(error, { ...expected, contextId: context ? 'e' : undefined }, s.requestId);
    // The same context id then works: the failed one was never opened, nor billed.
    const from = s.events.length;
    s.send(gen('e', 'Hello.'));
    expect((await s.end('e', from)).type).toBe('done');
    expect(s.events.filter((e) => e.type === 'error')).toHaveLength(1);
    expect(s.events.slice(from).every((e) => e.context_id === 'e' && (e.type === 'chunk' || e.type === 'done'))).toBe(true);
    await expectBilled(s.requestId, codePoints('Hello.'));
    s.ws.close();
    await s.closed;
  });

  it('a context whose settings differ from the last context\u2019s is checked anew (the last one\u2019s check is reused only for the same settings)', async () => {
    const s = await open('settings-again');
    // No language; then the same settings again: both served.
    s.send(gen('a', 'Hello.', { language: undefined }));
    expect((await s.end('a')).type).toBe('done');
    let from = s.events.length;
    s.send(gen('b', 'Hi.', { language: undefined }));
    expect((await s.end('b', from)).type).toBe('done');
    // A null language where the last context had none, then an unknown rate: each refused.
    from = s.events.length;
    s.send(gen('c', 'Hi.', { language: null }));
    expectErrorEvent(await s.end('c', from), { status: 400, code: 'invalid_request', param: 'language', contextId: 'c' }, s.requestId);
    from = s.events.length;
    s.send(gen('d', 'Hi.', { output_format: { ...RAW16, sample_rate: 12345 } }));
    expectErrorEvent(await s.end('d', from), { status: 400, code: 'invalid_output_format', param: 'output_format.sample_rate', contextId: 'd' }, s.requestId);
    // And a valid context after them is served with its own settings (24 kHz: 1.5 times the samples of 16 kHz).
    from = s.events.length;
    s.send(gen('e', 'Hello.', { output_format: { ...RAW16, sample_rate: 24000 } }));
    expect((await s.end('e', from)).type).toBe('done');
    const samples = (id: string) =>
      s
        .of(id)
        .filter((e) => e.type === 'chunk')
        .reduce((n, e) => n + Buffer.from(e.data as string, 'base64').length / 2, 0);
    expect(samples('e') / samples('a')).toBeCloseTo(1.5, 1);
    await expectBilled(s.requestId, codePoints('Hello.') * 2 + codePoints('Hi.'));
    s.ws.close();
    await s.closed;
  });

  it('a binary frame is an error event (400), not audio', async () => {
    const s = await open('binary');
    s.ws.send(Buffer.from([1, 2, 3]));
    expectErrorEvent(await s.until((e) => e.type === 'error'), { status: 400, code: 'invalid_request', param: null }, s.requestId);
    s.ws.close();
    await s.closed;
  });

  it('too much text waiting in one context: 400 transcript_too_long, the context ends, nothing billed', async () => {
    const s = await open('too-much');
    const block = 'x'.repeat(2000); // no space, no punctuation: nothing can be cut from it
    for (let i = 0; i < 3; i++) s.send(gen('big', block, { continue: true }));
    expectErrorEvent(
      await s.until((e) => e.type === 'error'),
      { status: 400, code: 'transcript_too_long', param: 'transcript', contextId: 'big' },
      s.requestId,
    );
    expect(s.of('big').filter((e) => e.type === 'chunk')).toEqual([]);
    s.send(gen('ok', 'Hello.'));
    await s.end('ok');
    await expectBilled(s.requestId, codePoints('Hello.'));
    s.ws.close();
    await s.closed;
  });

  it('input after a context\u2019s last one is an error, and ends that context', async () => {
    const s = await open('after-end');
    s.send(gen('x', 'Hello there.', { continue: false }));
    s.send(gen('x', 'More.', { continue: false }));
    expectErrorEvent(await s.until((e) => e.type === 'error'), { status: 400, code: 'invalid_request', param: 'context_id', contextId: 'x' }, s.requestId);
    s.send(gen('marker', 'Bye.'));
    await s.end('marker');
    expect(s.of('x').filter((e) => e.type === 'done')).toEqual([]);
    s.ws.close();
    await s.closed;
  });

  it('a bad message on an open context (a transcript over 5000 characters) is its error, and ends it', async () => {
    const s = await open('bad-on-open');
    s.send(gen('o', 'Hello', { continue: true }));
    s.send(gen('o', 'a'.repeat(5001), { continue: true }));
    expectErrorEvent(await s.until((e) => e.type === 'error'), { status: 400, code: 'invalid_request', param: 'transcript', contextId: 'o' }, s.requestId);
    // It ended: cancelling it is no error, and its id opens a new context.
    s.send({ context_id: 'o', cancel: true });
    const from = s.events.length;
    s.send(gen('o', 'Bye.'));
    expect((await s.end('o', from)).type).toBe('done');
    expect(s.events.filter((e) => e.type === 'error')).toHaveLength(1);
    s.ws.close();
    await s.closed;
  });

  it('more contexts open at once than a socket takes: 429 rate_limit_exceeded for the one too many', async () => {
    const saved = ttsSessionLimits.maxContexts;
    ttsSessionLimits.maxContexts = 2;
    const s = await open('contexts-cap').finally(() => (ttsSessionLimits.maxContexts = saved));
    s.send(gen('one', 'Hello', { continue: true }));
    s.send(gen('two', 'Hello', { continue: true }));
    s.send(gen('three', 'Hello', { continue: true }));
    expectErrorEvent(
      await s.until((e) => e.type === 'error'),
      { status: 429, code: 'rate_limit_exceeded', param: 'context_id', contextId: 'three' },
      s.requestId,
    );
    // Once one ends, there is room again.
    s.send(gen('one', '', { continue: false }));
    await s.end('one');
    const from = s.events.length;
    s.send(gen('three', 'Hello.'));
    expect((await s.end('three', from)).type).toBe('done');
    s.ws.close();
    await s.closed;
  });

  it('random messages (fields of every type, valid or not, contexts reused): every answer is a known event, the socket stays open (property)', async () => {
    const anything = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.object({ maxDepth: 1 }),
    );
    const message = fc.record(
      {
        context_id: fc.oneof(fc.constantFrom('a', 'b', 'c'), anything),
        model_id: fc.oneof(fc.constant('local-flite'), anything),
        voice: fc.oneof(fc.constant({ mode: 'id', id: 'flite-slt' }), fc.constant('flite-slt'), anything),
        output_format: fc.oneof(
          fc.constant(RAW16),
          fc.record({
            container: fc.constantFrom('raw', 'wav', 'mp3', 1),
            encoding: fc.constantFrom('pcm_s16le', 'pcm_mulaw', 'x'),
            sample_rate: fc.constantFrom(8000, 16000, 0, '16000'),
          }),
          anything,
        ),
        transcript: fc.oneof(fc.constantFrom('Hi.', 'Hello there, ', 'ok ', '', ' ', '...'), anything),
        continue: fc.oneof(fc.boolean(), anything),
        flush: fc.oneof(fc.boolean(), anything),
        cancel: fc.oneof(fc.boolean(), anything),
        max_buffer_delay_ms: fc.oneof(fc.constantFrom(0, 50, 3000), anything),
        add_timestamps: fc.oneof(fc.boolean(), anything),
      },
      { requiredKeys: [] },
    );
    const s = await open('property');
    let marker = 0;
    let advanced = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(message, fc.string({ maxLength: 20 })), { minLength: 1, maxLength: 8 }), async (messages) => {
        for (const m of messages) s.send(typeof m === 'string' ? m : JSON.stringify(m));
        // Whatever came before, a fresh context is served: the socket is alive and in order.
        const id = `marker-${++marker}`;
        const from = s.events.length;
        s.send(gen(id, 'Ok.'));
        expect((await s.end(id, from)).type).toBe('done');
        // Leave no context open for the next run (the cap is 16).
        const ids = new Set(messages.flatMap((m) => (typeof m === 'object' && typeof m.context_id === 'string' ? [m.context_id] : [])));
        for (const c of ids) s.send({ context_id: c, cancel: true });
        // A window of error events per run, as a client at human pace gets (past its allowance the link closes: websocket-link.ts).
        clock.advance(DEFAULT_LINK_LIMITS.errorWindowMs);
        advanced += DEFAULT_LINK_LIMITS.errorWindowMs;
      }),
      { numRuns: 25 },
    );
    // Whole minutes moved in all, so the rate-limit windows keep their place for the tests after this one.
    clock.advance((60_000 - (advanced % 60_000)) % 60_000);
    for (const e of s.events) {
      expect(['chunk', 'flush_done', 'done', 'error']).toContain(e.type);
      if (e.type === 'error')
        expect(typeof e.code === 'string' && typeof e.status_code === 'number' && (e.status_code as number) < 500, JSON.stringify(e)).toBe(true);
    }
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    s.ws.close();
    await s.closed;
  }, 120_000);
});

// ---------------------------------------------------------------------------------------

describe('metering and the session\u2019s end', () => {
  it('the balance reaches exactly zero: the paid audio is delivered whole with its done, then 1008 insufficient_quota; the ledger exact', async () => {
    const prisma = h.testDb.db.prisma;
    const cost = costOf(codePoints(FOX), FLITE_PRICE);
    const org = await createOrg(h.testDb.db, { name: 'exactly one sentence', creditsMicros: cost });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const s = await open('zero', { key });
    s.send(gen('c', FOX));
    const { code, reason } = await s.closed;
    expect({ code, reason }).toEqual({ code: 1008, reason: 'insufficient_quota' });
    expectChunksThenDone(s, 'c');
    expect(samplesOf(s, 'c').length).toBe(natural('flite', 'slt', FOX).samples.length);
    await expectBilled(s.requestId, codePoints(FOX));
    const after = await prisma.org.findUniqueOrThrow({ where: { id: org.id } });
    expect(after.balanceMicros).toBe(0n);
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n);
    // And now refused before the upgrade.
    expect((await refusedTtsUpgrade(h, { api_key: key })).status).toBe(402);
  });

  it('text the balance cannot pay for: an insufficient_quota error event (402) for its context, then 1008; what was spoken is billed, never more', async () => {
    const prisma = h.testDb.db.prisma;
    const credit = costOf(codePoints(FOX), FLITE_PRICE) + 10n;
    const org = await createOrg(h.testDb.db, { name: 'short of credit', creditsMicros: credit });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const s = await open('short', { key });
    s.send(gen('c', FOX, { continue: true }));
    await s.until((e) => e.context_id === 'c' && e.type === 'chunk');
    s.send(gen('c', ` ${CALL}`, { continue: true }));
    const { code, reason } = await s.closed;
    expect({ code, reason }).toEqual({ code: 1008, reason: 'insufficient_quota' });
    const errors = s.events.filter((e) => e.type === 'error');
    expect(errors).toHaveLength(1);
    expectErrorEvent(errors[0], { status: 402, code: 'insufficient_quota', param: null, contextId: 'c' }, s.requestId);
    expect(s.events.at(-1)).toBe(errors[0]);
    expect(samplesOf(s, 'c').length).toBe(natural('flite', 'slt', FOX).samples.length);
    await expectBilled(s.requestId, codePoints(FOX));
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(10n);
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n);
  });

  it('a revoked key ends its sessions: an error event for each open context, then 1008 api_key_disabled', async () => {
    const prisma = h.testDb.db.prisma;
    const k = await createApiKey(prisma, { orgId: h.orgId, name: 'to revoke' });
    const s = await open('revoked', { key: k.key });
    s.send(gen('open', 'Hello', { continue: true }));
    // A cancel of a context it never had answers at once: the open context is there before the key goes.
    s.send({ context_id: 'not-open', cancel: true });
    await s.until((e) => e.type === 'error' && e.context_id === 'not-open');
    await revokeApiKey(prisma, { id: k.id });
    const { code, reason } = await s.closed;
    expect({ code, reason }).toEqual({ code: 1008, reason: 'api_key_disabled' });
    expectErrorEvent(
      s.events.find((e) => e.type === 'error' && e.context_id === 'open'),
      { status: 401, code: 'api_key_disabled', param: null, contextId: 'open' },
      s.requestId,
    );
  });

  // The session's timers run on the test's clock: moved, not waited for (whole minutes, so the rate-limit windows keep their place).
  it('an idle socket is closed (1000 idle_timeout), as Cartesia closes idle sockets', async () => {
    const s = await open('idle');
    s.send(gen('i', 'Hello.'));
    await s.end('i');
    clock.advance(ttsSessionLimits.idleMs - 60_000);
    s.send(gen('still-here', 'Hi.'));
    await s.end('still-here');
    // A message starts the wait again: four minutes after it, the socket is still open.
    clock.advance(ttsSessionLimits.idleMs - 60_000);
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    clock.advance(60_000);
    expect(await s.closed).toEqual({ code: 1000, reason: 'idle_timeout' });
    expect(s.events.filter((e) => e.type === 'error')).toEqual([]);
  });

  it('a session past its maximum length ends its open contexts with an error event and closes (1000 max_duration)', async () => {
    // No idle timeout before the maximum length: only the maximum length can end it.
    const saved = ttsSessionLimits.idleMs;
    ttsSessionLimits.idleMs = 2 * ttsSessionLimits.maxDurationMs;
    const s = await open('max-length').finally(() => (ttsSessionLimits.idleMs = saved));
    // A context served first: the session is running when the clock moves.
    s.send(gen('first', 'Hi.'));
    await s.end('first');
    s.send(gen('m', 'Hello', { continue: true }));
    s.send({ context_id: 'not-open', cancel: true });
    await s.until((e) => e.type === 'error' && e.context_id === 'not-open');
    // A minute at a time, as time passes for a live socket: each minute's pings are answered before the next
    // (a ws client ends a socket with 60 pings it has not answered yet: an hour's at once would be 180).
    for (let t = 0; t < ttsSessionLimits.maxDurationMs; t += 60_000) {
      clock.advance(60_000);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await s.closed).toEqual({ code: 1000, reason: 'max_duration' });
    expectErrorEvent(
      s.events.find((e) => e.type === 'error' && e.context_id === 'm'),
      { status: 408, code: 'max_duration', param: null, contextId: 'm' },
      s.requestId,
    );
  });

  it('a client that stops reading while its messages keep making error events: a bounded number of them, then 1008 too_many_invalid_messages; the unread bytes and the memory bounded', async () => {
    // The server's side of this connection, as the HTTP server hands it over for the upgrade: its writableLength is what the gateway holds unsent.
    const requestId = newRequestId('unread');
    let serverSide: Socket | undefined;
    const onUpgrade = (req: IncomingMessage, socket: Socket) => {
      if (req.headers['x-request-id'] === requestId) serverSide = socket;
    };
    h.runtime.app.server.on('upgrade', onUpgrade);
    const s = await open('unread', { headers: { 'x-request-id': requestId } }).finally(() => h.runtime.app.server.off('upgrade', onUpgrade));
    expect(serverSide).toBeDefined();
    const rssBefore = process.memoryUsage().rss;
    let rssMax = rssBefore;
    let unsentMax = 0;
    // The client reads nothing more: what the gateway sends piles up, in the kernel's buffers first (up to tcp_wmem + tcp_rmem), then in the gateway's.
    const clientSocket = (s.ws as unknown as { _socket: Socket })._socket;
    clientSocket.pause();
    // Each one-byte message is an invalid_json error event of some 400 bytes: 100,000 of them are more than both kernels' buffers and the gateway's bound.
    for (let sent = 0; sent < 100_000; sent += 500) {
      for (let i = 0; i < 500; i++) s.ws.send('x');
      await new Promise((resolve) => setImmediate(resolve));
      unsentMax = Math.max(unsentMax, serverSide!.writableLength);
      rssMax = Math.max(rssMax, process.memoryUsage().rss);
    }
    expect(unsentMax).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(rssMax - rssBefore).toBeLessThan(50 * 1024 * 1024);
    // Closed for the flood: the gateway reads nothing more of it (gateway/sessions/websocket-link.ts).
    expect(serverSide!.isPaused()).toBe(true);
    clientSocket.resume();
    // The client has read the close frame; its own is never read: the gateway ends the socket after the grace.
    await expect.poll(() => s.ws.readyState).toBe(s.ws.CLOSING);
    clock.advance(DEFAULT_LINK_LIMITS.closeGraceMs);
    expect(await s.closed).toEqual({ code: 1008, reason: TOO_MANY_INVALID_MESSAGES });
    // What it was sent before the close is what it asked for: the allowance of error events and no more.
    expect(s.events).toHaveLength(DEFAULT_LINK_LIMITS.maxErrorEvents);
    expect(s.events.every((e) => e.type === 'error' && e.code === 'invalid_json')).toBe(true);
  }, 60_000);

  it('a client that leaves mid-audio: the org holds no credit afterwards, and only what was begun is billed', async () => {
    const prisma = h.testDb.db.prisma;
    const org = await createOrg(h.testDb.db, { name: 'leaver', creditsMicros: 10_000_000n });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const s = await open('leaver', { key });
    const long = Array.from({ length: 10 }, (_, i) => `Here is sentence ${i + 1} of the text.`).join(' ');
    s.send(gen('l', long, { continue: true }));
    await s.until((e) => e.context_id === 'l' && e.type === 'chunk');
    s.ws.terminate();
    await s.closed;
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n);
    const rows = await usageRows(prisma, { requestId: s.requestId });
    const billed = rows.reduce((n, r) => n + r.costMicros, 0n);
    expect(billed).toBeGreaterThan(0n);
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(10_000_000n - billed);
  });
});
