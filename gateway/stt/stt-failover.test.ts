// In-session failover of streaming STT through the real gateway (real runtime, throw-away SQLite
// or PostgreSQL database, real WebSockets) between two scripted engines of different protocols:
// one model served by a scripted Deepgram then a scripted Cartesia, another the other way round.
// The first engine fails (closes with 1011, drops the connection, stalls, or sends a frame that
// is not JSON) at its first message, right after its first final, or in place of its last final;
// the client streams voiced bursts (test/support/speech-bursts.ts) that the gateway's turn
// detector hears as two turns of three words, and the scripted engines as one word per burst.
// The detector is patient, so that no evidence ends a turn in its 0.3 s pauses: balanced, a
// punctuated interim (Deepgram's "Bravo.") in hand 0.24 s into a pause ends the turn there, and
// whether it is in hand by then is the event loop's timing; a frame late, the turn ended with the
// next burst's first 0.1 s already sent to the engine, and the turn's finalize cut that word in two.
// Asserted: every burst is transcribed exactly once, in order, at its own time (word times are
// the session's across the switch), no error and a clean close, one `engine.switched` event
// (asked with failover_events=true), the audio billed exactly once, and the next session served
// by the healthy engine only. Also: cartesia-js and /v1/listen (Deepgram's dialect) see no event
// of their protocols' unknown to them; the request log's row per turn names the failover on the
// turn it happened in. Stalls are found on the session's clock, which the test moves.
// Hedging (model `hedge-dg-ca`, capabilities.hedge): both engines opened at once and fed the same
// audio; the one that holds back its messages (a `stall` at its first: slower than any) sees its
// socket closed while the session goes on, the other's transcript is the client's, billed once; with
// a word from neither, the race ends after HEDGE_MAX_SECONDS of audio; off, one engine is opened.
// A finalize taken over (SVC_STT_FINALIZE_HEDGE_MS): the engine silent at a finalize (a `stall`
// in place of its last final) is joined by the other engine once the session's clock has moved
// the hedge delay only (never the stall allowance): the other's final is the client's, once; an
// engine that holds its answer back (`hold`) but gives it within the delay (its first answer,
// with words, came at once: half the floor) keeps the session, no
// other engine opened; one that answers after the other began keeps it too, the other closed.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { until } from '../../test/support/poll.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { startScriptedDeepgram, type ScriptedDeepgram } from '../../test/support/scripted-deepgram.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import type { SocketFault, SocketFaultKind } from '../../test/support/socket-faults.ts';
import { speechBursts } from '../../test/support/speech-bursts.ts';
import { audioCost, expectDebited, openSession, refusedUpgrade, s16le, summary, type SttEvent } from '../../test/support/stt-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { upstreamLabel } from '../metrics/gateway-metrics.ts';
import { HEDGE_MAX_SECONDS, TAKEOVER_ANSWERED_FLOOR_SHARE } from './engine-stream.ts';

const require = createRequire(import.meta.url);
const { Cartesia } = require('@cartesia/cartesia-js') as typeof import('@cartesia/cartesia-js');

const DG_KEY = 'dg_failover_secret_51c0e2';
const CA_KEY = 'sk_car_failover_secret_9e01';
process.env.FAILOVER_DG_KEY = DG_KEY;
process.env.FAILOVER_CA_KEY = CA_KEY;
const STT_PRICE = 100_000_000n;
const STALL_SECONDS = 2;
const HEDGE_MS = 200;
/**
 * The hedge delay of a finalize once the engine answered one with words (the first turn's, on this
 * clock in no time): the floor's share. Before the first turn's answer arrives it is HEDGE_MS.
 */
const ANSWERED_HEDGE_MS = HEDGE_MS * TAKEOVER_ANSWERED_FLOOR_SHARE;
const RATE = 16000;
/** Two turns of three words (the gateway's detector ends a turn after the long pause). */
const BURSTS: [number, number][] = [
  [0.3, 0.6],
  [0.9, 1.2],
  [1.5, 1.8],
  [3.6, 3.9],
  [4.2, 4.5],
  [4.8, 5.1],
];
const TOTAL_SECONDS = 6.8;
/** The gateway finds the turns, the same two whatever the engine's transcript says and whenever it comes (see above). */
const TURNS = { turn_source: 'gateway', turn_detection: 'patient' };
const AUDIO = s16le(speechBursts(RATE, BURSTS, TOTAL_SECONDS));
const AUDIO_MILLIS = (AUDIO.length / 2 / RATE) * 1000;

const clock = manualClock(Date.UTC(2026, 0, 1));
let h: GatewayHarness;
let dg: ScriptedDeepgram;
let ca: ScriptedCartesia;

const HEDGED = 'hedge-dg-ca';
type ModelId = 'fo-dg-then-ca' | 'fo-ca-then-dg' | typeof HEDGED;
const MODELS: { id: ModelId; first: 'deepgram' | 'cartesia' }[] = [
  { id: 'fo-dg-then-ca', first: 'deepgram' },
  { id: 'fo-ca-then-dg', first: 'cartesia' },
];

beforeAll(async () => {
  [dg, ca] = await Promise.all([startScriptedDeepgram({ apiKey: DG_KEY }), startScriptedCartesia({ apiKey: CA_KEY, words: ['one', 'two', 'three'] })]);
  h = await startGateway({
    creditsMicros: 100_000_000n,
    clock,
    env: {
      SVC_HEALTH_CHECK_SECONDS: '3600',
      SVC_STT_STALL_SECONDS: String(STALL_SECONDS),
      SVC_STT_FINALIZE_HEDGE_MS: String(HEDGE_MS),
      SVC_STT_IDLE_SECONDS: '3600',
      SVC_STT_MAX_SILENCE_SECONDS: '3600',
    },
  });
  const prisma = h.testDb.db.prisma;
  const deepgram = (weight: number) => ({ url: dg.url, protocol: 'deepgram', upstreamModel: 'nova-3', apiKeyEnv: 'FAILOVER_DG_KEY', weight });
  const cartesia = (weight: number) => ({ url: ca.url, protocol: 'cartesia', upstreamModel: 'ink-whisper', apiKeyEnv: 'FAILOVER_CA_KEY', weight });
  // Weighted 99 to 1: with Math.random() at 0.5 the first is picked first (upstreamOrder: weighted first pick).
  for (const [id, upstreams] of [
    ['fo-dg-then-ca', [deepgram(99), cartesia(1)]],
    ['fo-ca-then-dg', [cartesia(99), deepgram(1)]],
  ] as const) {
    for (const upstream of upstreams) await upsertModel(prisma, checkProtocol, { id, modality: 'stt', prices: { picoPerSecond: STT_PRICE }, upstream });
  }
  for (const upstream of [deepgram(99), cartesia(1)]) {
    await upsertModel(prisma, checkProtocol, { id: HEDGED, modality: 'stt', prices: { picoPerSecond: STT_PRICE }, hedge: true, upstream });
  }
  await h.runtime.ctx.registry.refresh();
}, 60_000);

beforeEach(() => {
  dg.sttFault = undefined;
  ca.sttFault = undefined;
  vi.spyOn(Math, 'random').mockReturnValue(0.5);
  // Each case starts with both engines in service (a failover takes the failed one out at once).
  const { ctx } = h.runtime;
  for (const id of [...MODELS.map((m) => m.id), HEDGED]) for (const u of ctx.registry.resolve(id, 'stt', null).upstreams) ctx.health.record(u, { ok: true });
});

afterAll(async () => {
  vi.restoreAllMocks();
  await h?.close();
  await Promise.allSettled([dg?.close(), ca?.close()]);
});

type Engine = 'deepgram' | 'cartesia';
const socketsOf = (engine: Engine) => (engine === 'deepgram' ? dg.sockets.length : ca.sttSockets.length);
const peerOf = (engine: Engine) => (engine === 'deepgram' ? dg : ca);
const other = (engine: Engine): Engine => (engine === 'deepgram' ? 'cartesia' : 'deepgram');
/** The engine's socket opened after `before` sockets, once it is. */
const socketAfter = (engine: Engine, before: number) => until(`${engine}'s socket`, () => (engine === 'deepgram' ? dg.sockets[before] : ca.sttSockets[before]));
/** The words each scripted engine hears the bursts as (Deepgram's punctuated: "Alpha."). */
const WORDS: Record<Engine, RegExp> = { deepgram: /^(alpha|bravo|charlie|delta|echo|foxtrot)\.?$/i, cartesia: /^(one|two|three)$/ };

interface Word {
  word: string;
  start: number;
  end: number;
}

/** Streams the bursts, closes, moves the clock past a stall if the fault is one, and returns what the client saw. */
async function session(model: ModelId, fault?: Omit<SocketFault, 'shown'>, first?: 'deepgram' | 'cartesia') {
  let shown = false;
  if (fault && first) peerOf(first).sttFault = { ...fault, shown: () => (shown = true) };
  const client = await openSession(h, { model, sample_rate: String(RATE), ...TURNS, failover_events: 'true', api_key: h.key });
  const started = await client.until((e) => e.type === 'session.started');
  await client.stream(AUDIO, { frameBytes: 3200, intervalMs: 0 });
  client.command({ type: 'close' });
  if (fault?.kind === 'stall') {
    // The engine went silent: the session notices on its clock (audio written, or a finalize asked, and nothing heard for the stall time),
    // once it has heard the finals sent before the silence (moved earlier, the clock would end the engine with its last final on the way).
    const finalsSent = fault.afterFinals;
    await until('the stall to be noticed', () => {
      if (client.ofType('engine.switched').length > 0) return true;
      if (shown && finalsWithText(client.events) >= finalsSent) clock.advance(STALL_SECONDS * 1000);
      return false;
    });
  }
  const closed = await client.closed;
  return { client, closed, requestId: started.request_id as string };
}

const finalsWithText = (events: SttEvent[]) => events.filter((e) => e.type === 'transcript' && e.is_final && e.text).length;

/** Two turns, each turn.finalized carrying exactly the text of the finals since the turn before it (across a switch too). */
function expectTurnTextsExact(events: SttEvent[]): void {
  let texts: string[] = [];
  let turns = 0;
  for (const e of events) {
    if (e.type === 'transcript' && e.is_final && e.text) texts.push(e.text as string);
    if (e.type !== 'turn.finalized') continue;
    expect(e.transcript, summary(events)).toBe(texts.join(' '));
    texts = [];
    turns++;
  }
  expect(turns, summary(events)).toBe(2);
  expect(turns).toBe(events.filter((e) => e.type === 'turn.end').length);
}

/** Every burst heard exactly once, in order, at its own time, whichever engine heard it. */
function expectEveryWordOnce(events: SttEvent[]): Word[] {
  const finals = events.filter((e) => e.type === 'transcript' && e.is_final);
  const words = finals.flatMap((f) => f.words as Word[]);
  expect(
    words.map((w) => [w.start, w.end]),
    summary(events),
  ).toHaveLength(BURSTS.length);
  words.forEach((w, i) => {
    const [start, end] = BURSTS[i]!;
    // The engines' 20 ms frames and their burst-ending silence: within 0.15 s of the burst.
    expect(Math.abs(w.start - start), `word ${i} ${JSON.stringify(w)}`).toBeLessThan(0.15);
    expect(Math.abs(w.end - end), `word ${i} ${JSON.stringify(w)}`).toBeLessThan(0.15);
    if (i > 0) expect(w.start).toBeGreaterThanOrEqual(words[i - 1]!.end);
  });
  return words;
}

async function expectBilledOnce(requestId: string): Promise<void> {
  const ledger = await expectDebited(h, requestId, audioCost(AUDIO_MILLIS, STT_PRICE));
  expect(ledger.audioMillis).toBe(AUDIO_MILLIS);
}

describe('no fault', () => {
  it.each(MODELS)('$id: the first engine hears every word once, billed once, no switch', async ({ id, first }) => {
    const before = socketsOf(first);
    const { client, closed, requestId } = await session(id);
    expect(closed.code, summary(client.events)).toBe(1000);
    expect(client.ofType('error')).toEqual([]);
    expect(client.ofType('engine.switched')).toEqual([]);
    expectEveryWordOnce(client.events);
    expect(client.events.filter((e) => e.type === 'transcript' && e.is_final).length).toBeGreaterThanOrEqual(2);
    expect(socketsOf(first)).toBe(before + 1);
    await expectBilledOnce(requestId);
  });
});

/** The faults of a failing engine (`hold` is a slow one: below). */
type FailingKind = Exclude<SocketFaultKind, 'hold'>;
const KINDS: FailingKind[] = ['close', 'reset', 'malformed', 'stall'];
const PLACES = [
  { place: 'at its first message', fault: { afterFinals: 0 } },
  { place: 'right after its first final', fault: { afterFinals: 1 } },
  { place: 'in place of its last final', fault: { afterFinals: 1, onFinal: true } },
];
const REASONS: Record<FailingKind, string[]> = {
  close: ['closed', 'error'],
  reset: ['closed', 'error'],
  malformed: ['protocol'],
  stall: ['stall', 'finalize_unanswered'],
};

describe.each(MODELS)('$id: the first engine fails, the other carries on', ({ id, first }) => {
  it.each(KINDS.flatMap((kind) => PLACES.map((p) => ({ kind, ...p }))))('$kind $place', async ({ kind, fault }) => {
    const next = other(first);
    const [firstBefore, nextBefore] = [socketsOf(first), socketsOf(next)];
    const { client, closed, requestId } = await session(id, { kind, ...fault }, first);
    expect(closed.code, summary(client.events)).toBe(1000);
    expect(client.ofType('error')).toEqual([]);
    const switched = client.ofType('engine.switched');
    expect(switched, summary(client.events)).toHaveLength(1);
    expect(REASONS[kind]).toContain(switched[0]!.reason);
    // The replay starts right after the last final's audio, and before the first word no final has covered.
    const before = client.events.slice(0, client.events.indexOf(switched[0]!));
    const settled = before.filter((e) => e.type === 'transcript' && e.is_final).flatMap((e) => e.words as Word[]);
    const at = switched[0]!.at as number;
    if (fault.afterFinals === 0) expect(settled).toEqual([]);
    else expect(settled.length).toBeGreaterThan(0);
    expect(at).toBeGreaterThanOrEqual(settled.at(-1)?.end ?? 0);
    expect(at).toBeLessThanOrEqual(BURSTS[settled.length]![0]);
    expectEveryWordOnce(client.events);
    expectTurnTextsExact(client.events);
    expect([socketsOf(first) - firstBefore, socketsOf(next) - nextBefore]).toEqual([1, 1]);
    await expectBilledOnce(requestId);

    // The failed engine is out of service at once: the next session goes to the other only.
    const again = await session(id);
    expect(again.closed.code, summary(again.client.events)).toBe(1000);
    expect(again.client.ofType('engine.switched')).toEqual([]);
    expectEveryWordOnce(again.client.events);
    expect([socketsOf(first) - firstBefore, socketsOf(next) - nextBefore]).toEqual([1, 2]);
  });
});

describe("Deepgram's protocol on /v1/listen", () => {
  it('the engine stalls mid-session: only Deepgram’s messages, every word once in the finals, the rest heard by Cartesia', async () => {
    let shown = false;
    dg.sttFault = { kind: 'stall', afterFinals: 1, shown: () => (shown = true) };
    const cartesiaBefore = ca.sttSockets.length;
    const client = await openSession(
      h,
      { model: 'fo-dg-then-ca', encoding: 'linear16', sample_rate: String(RATE), interim_results: 'true' },
      { path: '/v1/listen', headers: { authorization: `Token ${h.key}` } },
    );
    await client.stream(AUDIO, { frameBytes: 3200, intervalMs: 0 });
    client.command({ type: 'CloseStream' });
    await until('the stall to be noticed and the session over', async () => {
      if (shown) clock.advance(STALL_SECONDS * 1000);
      return client.ws.readyState === client.ws.CLOSED;
    });
    const { code } = await client.closed;
    expect(code, summary(client.events)).toBe(1000);
    expect([...new Set(client.events.map((e) => e.type))].filter((t) => !['Results', 'Metadata', 'SpeechStarted', 'UtteranceEnd'].includes(t))).toEqual([]);
    const finals = client.events.filter((e) => e.type === 'Results' && e.is_final) as unknown as { channel: { alternatives: { words: Word[] }[] } }[];
    expectEveryWordOnce(finals.map((f) => ({ type: 'transcript', is_final: true, words: f.channel.alternatives[0]!.words })));
    expect(ca.sttSockets.length).toBe(cartesiaBefore + 1);
  });
});

describe('the request log', () => {
  it('a row per turn, in order, on the audio clock; the turn the engine failed in names the failover', async () => {
    const { client, closed, requestId } = await session('fo-dg-then-ca', { kind: 'reset', afterFinals: 1 }, 'deepgram');
    expect(closed.code, summary(client.events)).toBe(1000);
    const prisma = h.testDb.db.prisma;
    const turnEnds = client.ofType('turn.end').length;
    expect(turnEnds).toBeGreaterThanOrEqual(2);
    const turns = await until(
      'the session turns to be written',
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const row = await prisma.requestLog.findFirst({ where: { requestId } });
        const rows = row ? await prisma.requestLogTurn.findMany({ where: { requestLogId: row.id }, orderBy: { turnIndex: 'asc' } }) : [];
        return rows.length === turnEnds && rows;
      },
      { intervalMs: 50 },
    );
    expect(turns.map((t) => t.turnIndex)).toEqual([...Array(turnEnds).keys()]);
    for (const [i, t] of turns.entries()) {
      if (i > 0) expect(t.startMs).toBeGreaterThan(turns[i - 1]!.startMs);
      expect(t.speechEndMs).toBeGreaterThan(0);
      expect(t.endOfTurnMs).toBeGreaterThanOrEqual(t.speechEndMs!);
    }
    // The first final came before the fault: its turn went through no failover; exactly one later turn did.
    expect(turns[0]!.failoverReason).toBeNull();
    expect(turns.filter((t) => t.failoverReason !== null).map((t) => t.failoverReason)).toEqual([expect.stringMatching(/^(closed|error) \(mid stream\)$/)]);
  });
});

describe('failover_events', () => {
  it('is true or false: anything else is refused before the upgrade with 400 invalid_request naming it', async () => {
    const refused = await refusedUpgrade(h, { model: 'fo-dg-then-ca', failover_events: 'yes', api_key: h.key });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'invalid_request', param: 'failover_events' } });
  });

  it("in Cartesia's dialect: engine.switched carries the session's request_id", async () => {
    dg.sttFault = { kind: 'close', afterFinals: 1 };
    const client = await openSession(h, {
      model: 'fo-dg-then-ca',
      sample_rate: String(RATE),
      failover_events: 'true',
      cartesia_version: '2025-04-16',
      api_key: h.key,
    });
    const started = await client.until((e) => e.type === 'session.started');
    await client.stream(AUDIO, { frameBytes: 3200, intervalMs: 0 });
    client.command('close');
    await client.closed;
    expect(client.ofType('engine.switched')).toEqual([
      { type: 'engine.switched', reason: expect.any(String), at: expect.any(Number), request_id: started.request_id },
    ]);
  });
});

describe('no upstream left', () => {
  it('both engines fail: an error event and close 1011 after trying both; the audio the session took is billed once', async () => {
    dg.sttFault = { kind: 'reset', afterFinals: 0 };
    ca.sttFault = { kind: 'close', afterFinals: 0 };
    const { client, closed, requestId } = await session('fo-dg-then-ca');
    expect(closed.code, summary(client.events)).toBe(1011);
    expect(client.ofType('engine.switched')).toHaveLength(1);
    expect(client.ofType('error')).toHaveLength(1);
    // What the session took before it ended (audio still on its way is not), billed once.
    const taken = Math.round((client.ofType('session.closed')[0]!.audio_seconds as number) * 1000);
    expect(taken).toBeGreaterThan(0);
    expect(taken).toBeLessThanOrEqual(AUDIO_MILLIS);
    const ledger = await expectDebited(h, requestId, audioCost(taken, STT_PRICE));
    expect(ledger.audioMillis).toBe(taken);
  });
});

describe('a real client: @cartesia/cartesia-js stt.manualFinalize on /stt/websocket', () => {
  it('the engine drops mid-session: the client reads every word once, no event it does not know, flush_done and done; billed once', async () => {
    dg.sttFault = { kind: 'reset', afterFinals: 1 };
    const client = new Cartesia({ apiKey: h.key, baseURL: h.url, maxRetries: 0 });
    const ws = client.stt.manualFinalize.websocket({ model: 'fo-dg-then-ca', encoding: 'pcm_s16le', sample_rate: RATE });
    const log = new EventLog<SttEvent>();
    const errors: unknown[] = [];
    const closed = new Promise<number>((resolve) => ws.on('close', (code: number) => resolve(code)));
    ws.on('event', (e) => log.push(e as unknown as SttEvent));
    ws.on('error', (e: unknown) => errors.push(e));
    for (let at = 0; at < AUDIO.length; at += 3200) ws.sendRaw(AUDIO.subarray(at, Math.min(AUDIO.length, at + 3200)));
    ws.send('finalize');
    await log.first((e) => e.type === 'flush_done');
    ws.send('close');
    await log.first((e) => e.type === 'done');
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    expect(
      log.events
        .map((e) => e.type)
        .filter((t) => !['session.started', 'transcript', 'turn.start', 'turn.end', 'turn.finalized', 'flush_done', 'session.closed', 'done'].includes(t)),
    ).toEqual([]);
    expectEveryWordOnce(log.events);
    await expectBilledOnce(log.events[0]!.request_id as string);
  });
});

describe('hedging (capabilities.hedge): the session opened on both engines', () => {
  const hedgeWins = async (engine: Engine) => {
    const metrics = await h.runtime.ctx.metrics.registry.metrics();
    const url = engine === 'deepgram' ? dg.url : ca.url;
    const line = metrics.split('\n').find((l) => l.startsWith(`svc_hedges_total{model="${HEDGED}",upstream="${upstreamLabel(url)}"} `));
    return Number(line?.split(' ')[1] ?? 0);
  };

  it.each(['deepgram', 'cartesia'] as Engine[])(
    '%s slower: its socket is closed at the first message of the other, which transcribes everything; billed once',
    async (slow) => {
      const fast = other(slow);
      const before = { deepgram: socketsOf('deepgram'), cartesia: socketsOf('cartesia') };
      const wins = await hedgeWins(fast);
      // Slower than any: it takes the audio and holds back its first message.
      peerOf(slow).sttFault = { kind: 'stall', afterFinals: 0 };
      const client = await openSession(h, { model: HEDGED, sample_rate: String(RATE), ...TURNS, failover_events: 'true', api_key: h.key });
      onTestFinished(() => client.ws.close());
      const started = await client.until((e) => e.type === 'session.started');
      await client.stream(AUDIO, { frameBytes: 3200, intervalMs: 0 });
      await client.until((e) => e.type === 'transcript');
      // The session is live (the client has not closed it): the slow engine's socket closed as the race was decided.
      const [slowSocket, fastSocket] = await Promise.all([socketAfter(slow, before[slow]), socketAfter(fast, before[fast])]);
      let fastClosed = false;
      void fastSocket.closed.then(() => (fastClosed = true));
      await slowSocket.closed;
      expect(fastClosed).toBe(false);
      expect(client.ws.readyState).toBe(client.ws.OPEN);
      client.command({ type: 'close' });
      const closed = await client.closed;
      expect(closed.code, summary(client.events)).toBe(1000);
      expect(client.ofType('error')).toEqual([]);
      expect(client.ofType('engine.switched')).toEqual([]);
      const words = expectEveryWordOnce(client.events);
      for (const w of words) expect(w.word).toMatch(WORDS[fast]);
      expectTurnTextsExact(client.events);
      expect([socketsOf(slow) - before[slow], socketsOf(fast) - before[fast]]).toEqual([1, 1]);
      await expectBilledOnce(started.request_id as string);
      // Recorded by the winner; the loser stays in service (losing a race is no failure).
      expect(await hedgeWins(fast)).toBe(wins + 1);
      expect(h.runtime.ctx.registry.healthyUpstreams(h.runtime.ctx.registry.resolve(HEDGED, 'stt', null))).toHaveLength(2);
    },
  );

  it(`a word from neither: the race ends after ${HEDGE_MAX_SECONDS} s of audio, the other engine closed, having been sent no more than that`, async () => {
    const before = { deepgram: socketsOf('deepgram'), cartesia: socketsOf('cartesia') };
    const silence = Buffer.alloc((HEDGE_MAX_SECONDS + 2) * RATE * 2);
    const client = await openSession(h, { model: HEDGED, sample_rate: String(RATE), turn_source: 'gateway', api_key: h.key });
    onTestFinished(() => client.ws.close());
    const started = await client.until((e) => e.type === 'session.started');
    await client.stream(silence, { frameBytes: 3200, intervalMs: 0 });
    const sockets = await Promise.all([socketAfter('deepgram', before.deepgram), socketAfter('cartesia', before.cartesia)]);
    // One of them (the one that opened second) is closed while the session is live.
    const loser = await Promise.race(sockets.map((socket) => socket.closed.then(() => socket)));
    expect(client.ws.readyState).toBe(client.ws.OPEN);
    expect(loser.audioBytes).toBeLessThanOrEqual((HEDGE_MAX_SECONDS + 0.1) * RATE * 2);
    expect(loser.audioBytes).toBeGreaterThan(0);
    client.command({ type: 'close' });
    expect((await client.closed).code, summary(client.events)).toBe(1000);
    expect(client.ofType('error')).toEqual([]);
    const ledger = await expectDebited(h, started.request_id as string, audioCost(silence.length / 2 / (RATE / 1000), STT_PRICE));
    expect(ledger.audioMillis).toBe((HEDGE_MAX_SECONDS + 2) * 1000);
  });

  it('off (the default): one engine opened', async () => {
    const before = { deepgram: socketsOf('deepgram'), cartesia: socketsOf('cartesia') };
    const { client, closed, requestId } = await session('fo-dg-then-ca');
    expect(closed.code, summary(client.events)).toBe(1000);
    expectEveryWordOnce(client.events);
    expect([socketsOf('deepgram') - before.deepgram, socketsOf('cartesia') - before.cartesia]).toEqual([1, 0]);
    await expectBilledOnce(requestId);
  });
});

describe(`a finalize taken over: the engine silent ${HEDGE_MS} ms (SVC_STT_FINALIZE_HEDGE_MS) after it was asked`, () => {
  /** svc_failovers_total of the model's upstream on `engine` for `reason`, both phases. */
  const failovers = async (model: ModelId, engine: Engine, reason: string) => {
    const metrics = await h.runtime.ctx.metrics.registry.metrics();
    const labels = [`model="${model}"`, `upstream="${upstreamLabel(peerOf(engine).url)}"`, `reason="${reason}"`];
    return metrics
      .split('\n')
      .filter((l) => l.startsWith('svc_failovers_total{') && labels.every((label) => l.includes(label)))
      .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
  };

  /** Opens a session, streams the bursts and closes; returns the client and its request id. */
  async function streamed(model: ModelId) {
    const client = await openSession(h, { model, sample_rate: String(RATE), ...TURNS, failover_events: 'true', api_key: h.key });
    onTestFinished(() => client.ws.close());
    const started = await client.until((e) => e.type === 'session.started');
    await client.stream(AUDIO, { frameBytes: 3200, intervalMs: 0 });
    client.command({ type: 'close' });
    return { client, requestId: started.request_id as string };
  }

  /** The final words, in order, as each engine heard them. */
  const finalWords = (events: SttEvent[]) => events.filter((e) => e.type === 'transcript' && e.is_final).flatMap((e) => (e.words as Word[]).map((w) => w.word));

  it.each(MODELS)(
    '$id: silent at its last final: the other engine, started at the hedge delay, gives that final once; no error, billed once, the engine failed over',
    async ({ id, first }) => {
      const next = other(first);
      const before = { first: socketsOf(first), next: socketsOf(next) };
      const failedBefore = await failovers(id, first, 'finalize_unanswered');
      let shown = false;
      peerOf(first).sttFault = { kind: 'stall', afterFinals: 1, onFinal: true, shown: () => (shown = true) };
      const { client, requestId } = await streamed(id);
      await until('the engine to withhold its final', () => shown, { intervalMs: 10 });
      // The hedge delay only: the stall allowance (STALL_SECONDS) is never reached on the session's clock.
      clock.advance(HEDGE_MS);
      const closed = await client.closed;
      expect(closed.code, summary(client.events)).toBe(1000);
      expect(client.ofType('error')).toEqual([]);
      const switched = client.ofType('engine.switched');
      expect(switched, summary(client.events)).toEqual([{ type: 'engine.switched', reason: 'finalize_unanswered', at: expect.any(Number) }]);
      expectEveryWordOnce(client.events);
      expectTurnTextsExact(client.events);
      // What the engine finalized is its own; the rest, from where its last final's words end, the other's.
      const at = client.events.indexOf(switched[0]!);
      const settled = client.events.slice(0, at).filter((e) => e.type === 'transcript' && e.is_final);
      const mine = finalWords(settled);
      expect(mine.length).toBeGreaterThan(0);
      for (const w of mine) expect(w).toMatch(WORDS[first]);
      const theirs = finalWords(client.events.slice(at));
      expect(mine.length + theirs.length).toBe(BURSTS.length);
      for (const w of theirs) expect(w).toMatch(WORDS[next]);
      const lastSettled = settled.flatMap((e) => e.words as Word[]).at(-1)!;
      expect(switched[0]!.at).toBeGreaterThanOrEqual(lastSettled.end);
      expect(switched[0]!.at).toBeLessThanOrEqual(BURSTS[mine.length]![0]);
      expect([socketsOf(first) - before.first, socketsOf(next) - before.next]).toEqual([1, 1]);
      await expectBilledOnce(requestId);
      expect(await failovers(id, first, 'finalize_unanswered')).toBe(failedBefore + 1);
    },
  );

  it.each(MODELS)('$id: slow to answer but within the hedge delay: no other engine opened, nothing switched', async ({ id, first }) => {
    const next = other(first);
    const before = { first: socketsOf(first), next: socketsOf(next) };
    let shown = false;
    const fault: SocketFault = { kind: 'hold', afterFinals: 1, onFinal: true, shown: () => (shown = true) };
    peerOf(first).sttFault = fault;
    const { client, requestId } = await streamed(id);
    await until('the engine to hold its final back', () => shown, { intervalMs: 10 });
    clock.advance(ANSWERED_HEDGE_MS - 1);
    fault.release!();
    const closed = await client.closed;
    expect(closed.code, summary(client.events)).toBe(1000);
    expect([client.ofType('error'), client.ofType('engine.switched')]).toEqual([[], []]);
    expectEveryWordOnce(client.events);
    for (const w of finalWords(client.events)) expect(w).toMatch(WORDS[first]);
    expect([socketsOf(first) - before.first, socketsOf(next) - before.next]).toEqual([1, 0]);
    await expectBilledOnce(requestId);
  });

  it.each(MODELS)(
    '$id: answering after the other engine began, before it answers: the engine is kept, the other closed; its answer, released late, never reaches the client',
    async ({ id, first }) => {
      const next = other(first);
      const before = { first: socketsOf(first), next: socketsOf(next) };
      const failedBefore = await failovers(id, first, 'finalize_unanswered');
      const shown = { first: false, next: false };
      const slow: SocketFault = { kind: 'hold', afterFinals: 1, onFinal: true, shown: () => (shown.first = true) };
      const later: SocketFault = { kind: 'hold', afterFinals: 0, onFinal: true, shown: () => (shown.next = true) };
      peerOf(first).sttFault = slow;
      peerOf(next).sttFault = later;
      const { client, requestId } = await streamed(id);
      await until('the engine to hold its final back', () => shown.first, { intervalMs: 10 });
      clock.advance(HEDGE_MS);
      // The other engine opened, heard the audio since the last final and the finalize, and holds its answer back.
      await until('the other engine to hold its final back', () => shown.next, { intervalMs: 10 });
      const otherSocket = await socketAfter(next, before.next);
      const seen = client.events.length;
      slow.release!();
      // The engine's answer (its final) reaches the client; then the other's, released late, is the loser's: never heard.
      await client.until((e) => e.type === 'transcript' && e.is_final === true, { from: seen });
      later.release!();
      const closed = await client.closed;
      await otherSocket.closed;
      expect(closed.code, summary(client.events)).toBe(1000);
      expect([client.ofType('error'), client.ofType('engine.switched')]).toEqual([[], []]);
      expectEveryWordOnce(client.events);
      expectTurnTextsExact(client.events);
      for (const w of finalWords(client.events)) expect(w).toMatch(WORDS[first]);
      expect([socketsOf(first) - before.first, socketsOf(next) - before.next]).toEqual([1, 1]);
      await expectBilledOnce(requestId);
      // Nothing failed: the engine stays in service.
      expect(await failovers(id, first, 'finalize_unanswered')).toBe(failedBefore);
      expect(h.runtime.ctx.registry.healthyUpstreams(h.runtime.ctx.registry.resolve(id, 'stt', null))).toHaveLength(2);
    },
  );

  it('the engine’s own answer, released after it lost, never reaches the client', async () => {
    const before = { deepgram: socketsOf('deepgram'), cartesia: socketsOf('cartesia') };
    let shown = false;
    const slow: SocketFault = { kind: 'hold', afterFinals: 1, onFinal: true, shown: () => (shown = true) };
    dg.sttFault = slow;
    const { client, requestId } = await streamed('fo-dg-then-ca');
    await until('the engine to hold its final back', () => shown, { intervalMs: 10 });
    clock.advance(HEDGE_MS);
    await client.until((e) => e.type === 'engine.switched');
    // Deepgram's final for the second turn, sent now if its socket is still open, is the loser's.
    slow.release!();
    const closed = await client.closed;
    expect(closed.code, summary(client.events)).toBe(1000);
    expect(client.ofType('engine.switched')).toEqual([expect.objectContaining({ reason: 'finalize_unanswered' })]);
    expectEveryWordOnce(client.events);
    const heard = finalWords(client.events);
    expect(heard.slice(3).every((w) => WORDS.cartesia.test(w))).toBe(true);
    expect([socketsOf('deepgram') - before.deepgram, socketsOf('cartesia') - before.cartesia]).toEqual([1, 1]);
    await expectBilledOnce(requestId);
  });
});
