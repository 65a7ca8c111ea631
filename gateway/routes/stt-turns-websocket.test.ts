// WS /stt/turns/websocket, Cartesia's auto-finalize protocol (docs.cartesia.ai
// api-reference/stt/turns/websocket; cartesia-js 4.2 `stt.autoFinalize` types), over raw
// sockets: connected, turn.start, turn.update (cumulative), turn.eager_end, turn.resume,
// turn.end with the turn's transcript, request_id on every event; the turn thresholds in the
// query (Cartesia's meaning: a likelihood that the user is still in a turn) and in `config`
// messages mid-session; `close`; every refusal before the upgrade; the 1008 close at zero
// balance with the ledger exact. Real gateway runtime, throw-away database, the local
// recogniser, speech by flite.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import {
  audioCost,
  concat,
  expectDebited,
  ledgerRowCount,
  openSession,
  refusedUpgrade,
  requestId,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  trimSilence,
  wer,
  words,
  type SttClient,
  type SttEvent,
} from '../../test/support/stt-routes.ts';

const PATH = '/stt/turns/websocket';
const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';
const WEATHER = 'the weather today is sunny with a light breeze';
const TURN_EVENTS = ['turn.start', 'turn.update', 'turn.eager_end', 'turn.resume', 'turn.end'];

let h: GatewayHarness;
const keys = { zero: '', revoked: '', limited: '' };
// Rate-limit windows read a clock held 15 s into a minute: the one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);

beforeAll(async () => {
  h = await startSttGateway({ clock });
  const prisma = h.testDb.db.prisma;
  const zeroOrg = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  keys.zero = (await createApiKey(prisma, { orgId: zeroOrg.id, name: 'zero' })).key;
  const revoked = await createApiKey(prisma, { orgId: h.orgId, name: 'revoked' });
  await revokeApiKey(prisma, { id: revoked.id });
  keys.revoked = revoked.key;
  keys.limited = (await createApiKey(prisma, { orgId: h.orgId, name: 'one per minute', rateLimitRpm: 1 })).key;
  await Promise.all([speech(FOX), speech(CALL), speech(CALL, 'rms'), speech(WEATHER)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

const FAST = { frameBytes: 3200, intervalMs: 50 };
const millisOf = (samples: number) => Math.round(samples / 16);
const summary = (events: SttEvent[]) => events.map((e) => (e.transcript !== undefined ? `${e.type}(${String(e.transcript)})` : e.type)).join(', ');

/** A session as LiveKit opens it: the key in X-API-Key, Cartesia-Version, our request id. */
function turnsSession(id: string, query: Record<string, string | string[]> = {}): Promise<SttClient> {
  return openSession(
    h,
    { model: 'local-stt', encoding: 'pcm_s16le', sample_rate: '16000', ...query },
    { path: PATH, headers: { 'x-api-key': h.key, 'cartesia-version': '2026-03-01', 'x-request-id': id } },
  );
}

/**
 * The turn events keep Cartesia's guarantees: each turn opens with turn.start and closes with
 * turn.end, turn.update and turn.eager_end only inside a turn, a resume only after an eager end,
 * an eager end followed by a resume or the end; updates are cumulative and never repeat. Returns
 * the turns' events.
 */
function checkTurns(events: SttEvent[]): SttEvent[][] {
  const turns: SttEvent[][] = [];
  let turn: SttEvent[] | null = null;
  let eager = false;
  let lastUpdate = '';
  for (const e of events.filter((x) => TURN_EVENTS.includes(x.type))) {
    const where = `${e.type} in ${summary(events)}`;
    if (e.type === 'turn.start') {
      expect(turn, where).toBeNull();
      turn = [e];
      turns.push(turn);
      eager = false;
      lastUpdate = '';
      continue;
    }
    expect(turn, where).not.toBeNull();
    turn!.push(e);
    if (e.type === 'turn.update') {
      expect(typeof e.transcript).toBe('string');
      // Sent when the turn's transcript changed (the recogniser's hypothesis may still be revised).
      expect(e.transcript, where).not.toBe(lastUpdate);
      expect(e.transcript, where).not.toBe('');
      lastUpdate = e.transcript as string;
    } else if (e.type === 'turn.eager_end') {
      expect(eager, where).toBe(false);
      expect(typeof e.transcript).toBe('string');
      eager = true;
    } else if (e.type === 'turn.resume') {
      expect(eager, where).toBe(true);
      eager = false;
    } else {
      expect(typeof e.transcript).toBe('string');
      turn = null;
    }
  }
  expect(turn, `an unfinished turn in ${summary(events)}`).toBeNull();
  return turns;
}

const endOf = (turn: SttEvent[]) => turn.at(-1)!.transcript as string;

// ---------------------------------------------------------------------------------------

describe('refusals before the upgrade (raw HTTP responses in the error envelope)', () => {
  async function refused(query: Record<string, string>, headers: Record<string, string>, expected: { status: number; code: string; param: string | null }) {
    const before = await ledgerRowCount(h);
    const res = await refusedUpgrade(h, { model: 'local-stt', ...query }, headers, PATH);
    expect(res.status, res.body).toBe(expected.status);
    const body = JSON.parse(res.body) as { error: { code: string; param: string | null; message: string } };
    expect({ code: body.error.code, param: body.error.param }, body.error.message).toEqual({ code: expected.code, param: expected.param });
    expect(await ledgerRowCount(h)).toBe(before);
    return { ...res, error: body.error };
  }

  it('401 without a key, with an unknown key (X-API-Key, api_key) and a revoked one; 402 at a zero balance', async () => {
    await refused({}, {}, { status: 401, code: 'invalid_api_key', param: null });
    await refused({}, { 'x-api-key': 'sk_svc_nope' }, { status: 401, code: 'invalid_api_key', param: null });
    await refused({ api_key: 'sk_svc_nope' }, {}, { status: 401, code: 'invalid_api_key', param: null });
    await refused({}, { 'x-api-key': keys.revoked }, { status: 401, code: 'api_key_disabled', param: null });
    await refused({}, { 'x-api-key': keys.zero }, { status: 402, code: 'insufficient_quota', param: null });
  });

  it('429 rate_limit_exceeded with Retry-After once the key has used its one upgrade of the minute', async () => {
    const c = await openSession(h, { model: 'local-stt', api_key: keys.limited }, { path: PATH });
    expect((await c.until((e) => e.type === 'connected')).type).toBe('connected');
    c.command({ type: 'close' });
    expect((await c.closed).code).toBe(1000);
    const res = await refused({ api_key: keys.limited }, {}, { status: 429, code: 'rate_limit_exceeded', param: null });
    expect(res.headers['retry-after']).toBe('45');
  });

  it('400 for thresholds out of range or out of order (in Cartesia\u2019s terms), a bad Cartesia-Version, encoding or sample rate; 404 for an unknown model', async () => {
    const key = { 'x-api-key': h.key };
    const cases: [Record<string, string>, Record<string, string>, string][] = [
      [{ turn_end_threshold: '2' }, {}, 'turn_end_threshold'],
      [{ turn_start_threshold: '-0.1' }, {}, 'turn_start_threshold'],
      [{ turn_eager_end_threshold: 'high' }, {}, 'turn_eager_end_threshold'],
      [{ turn_end_timeout_ms: '50' }, {}, 'turn_end_timeout_ms'],
      [{ turn_end_timeout_ms: '600.5' }, {}, 'turn_end_timeout_ms'],
      // The eager end must lie above the end (the likelihood falls through it first).
      [{ turn_eager_end_threshold: '0.2', turn_end_threshold: '0.3' }, {}, 'turn_eager_end_threshold'],
      [{ cartesia_version: 'latest' }, {}, 'cartesia_version'],
      [{}, { 'cartesia-version': '2026' }, 'cartesia_version'],
      [{ encoding: 'pcm_s32le' }, {}, 'encoding'],
    ];
    for (const [query, headers, param] of cases) {
      const { error } = await refused(query, { ...key, ...headers }, { status: 400, code: 'invalid_request', param });
      if (query.turn_end_threshold === '0.3') expect(error.message).toMatch(/turn_eager_end_threshold \(0\.2\) must be above turn_end_threshold \(0\.3\)/);
    }
    await refused({ sample_rate: '12345' }, key, { status: 400, code: 'invalid_sample_rate', param: 'sample_rate' });
    await refused({ turn_detection: 'eager' }, key, { status: 400, code: 'invalid_turn_detection', param: 'turn_detection' });
    await refused({ model: 'ink-2' }, key, { status: 404, code: 'model_not_found', param: 'model' });
  });

  it('Cartesia\u2019s documented defaults (start 0.8, eager end 0.4, end 0.2, timeout 5600 ms) and repeated keyterm are taken', async () => {
    const id = requestId('turns-defaults');
    const c = await turnsSession(id, {
      turn_start_threshold: '0.8',
      turn_eager_end_threshold: '0.4',
      turn_end_threshold: '0.2',
      turn_end_timeout_ms: '5600',
      keyterm: ['brown fox', 'lazy dog'],
    });
    expect(await c.until((e) => e.type === 'connected')).toEqual({ type: 'connected', request_id: id });
    c.command({ type: 'close' });
    expect((await c.closed).code).toBe(1000);
    expect(c.events).toEqual([{ type: 'connected', request_id: id }]);
  });
});

describe('the session', () => {
  it('two sentences 2 s apart: connected, then two turns each with cumulative updates and a turn.end carrying the words; request_id everywhere; close bills exactly', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL, 'rms')).samples);
    const audio = concat(silence(0.3), a, silence(2), b, silence(2));
    const id = requestId('turns-two');
    const c = await turnsSession(id);
    await c.stream(s16le(audio), FAST);
    c.command({ type: 'close' });
    const { code, reason } = await c.closed;
    expect(code).toBe(1000);
    expect(reason).toBe('client_close');

    expect(c.events[0]).toEqual({ type: 'connected', request_id: id });
    for (const e of c.events) expect(e.request_id, JSON.stringify(e)).toBe(id);
    // Nothing outside Cartesia's protocol.
    expect(
      c.events.every((e) => ['connected', ...TURN_EVENTS].includes(e.type)),
      summary(c.events),
    ).toBe(true);
    const turns = checkTurns(c.events);
    expect(turns, summary(c.events)).toHaveLength(2);
    expect(wer(FOX, endOf(turns[0]!)), endOf(turns[0]!)).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, endOf(turns[1]!)), endOf(turns[1]!)).toBeLessThanOrEqual(0.25);
    for (const turn of turns) {
      const updates = turn.filter((e) => e.type === 'turn.update');
      expect(updates.length, summary(turn)).toBeGreaterThanOrEqual(2);
      // The last update is the turn's transcript: the end adds nothing the updates did not say.
      expect(updates.at(-1)!.transcript).toBe(endOf(turn));
      for (const e of turn)
        expect(Object.keys(e).sort()).toEqual(
          e.type === 'turn.start' || e.type === 'turn.resume' ? ['request_id', 'type'] : ['request_id', 'transcript', 'type'],
        );
    }
    await expectDebited(h, id, audioCost(millisOf(audio.length)));
  }, 60_000);

  it('a pause within a turn: turn.eager_end with the transcript heard so far, then turn.resume; close mid-turn ends the turn with what was heard (thresholds from the query)', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL)).samples);
    // Eager end early (likelihood below 0.9), the end late (below 0.01) and not before 3 s of silence.
    const id = requestId('turns-eager');
    const c = await turnsSession(id, { turn_detection: 'patient', turn_eager_end_threshold: '0.9', turn_end_threshold: '0.01', turn_end_timeout_ms: '3000' });
    // The first sentence up to its last sound (not the trimmed silence after it), then a wait
    // until the recogniser has heard most of it: the pause comes after, so its eager end
    // carries those words (the detector runs ahead of a recogniser fed faster than real time).
    const spoken = a.subarray(0, a.length - 960);
    await c.stream(s16le(concat(silence(0.3), spoken)), FAST);
    await c.until((e) => e.type === 'turn.update' && words(e.transcript as string).length >= 6, { timeoutMs: 30_000 });
    const rest = concat(silence(0.8), b, silence(0.3));
    await c.stream(s16le(rest), FAST);
    c.command({ type: 'close' });
    expect((await c.closed).code).toBe(1000);

    const turns = checkTurns(c.events);
    expect(turns, summary(c.events)).toHaveLength(1);
    const turn = turns[0]!;
    const types = turn.map((e) => e.type);
    expect(types, summary(turn)).toContain('turn.resume');
    // The eager end in the pause (followed by the resume as the second sentence starts) carries
    // the turn's transcript so far: the last update before it, with the first sentence's words
    // (the recogniser's hypothesis may still be revised).
    const inPause = turn.filter((e, i) => e.type === 'turn.eager_end' && turn.slice(i + 1).find((x) => x.type !== 'turn.update')?.type === 'turn.resume');
    const carriesFirst = inPause.filter((eager) => {
      const before = turn
        .slice(0, turn.indexOf(eager))
        .filter((e) => e.type === 'turn.update')
        .at(-1);
      const known = words(eager.transcript as string).filter((w) => words(FOX).includes(w)).length;
      return before !== undefined && eager.transcript === before.transcript && known >= 3;
    });
    expect(carriesFirst.length, summary(turn)).toBeGreaterThanOrEqual(1);
    // Closed mid-turn: the turn ends with both sentences.
    expect(wer(`${FOX} ${CALL}`, endOf(turn)), endOf(turn)).toBeLessThanOrEqual(0.25);
    await expectDebited(h, id, audioCost(millisOf(spoken.length + 4800 + rest.length)));
  }, 60_000);

  it('config mid-session: a 0.8 s pause is within one turn before it and ends the turn after it (end_timeout_ms from the next audio on)', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL)).samples);
    const phrase = concat(a, silence(0.8), b, silence(3.5));
    const id = requestId('turns-config');
    const c = await turnsSession(id, { turn_detection: 'patient', turn_end_threshold: '0.01', turn_end_timeout_ms: '3000' });
    await c.stream(s16le(phrase), FAST);
    c.command({ type: 'config', turn: { end_timeout_ms: 300 } });
    await c.stream(s16le(phrase), FAST);
    c.command({ type: 'close' });
    expect((await c.closed).code).toBe(1000);

    expect(c.ofType('error'), summary(c.events)).toHaveLength(0);
    const turns = checkTurns(c.events);
    expect(turns.length, summary(c.events)).toBe(3);
    expect(wer(`${FOX} ${CALL}`, endOf(turns[0]!)), endOf(turns[0]!)).toBeLessThanOrEqual(0.25);
    expect(wer(FOX, endOf(turns[1]!)), endOf(turns[1]!)).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, endOf(turns[2]!)), endOf(turns[2]!)).toBeLessThanOrEqual(0.25);
    await expectDebited(h, id, audioCost(millisOf(phrase.length * 2)));
  }, 60_000);

  it('keyterm (Cartesia’s repeated parameter) reaches the recogniser: "sunny", heard as "sunday" without it', async () => {
    const audio = concat(silence(0.3), trimSilence((await speech(WEATHER)).samples), silence(2));
    const heard: string[] = [];
    for (const keyterm of [[], ['sunny'], ['light breeze', 'sunny']]) {
      const c = await turnsSession(requestId('turns-keyterm'), { keyterm });
      await c.stream(s16le(audio), FAST);
      c.command({ type: 'close' });
      expect((await c.closed).code).toBe(1000);
      const turns = checkTurns(c.events);
      expect(turns, summary(c.events)).toHaveLength(1);
      heard.push(endOf(turns[0]!));
    }
    expect(words(heard[0]!), heard[0]).toContain('sunday');
    for (const text of heard.slice(1)) {
      expect(words(text), text).toContain('sunny');
      expect(words(text), text).not.toContain('sunday');
    }
  }, 60_000);

  it('bad messages get error events with Cartesia\u2019s fields (a bad config changes nothing); the session carries on', async () => {
    const id = requestId('turns-bad');
    const c = await turnsSession(id, { turn_end_threshold: '0.2' });
    await c.until((e) => e.type === 'connected');
    const bad = [
      'finalize',
      '{"type":"dance"}',
      JSON.stringify({ type: 'config', turn: { end_threshold: 1.5 } }),
      JSON.stringify({ type: 'config', turn: { eager_end_threshold: 0.1 } }),
      JSON.stringify({ type: 'config', turn: { end_timeout_ms: '300' } }),
      JSON.stringify({ type: 'config', turn: { silence_ms: 300 } }),
      JSON.stringify({ type: 'config', turn: [] }),
    ];
    for (const m of bad) c.command(m);
    const s = concat(trimSilence((await speech(CALL)).samples), silence(2));
    await c.stream(s16le(s), FAST);
    c.command({ type: 'close' });
    expect((await c.closed).code).toBe(1000);
    const errors = c.ofType('error');
    expect(errors, summary(c.events)).toHaveLength(bad.length);
    for (const e of errors) {
      expect(e).toMatchObject({ type: 'error', code: 'invalid_message', error_code: 'invalid_message', status_code: 400, request_id: id });
      expect(typeof e.title).toBe('string');
      expect(typeof e.message).toBe('string');
    }
    expect(errors[2]!.message).toContain('turn.end_threshold');
    // eager end 0.1 would lie below the end 0.2 the session has.
    expect(errors[3]!.message).toMatch(/turn\.eager_end_threshold \(0\.1\) must be above turn\.end_threshold \(0\.2\)/);
    expect(errors[5]!.message).toContain('silence_ms');
    // The session went on: the sentence makes one turn.
    const turns = checkTurns(c.events);
    expect(turns).toHaveLength(1);
    expect(wer(CALL, endOf(turns[0]!))).toBeLessThanOrEqual(0.25);
  }, 60_000);

  it('an org that runs out of credit mid-session: an error with status_code 402, close 1008, exactly the 2 s paid for billed', async () => {
    const prisma = h.testDb.db.prisma;
    const org = await createOrg(h.testDb.db, { name: 'turns short of credit', creditsMicros: 250n });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const audio = concat((await speech(FOX)).samples, (await speech(CALL)).samples);
    const id = requestId('turns-1008');
    const c = await openSession(h, { model: 'local-stt', api_key: key }, { path: PATH, headers: { 'x-request-id': id } });
    void c.stream(s16le(audio), { frameBytes: 3200, intervalMs: 100 });
    const { code, reason } = await c.closed;
    expect(code).toBe(1008);
    expect(reason).toBe('insufficient_quota');
    expect(c.events.at(-1)).toMatchObject({ type: 'error', code: 'insufficient_quota', error_code: 'insufficient_quota', status_code: 402, request_id: id });
    const billed = await expectDebited(h, id, audioCost(2000));
    expect(billed.audioMillis).toBe(2000);
    expect(billed.usage.every((u) => u.route === 'stt.turns.websocket' && u.modality === 'stt' && u.modelId === 'local-stt')).toBe(true);
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(250n - audioCost(2000));
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n);
  });
});
