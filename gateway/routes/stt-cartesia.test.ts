// GET /stt/websocket as Cartesia's manual-finalize clients speak it (docs.cartesia.ai
// api-reference/stt/websocket; cartesia-js 4.2 `stt.manualFinalize`), over raw sockets: the
// plain-text commands `finalize`, `close` and `done` (pipecat), and -- when the upgrade carries
// Cartesia-Version or cartesia_version, as Cartesia's clients send -- `request_id` on every
// event, `duration` on transcripts, finals whose texts join as they are, error events with
// Cartesia's fields, and `done` as the last event before a close the client asked for. Without
// the version the events are the gateway's own, unchanged. Real gateway runtime, throw-away
// database, the local recogniser, speech by flite; metering exact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  audioCost,
  concat,
  expectDebited,
  expectTimedWords,
  openSession,
  requestId,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  summary,
  trimSilence,
  wer,
  type SttClient,
  type SttEvent,
} from '../../test/support/stt-routes.ts';
import { usd } from '../../test/support/tts-routes.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';
const VERSION = { 'cartesia-version': '2026-03-01' };

let h: GatewayHarness;

beforeAll(async () => {
  h = await startSttGateway();
  await Promise.all([speech(FOX), speech(CALL)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

/** 100 ms frames at 16 kHz s16, twice as fast as real time. */
const FAST = { frameBytes: 3200, intervalMs: 50 };
const millisOf = (samples: number) => Math.round(samples / 16);
const finals = (c: SttClient) => c.events.filter((e) => e.type === 'transcript' && e.is_final === true);
const indexOf = (c: SttClient, e: SttEvent) => c.events.indexOf(e);

/** A session as a Cartesia client opens it: the version header, the key as X-API-Key, our request id. */
async function cartesiaSession(id: string, query: Record<string, string> = {}, headers: Record<string, string> = VERSION): Promise<SttClient> {
  return openSession(
    h,
    { model: 'local-stt', encoding: 'pcm_s16le', sample_rate: '16000', ...query },
    { headers: { 'x-api-key': h.key, 'x-request-id': id, ...headers } },
  );
}

describe('plain-text commands and the Cartesia events', () => {
  it('finalize, then close: finals with request_id and duration, flush_done, session.closed, then done as the last event; close 1000; billed exactly', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL)).samples);
    const id = requestId('cartesia-finalize');
    const c = await cartesiaSession(id);
    await c.stream(s16le(a), FAST);
    c.command('finalize');
    const flush = await c.until((e) => e.type === 'flush_done');
    await c.stream(s16le(b), FAST);
    c.command('close');
    const { code, reason } = await c.closed;
    expect(code).toBe(1000);
    expect(reason).toBe('client_close');

    // Every event carries the connection's request id (the x-request-id given).
    for (const e of c.events) expect(e.request_id, JSON.stringify(e)).toBe(id);
    expect(flush).toEqual({ type: 'flush_done', request_id: id });
    const types = c.events.map((e) => e.type);
    expect(types.at(-1), summary(c.events)).toBe('done');
    expect(types.at(-2)).toBe('session.closed');
    expect(c.events.at(-1)).toEqual({ type: 'done', request_id: id });

    const [f1, f2, ...rest] = finals(c);
    expect(rest, summary(c.events)).toHaveLength(0);
    expect(indexOf(c, f1!)).toBeLessThan(indexOf(c, flush));
    expect(indexOf(c, flush)).toBeLessThan(indexOf(c, f2!));
    expect(wer(FOX, f1!.text as string), f1!.text as string).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, f2!.text as string), f2!.text as string).toBeLessThanOrEqual(0.25);
    // Cartesia's clients join the finals' texts as they are: the second is led by a space.
    expect(f1!.text).not.toMatch(/^\s/);
    expect(f2!.text).toMatch(/^ \S/);
    expect(wer(`${FOX} ${CALL}`, `${f1!.text as string}${f2!.text as string}`)).toBeLessThanOrEqual(0.25);
    expectTimedWords(f1!.words, 0, a.length / 16000);
    expectTimedWords(f2!.words, a.length / 16000 - 0.02, (a.length + b.length) / 16000);
    // duration: the audio (s) since the previous final, as received when the transcript came
    // (whole milliseconds: each may round up by half of one).
    expect(f1!.duration as number).toBeGreaterThan(0);
    expect(f1!.duration as number).toBeLessThanOrEqual(millisOf(a.length) / 1000);
    expect(f2!.duration as number).toBeGreaterThan(0);
    expect((f1!.duration as number) + (f2!.duration as number)).toBeLessThanOrEqual(millisOf(a.length + b.length) / 1000 + 1e-9);
    for (const t of c.ofType('transcript')) expect(Object.keys(t).sort()).toEqual(['duration', 'is_final', 'request_id', 'text', 'type', 'words']);

    const closed = c.ofType('session.closed')[0]!;
    const millis = millisOf(a.length + b.length);
    expect(closed).toMatchObject({ reason: 'client_close', audio_seconds: millis / 1000, cost_usd: usd(audioCost(millis)) });
    const billed = await expectDebited(h, id, audioCost(millis));
    expect(billed.audioMillis).toBe(millis);
  });

  it('done (as pipecat sends it) closes like close: the final of the audio before it, then done; the version may come as cartesia_version', async () => {
    const s = await speech(CALL);
    const audio = trimSilence(s.samples);
    const id = requestId('cartesia-done');
    const c = await cartesiaSession(id, { cartesia_version: '2025-04-16' }, {});
    await c.stream(s16le(audio), FAST);
    c.command('done');
    expect((await c.closed).code).toBe(1000);
    const [final, ...more] = finals(c);
    expect(more, summary(c.events)).toHaveLength(0);
    expect(wer(CALL, final!.text as string), final!.text as string).toBeLessThanOrEqual(0.25);
    expect(c.events.map((e) => e.type).slice(-2)).toEqual(['session.closed', 'done']);
    for (const e of c.events) expect(e.request_id).toBe(id);
    await expectDebited(h, id, audioCost(millisOf(audio.length)));
  });

  it('without Cartesia-Version the plain-text commands work too and the events stay the gateway\u2019s own (no done, no request_id on them)', async () => {
    const s = await speech(FOX);
    const audio = trimSilence(s.samples);
    const id = requestId('plain-text');
    const c = await cartesiaSession(id, {}, {});
    await c.stream(s16le(audio), FAST);
    c.command('finalize');
    const flush = await c.until((e) => e.type === 'flush_done');
    expect(flush).toEqual({ type: 'flush_done' });
    c.command('close');
    expect((await c.closed).code).toBe(1000);
    expect(c.events.at(-1)!.type, summary(c.events)).toBe('session.closed');
    expect(c.ofType('done')).toHaveLength(0);
    const [final] = finals(c);
    expect(Object.keys(final!).sort()).toEqual(['is_final', 'text', 'type', 'words']);
    expect(wer(FOX, final!.text as string)).toBeLessThanOrEqual(0.25);
    await expectDebited(h, id, audioCost(millisOf(audio.length)));
  });

  it('JSON {"type":"done"} closes too, and interim transcripts carry request_id and duration', async () => {
    const s = await speech(FOX);
    const audio = concat(trimSilence(s.samples), silence(0.3));
    const id = requestId('json-done');
    const c = await cartesiaSession(id);
    await c.stream(s16le(audio), FAST);
    c.command({ type: 'done' });
    expect((await c.closed).code).toBe(1000);
    const interims = c.events.filter((e) => e.type === 'transcript' && e.is_final === false);
    expect(interims.length, summary(c.events)).toBeGreaterThan(0);
    for (const p of interims) {
      expect(p.request_id).toBe(id);
      expect(p.duration as number).toBeGreaterThan(0);
      expect(p.text).not.toMatch(/^\s/);
    }
    expect(c.events.at(-1)).toEqual({ type: 'done', request_id: id });
  });
});

describe('errors with Cartesia\u2019s fields', () => {
  it('a bad text message: type, message, title, error_code, status_code 400, request_id, and ours (code); the session carries on', async () => {
    const id = requestId('cartesia-bad-message');
    const c = await cartesiaSession(id);
    await c.until((e) => e.type === 'session.started');
    for (const m of ['hello', 'finalise', '{"type":"dance"}', '[1]']) c.command(m);
    const s = await speech(CALL);
    await c.stream(s16le(trimSilence(s.samples)), FAST);
    c.command('close');
    expect((await c.closed).code).toBe(1000);
    const errors = c.ofType('error');
    expect(errors, summary(c.events)).toHaveLength(4);
    for (const e of errors) {
      expect(Object.keys(e).sort()).toEqual(['code', 'error', 'error_code', 'message', 'request_id', 'status_code', 'title', 'type']);
      expect(e).toMatchObject({
        type: 'error',
        code: 'invalid_message',
        error_code: 'invalid_message',
        title: 'invalid_message',
        status_code: 400,
        request_id: id,
      });
      expect(e.error).toBe(e.message);
      expect(e.message as string).toMatch(/finalize/);
    }
    expect(wer(CALL, finals(c)[0]!.text as string)).toBeLessThanOrEqual(0.25);
    expect(c.events.at(-1)!.type).toBe('done');
  });

  it('running out of credit: an insufficient_quota error with status_code 402 and the request id, session.closed, no done (the server closed), 1008; billed exactly', async () => {
    const prisma = h.testDb.db.prisma;
    const org = await createOrg(h.testDb.db, { name: 'cartesia short of credit', creditsMicros: 250n });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const audio = concat((await speech(FOX)).samples, (await speech(CALL)).samples);
    const id = requestId('cartesia-1008');
    const c = await openSession(h, { model: 'local-stt' }, { headers: { 'x-api-key': key, 'x-request-id': id, ...VERSION } });
    void c.stream(s16le(audio), { frameBytes: 3200, intervalMs: 100 });
    const { code, reason } = await c.closed;
    expect(code).toBe(1008);
    expect(reason).toBe('insufficient_quota');
    expect(c.events.map((e) => e.type).slice(-2)).toEqual(['error', 'session.closed']);
    expect(c.ofType('error')[0]).toMatchObject({ code: 'insufficient_quota', error_code: 'insufficient_quota', status_code: 402, request_id: id });
    expect(c.ofType('done')).toHaveLength(0);
    // Each next second is reserved before its audio is taken: 2 s were accepted and billed.
    await expectDebited(h, id, audioCost(2000));
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(250n - audioCost(2000));
  });
});
