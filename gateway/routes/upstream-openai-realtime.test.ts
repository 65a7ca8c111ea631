// Route tests of the `openai-realtime` protocol through the real gateway (real runtime, throw-away
// SQLite or PostgreSQL database, real WebSockets on both sides) against a scripted Realtime API
// server (test/support/scripted-openai-realtime.ts) in the dialects `ga` (OpenAI GA), `speaches`
// and `vllm`: streaming transcription on GET /stt/websocket with the engine's own turns (server
// VAD, turn_source=auto) and the gateway's (turn_source=gateway, and vLLM always). The client
// sends 16 kHz PCM; OpenAI's dialects take 24 kHz (the session resamples), vLLM 16 kHz (the
// link resamples back). Every way the engine fails (refused key, 4xx/5xx at the upgrade, an
// `error` event, a dropped socket, a hang), the client leaving, failover at open and health
// checks; exact metering throughout.
//
// The scripted peer makes one word per voiced burst it hears ("alpha", "bravo", ...); its server
// VAD opens a turn 300 ms before a burst and closes it 500 ms after the last voiced frame, so
// every transcript, turn and byte here is known. The bursts are speech to the gateway's own
// detector too (test/support/speech-bursts.ts: Silero VAD takes no pure tone for speech), which
// finds the turns where the engine does not.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { getModel, upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedRealtime, type PeerSocket, type RealtimeDialect, type ScriptedRealtime } from '../../test/support/scripted-openai-realtime.ts';
import { speechBursts as bursts } from '../../test/support/speech-bursts.ts';
import { audioCost, expectDebited, ledgerOf, openSession, refusedUpgrade, summary, type SttClient, type SttEvent } from '../../test/support/stt-routes.ts';
import { usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const KEY_ENV = 'REALTIME_ROUTE_TEST_KEY';
const WRONG_KEY_ENV = 'REALTIME_ROUTE_TEST_WRONG_KEY';
const RT_KEY = 'sk-rt-route-secret-8d2f6a1c55';
const WRONG_KEY = 'sk-rt-route-wrong-3b9e07d4aa';
/** pico-USD per second of audio: needs rounding up to a micro-USD. */
const STT_PRICE = 123_456_789n;
/** Nothing listens there (the discard port): connections are refused. */
const DEAD_URL = 'http://127.0.0.1:9';
const UPSTREAM_MODEL = 'gpt-4o-transcribe';

const peers = {} as Record<'ga' | 'speaches' | 'vllm' | 'health', ScriptedRealtime>;
let h: GatewayHarness;
/** SVC_UPSTREAM_TIMEOUT_SECONDS=0.5: the slow engine, and a session outliving the deadline. */
let hs: GatewayHarness;

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;

const upstream = (peer: { url: string }, dialect: RealtimeDialect, apiKeyEnv = KEY_ENV, weight?: number) => ({
  url: peer.url,
  protocol: 'openai-realtime',
  upstreamModel: UPSTREAM_MODEL,
  apiKeyEnv,
  settings: { dialect },
  ...(weight !== undefined && { weight }),
});
const prices = { picoPerSecond: STT_PRICE };

async function registerModels(g: GatewayHarness): Promise<void> {
  for (const dialect of ['ga', 'speaches', 'vllm'] as const) {
    await upsertModel(prisma(g), checkProtocol, { id: `rt-${dialect}`, modality: 'stt', prices, upstream: upstream(peers[dialect], dialect) });
  }
}

beforeAll(async () => {
  const [ga, speaches, vllm, health] = await Promise.all([
    startScriptedRealtime({ dialect: 'ga', apiKey: RT_KEY }),
    startScriptedRealtime({ dialect: 'speaches', apiKey: RT_KEY }),
    startScriptedRealtime({ dialect: 'vllm', apiKey: RT_KEY }),
    startScriptedRealtime({ dialect: 'ga', apiKey: RT_KEY }),
  ]);
  Object.assign(peers, { ga, speaches, vllm, health });
  process.env[KEY_ENV] = RT_KEY;
  process.env[WRONG_KEY_ENV] = WRONG_KEY;
  // No periodic health checks: every check here is the test's own (checkAll).
  [h, hs] = await Promise.all([
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } }),
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_UPSTREAM_TIMEOUT_SECONDS: '0.5' } }),
  ]);
  await Promise.all([registerModels(h), registerModels(hs)]);
  // Our key refused: the variable holds a key the engine does not know.
  await upsertModel(prisma(), checkProtocol, { id: 'rt-ga-badkey', modality: 'stt', prices, upstream: upstream(peers.ga, 'ga', WRONG_KEY_ENV) });
  // Two upstreams, the dead one weighted 99 to 1: with Math.random() at 0.5 it comes first
  // whatever order the database lists them in (upstreamOrder: weighted first pick).
  await upsertModel(prisma(), checkProtocol, {
    id: 'rt-ga-failover',
    modality: 'stt',
    prices,
    upstream: upstream({ url: `${DEAD_URL}/v1` }, 'ga', KEY_ENV, 99),
  });
  await upsertModel(prisma(), checkProtocol, { id: 'rt-ga-failover', modality: 'stt', prices, upstream: upstream(peers.ga, 'ga', KEY_ENV, 1) });
  await upsertModel(prisma(), checkProtocol, { id: 'rt-health', modality: 'stt', prices, upstream: upstream(peers.health, 'ga') });
  await Promise.all([h.runtime.ctx.registry.refresh(), hs.runtime.ctx.registry.refresh()]);
}, 60_000);

afterEach(() => {
  for (const peer of Object.values(peers)) {
    peer.behaviour = { kind: 'ok' };
    peer.modelsStatus = 200;
  }
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.allSettled([h?.close(), hs?.close()]);
  await Promise.allSettled(Object.values(peers).map((p) => p.close()));
  delete process.env[KEY_ENV];
  delete process.env[WRONG_KEY_ENV];
});

// ---------------------------------------------------------------------------------------
// Helpers

async function upstreamIdOf(g: GatewayHarness, modelId: string, url: string): Promise<string> {
  const model = await getModel(prisma(g), modelId);
  return model.upstreams.find((u) => u.url === url)!.id;
}

/** 16-bit little-endian PCM written here. */
function pcm16(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** 100 ms frames at 16 kHz, sent back to back (the gateway keeps their order; nothing here depends on pacing). */
const FRAMES = { frameBytes: 3200, intervalMs: 0 };
/** The same in real time (a live source). */
const LIVE = { frameBytes: 3200, intervalMs: 100 };

/**
 * Three words: "alpha" [0.3, 0.7] and "bravo" [0.9, 1.2] (one turn: 200 ms apart), then
 * "charlie" [2.0, 2.4]; 3.2 s in all.
 */
const threeWords = () =>
  pcm16(
    bursts(
      16000,
      [
        [0.3, 0.7],
        [0.9, 1.2],
        [2.0, 2.4],
      ],
      3.2,
    ),
  );
const THREE_WORDS_MS = 3200;

/**
 * The gateway's turns over threeWords(): each starts where its first word does and ends at its
 * last word's end, within about a VAD frame (32 ms). Events in order, turn events without times.
 */
function expectGatewayTurns(c: SttClient): void {
  const turns = c.events.filter((e) => e.type === 'turn.start' || e.type === 'turn.end');
  expect(
    turns.map((e) => e.type),
    summary(c.events),
  ).toEqual(['turn.start', 'turn.end', 'turn.start', 'turn.end']);
  expect(turns.map((e) => e.at)).toEqual([0.3, 1.2, 2.0, 2.4].map((at) => expect.closeTo(at, 1)));
}

/** Events in short: transcripts as `final text` / `interim text`, others by type. */
const short = (e: SttEvent) => (e.type === 'transcript' ? `${e.is_final ? 'final' : 'interim'} ${String(e.text)}` : e.type);

const sttQuery = (g: GatewayHarness, model: string, over: Record<string, string> = {}) => ({
  model,
  api_key: g.key,
  sample_rate: '16000',
  encoding: 'pcm_s16le',
  ...over,
});

/** The engine socket the gateway opened after `before` sockets. */
const engineSocket = (peer: ScriptedRealtime, before: number): Promise<PeerSocket> => peer.socketAt(before);

/** Events without session.started (whose ids and times vary), as the client got them. */
const eventsAfterStart = (c: SttClient) => c.events.slice(1);
const finals = (c: SttClient) => c.ofType('transcript').filter((e) => e.is_final);
const interimTexts = (c: SttClient) =>
  c
    .ofType('transcript')
    .filter((e) => !e.is_final)
    .map((e) => e.text);

interface TimedWord {
  word: string;
  start: number;
  end: number;
}

/** The final's text, and its words in order, each inside [from, to] with start < end. */
function expectFinal(event: SttEvent | undefined, text: string, from: number, to: number): TimedWord[] {
  expect(event, 'a final transcript').toBeDefined();
  expect(event!.text).toBe(text);
  const words = event!.words as TimedWord[];
  expect(words.map((w) => w.word).join(' ')).toBe(text);
  let last = from;
  for (const w of words) {
    expect(w.start, JSON.stringify(w)).toBeGreaterThanOrEqual(last);
    expect(w.end, JSON.stringify(w)).toBeGreaterThan(w.start);
    expect(w.end, JSON.stringify(w)).toBeLessThanOrEqual(to + 1e-9);
    last = w.end;
  }
  return words;
}

/**
 * The finals of threeWords()' two gateway turns: words spread over the audio each commit
 * covered -- turn 1's from the start to where it was found (after "bravo" ends at 1.2 s, before
 * "charlie" starts at 2.0 s), turn 2's from there to where it was found (before the close).
 */
function expectTurnFinals(c: SttClient): void {
  const [one, two, ...more] = finals(c);
  expect(more).toEqual([]);
  const turnOneFound = expectFinal(one, 'alpha bravo', 0, 2.0).at(-1)!.end;
  expect(turnOneFound).toBeGreaterThan(1.2);
  expectFinal(two, 'charlie', turnOneFound, 3.2);
}

const transcriptEvent = (isFinal: boolean, text: string, words: [string, number, number][]) => ({
  type: 'transcript',
  is_final: isFinal,
  text,
  words: words.map(([word, start, end]) => ({ word, start, end })),
});

/** Never the engine's key, nor the wrong one, in anything a client sees. */
function expectNoKey(text: string): void {
  expect(text).not.toContain(RT_KEY);
  expect(text).not.toContain(WRONG_KEY);
}

/** A session whose engine never opened: the audio it sent is counted, nothing is billed. */
async function expectSessionNotBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string): Promise<void> {
  expect(c.events.at(-1), summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(0n) });
  // The session's end (its last debit, had there been one) is tracked by the lifecycle.
  expect(await g.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  expect((await ledgerOf(g, c.events[0]!.request_id as string)).ledger).toHaveLength(0);
}

/** session.closed is the last event, with exactly this audio and cost; the ledger holds exactly that, once. */
async function expectSessionBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string, modelId: string): Promise<void> {
  const last = c.events.at(-1)!;
  expect(last.type, summary(c.events)).toBe('session.closed');
  expect(c.ofType('session.closed')).toHaveLength(1);
  const cost = audioCost(millis, STT_PRICE);
  expect(last).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(cost) });
  await expectBilledSession(g, c.events[0]!.request_id as string, millis, modelId);
}

async function expectBilledSession(g: GatewayHarness, id: string, millis: number, modelId: string): Promise<void> {
  const cost = audioCost(millis, STT_PRICE);
  const billed = await expectDebited(g, id, cost);
  expect(billed.usageMicros).toBe(cost);
  expect(billed.audioMillis).toBe(millis);
  expect(billed.usage.length).toBeGreaterThan(0);
  expect(billed.usage.every((u) => u.modality === 'stt' && u.route === 'stt.websocket' && u.modelId === modelId)).toBe(true);
}

/** Sends close; the session ends with session.closed and a 1000 close. */
async function closeSession(c: SttClient): Promise<void> {
  c.command({ type: 'close' });
  expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });
}

/** The client events the engine got, appends left out. */
const controlsOf = (s: PeerSocket) => s.received.filter((e) => e.type !== 'input_audio_buffer.append');

/** What `ms` of 16 kHz audio is at 24 kHz, in bytes of PCM16. */
const bytesAt24k = (ms: number) => (ms / 1000) * 24000 * 2;

const GA_VAD = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };

function gaConfig(turnDetection: unknown, extra: Record<string, unknown> = {}) {
  return {
    type: 'session.update',
    session: {
      type: 'transcription',
      audio: { input: { format: { type: 'audio/pcm', rate: 24000 }, transcription: { model: UPSTREAM_MODEL, ...extra }, turn_detection: turnDetection } },
    },
  };
}

// ---------------------------------------------------------------------------------------

describe('dialect ga (OpenAI GA): GET /stt/websocket', () => {
  it('turn_source=auto: server VAD finds the turns (turn.start/turn.end from speech_started/speech_stopped); finals with words in their turn; every sample reaches the engine at 24 kHz; close commits the rest and bills exactly the audio sent', async () => {
    const peer = peers.ga;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga', { language: 'en-US', keyterms: 'Kubernetes,Istio' }));
    await c.until((e) => e.type === 'session.started');
    // The engine is opened at the first audio, not at connect.
    expect(peer.sockets.length).toBe(before);
    const audio = threeWords();
    expect(await c.stream(audio, FRAMES)).toBe(audio.length);
    const socket = await engineSocket(peer, before);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);

    expect(eventsAfterStart(c), summary(c.events)).toEqual([
      // Turn 1: 300 ms of padding before "alpha" (0.3 s), 500 ms of silence after "bravo" (1.2 s).
      { type: 'turn.start', at: 0 },
      transcriptEvent(false, 'alpha', [['alpha', 0, 1.7]]),
      transcriptEvent(false, 'alpha bravo', [
        ['alpha', 0, 0.85],
        ['bravo', 0.85, 1.7],
      ]),
      transcriptEvent(true, 'alpha bravo', [
        ['alpha', 0, 0.85],
        ['bravo', 0.85, 1.7],
      ]),
      // The engine's own turn: its final, then its end and turn.finalized with the turn's text.
      { type: 'turn.end', at: 1.7 },
      { type: 'turn.finalized', at: 1.7, transcript: 'alpha bravo' },
      // Turn 2: "charlie" at 2.0 s; its padding reaches back to where turn 1 ended.
      { type: 'turn.start', at: 1.7 },
      transcriptEvent(false, 'charlie', [['charlie', 1.7, 2.9]]),
      transcriptEvent(true, 'charlie', [['charlie', 1.7, 2.9]]),
      { type: 'turn.end', at: 2.9 },
      { type: 'turn.finalized', at: 2.9, transcript: 'charlie' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 3.2, cost_usd: usd(audioCost(THREE_WORDS_MS, STT_PRICE)) },
    ]);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-ga');

    // The wire: no model in the URL (GA), our key, the session asked for server VAD at 24 kHz
    // with the language as ISO-639-1 and the key terms as the prompt.
    expect(socket.path).toBe('/v1/realtime');
    expect(socket.query).toEqual({ intent: 'transcription' });
    expect(socket.headers.authorization).toBe(`Bearer ${RT_KEY}`);
    expect(socket.headers['openai-beta']).toBeUndefined();
    expect(socket.sessionConfig).toEqual(gaConfig(GA_VAD, { language: 'en', prompt: 'Kubernetes, Istio' }));
    // 3.2 s at 16 kHz is exactly 3.2 s at 24 kHz: the resampler's tail went out at the close,
    // and the commit made the rest (0.3 s after turn 2) an item of its own (empty: no final shown).
    await socket.closed;
    expect(socket.audioBytes).toBe(bytesAt24k(THREE_WORDS_MS));
    expect(controlsOf(socket).map((e) => e.type)).toEqual(['session.update', 'input_audio_buffer.commit']);
  });

  it('turn_source=gateway: the session asks for turn_detection null; the gateway\u2019s detector finds each turn and commits it (turn.end at its decision, then the transcription of the commit and turn.finalized)', async () => {
    const peer = peers.ga;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga', { turn_source: 'gateway' }));
    const audio = threeWords();
    await c.stream(audio, FRAMES);
    const socket = await engineSocket(peer, before);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);

    expect(socket.sessionConfig).toEqual(gaConfig(null));
    // balanced: a turn starts at its first word and ends a few hundred ms into the silence after
    // it (not in the 200 ms between "alpha" and "bravo"), at the last word's end; turn.end goes
    // out then, with the commit; the engine's transcription of it (deltas, then the final) follows.
    expect(eventsAfterStart(c).map(short), summary(c.events)).toEqual([
      'turn.start',
      'turn.end',
      'interim alpha',
      'interim alpha bravo',
      'final alpha bravo',
      'turn.finalized',
      'turn.start',
      'turn.end',
      'interim charlie',
      'final charlie',
      'turn.finalized',
      'session.closed',
    ]);
    expect(c.ofType('turn.finalized').map((e) => e.transcript)).toEqual(['alpha bravo', 'charlie']);
    expectGatewayTurns(c);
    expectTurnFinals(c);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-ga');
    await socket.closed;
    expect(socket.audioBytes).toBe(bytesAt24k(THREE_WORDS_MS));
    // One commit per turn, and one at the close.
    expect(controlsOf(socket).map((e) => e.type)).toEqual([
      'session.update',
      'input_audio_buffer.commit',
      'input_audio_buffer.commit',
      'input_audio_buffer.commit',
    ]);
  });

  it('{"type":"finalize"} mid-utterance commits what was sent: the final, then flush_done; the session goes on', async () => {
    const peer = peers.ga;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga', { turn_source: 'gateway' }));
    await c.stream(pcm16(bursts(16000, [[0.1, 0.4]], 0.5)), FRAMES);
    c.command({ type: 'finalize' });
    const flush = await c.until((e) => e.type === 'flush_done');
    const atFlush = c.events.indexOf(flush);
    expect(c.events[atFlush - 1]).toMatchObject({ type: 'transcript', is_final: true, text: 'alpha' });
    expectFinal(c.events[atFlush - 1], 'alpha', 0, 0.5);
    await c.stream(pcm16(bursts(16000, [[0.1, 0.3]], 0.4)), FRAMES);
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done', { from: atFlush + 1 });
    await closeSession(c);
    expect(finals(c).map((e) => e.text)).toEqual(['alpha', 'bravo']);
    expectFinal(finals(c)[1], 'bravo', 0.49, 0.9);
    expect(c.ofType('flush_done')).toHaveLength(2);
    await expectSessionBilled(h, c, 900, 'client_close', 'rt-ga');
    const socket = peer.sockets[before]!;
    await socket.closed;
    expect(socket.audioBytes).toBe(bytesAt24k(900));
  });
});

describe('dialect speaches: GET /stt/websocket', () => {
  it('turn_source=gateway: the model in the URL, turn_detection null, no input_audio_format nor prefix_padding_ms; the gateway\u2019s turns commit the finals', async () => {
    const peer = peers.speaches;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-speaches', { turn_source: 'gateway', language: 'en-US' }));
    const audio = threeWords();
    await c.stream(audio, FRAMES);
    const socket = await engineSocket(peer, before);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);

    expect(socket.query).toEqual({ model: UPSTREAM_MODEL, intent: 'transcription' });
    expect(socket.headers.authorization).toBe(`Bearer ${RT_KEY}`);
    expect(socket.sessionConfig).toEqual({
      type: 'session.update',
      session: { input_audio_transcription: { model: UPSTREAM_MODEL, language: 'en' }, turn_detection: null },
    });
    // speaches answers those two fields with error events, which would fail the session.
    expect(c.ofType('error')).toEqual([]);
    expect(c.events.filter((e) => e.type !== 'session.started' && e.type !== 'session.closed').map(short), summary(c.events)).toEqual([
      'turn.start',
      'turn.end',
      'final alpha bravo',
      'turn.finalized',
      'turn.start',
      'turn.end',
      'final charlie',
      'turn.finalized',
    ]);
    expectGatewayTurns(c);
    expectTurnFinals(c);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-speaches');
    await socket.closed;
    expect(socket.audioBytes).toBe(bytesAt24k(THREE_WORDS_MS));
  });

  it('turn_source=auto: speaches times its VAD from its own buffer, so its turns are not used: the gateway\u2019s detector finds them (turn_detection null)', async () => {
    const peer = peers.speaches;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-speaches'));
    await c.stream(threeWords(), FRAMES);
    const socket = await engineSocket(peer, before);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);
    expect(socket.sessionConfig).toEqual({ type: 'session.update', session: { input_audio_transcription: { model: UPSTREAM_MODEL }, turn_detection: null } });
    expect(c.ofType('error')).toEqual([]);
    expectGatewayTurns(c);
    expect(finals(c).map((e) => e.text)).toEqual(['alpha bravo', 'charlie']);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-speaches');
  });
});

describe('dialect vllm: GET /stt/websocket', () => {
  it('the gateway\u2019s detector always: a commit starts each utterance, the final commit ends it; interims from the deltas; 16 kHz reaches the engine (resampled back from 24 kHz); billed exactly', async () => {
    const peer = peers.vllm;
    const before = peer.sockets.length;
    // turn_source=auto: vLLM finds no turns, so the gateway's are used anyway.
    const c = await openSession(h, sttQuery(h, 'rt-vllm'));
    const audio = threeWords();
    await c.stream(audio, FRAMES);
    const socket = await engineSocket(peer, before);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);

    expect(socket.path).toBe('/v1/realtime');
    expect(socket.query).toEqual({});
    expect(socket.headers.authorization).toBe(`Bearer ${RT_KEY}`);
    expect(socket.sessionConfig).toEqual({ type: 'session.update', model: UPSTREAM_MODEL });
    expect(
      c.events.filter((e) => e.type !== 'session.started' && e.type !== 'session.closed' && !(e.type === 'transcript' && !e.is_final)).map(short),
      summary(c.events),
    ).toEqual(['turn.start', 'turn.end', 'final alpha bravo', 'turn.finalized', 'turn.start', 'turn.end', 'final charlie', 'turn.finalized']);
    expectGatewayTurns(c);
    expect(interimTexts(c)).toEqual(['alpha', 'alpha bravo', 'charlie']);
    expectTurnFinals(c);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-vllm');
    await socket.closed;
    // Every commit {final:true} follows a plain one: utterance after utterance (the close's included).
    const commits = controlsOf(socket)
      .filter((e) => e.type === 'input_audio_buffer.commit')
      .map((e) => e.final === true);
    expect(commits.length % 2).toBe(0);
    expect(commits.length).toBeGreaterThanOrEqual(4);
    expect(commits).toEqual(commits.map((_, i) => i % 2 === 1));
    // 3.2 s at 16 kHz, less the filter delay of the link's 24 -> 16 kHz resampler (a few ms; it
    // is not flushed at a commit or a close).
    const all = (THREE_WORDS_MS / 1000) * 16000 * 2;
    expect(socket.audioBytes).toBeLessThanOrEqual(all);
    expect(socket.audioBytes).toBeGreaterThanOrEqual(all - 2 * 64);
  });
});

// ---------------------------------------------------------------------------------------

describe('failures', () => {
  it('the engine refusing our key at the upgrade: an upstream_error event with OpenAI\u2019s message and no key, session.closed at 0 and 1011; nothing billed (no engine took the audio)', async () => {
    // A key the engine does not know, and ours revoked at the engine.
    for (const [model, behaviour] of [
      ['rt-ga-badkey', { kind: 'ok' }],
      ['rt-ga', { kind: 'refuse-auth' }],
    ] as const) {
      peers.ga.behaviour = behaviour;
      const before = peers.ga.sockets.length;
      const c = await openSession(h, sttQuery(h, model));
      await c.stream(pcm16(bursts(16000, [[0, 0.1]], 0.1)), FRAMES);
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
      expect(c.events[1]!.code).toBe('upstream_error');
      expect(c.events[1]!.message).toContain('401: Incorrect API key provided: [redacted]. You can find your API key');
      expectNoKey(JSON.stringify(c.events));
      // Refused before any socket opened.
      expect(peers.ga.sockets.length).toBe(before);
      await expectSessionNotBilled(h, c, 100, 'engine_error');
    }
  });

  it('engine 400 at the upgrade: an invalid_request event with the engine\u2019s message; 503: upstream_error; an error event answering the configuration: upstream_error; none billed', async () => {
    for (const [behaviour, code, message] of [
      [
        {
          kind: 'http-error',
          status: 400,
          body: JSON.stringify({ error: { message: "Invalid value: 'intent'.", type: 'invalid_request_error', code: 'invalid_value' } }),
        },
        'invalid_request',
        "Invalid value: 'intent'.",
      ],
      [
        { kind: 'http-error', status: 503, body: JSON.stringify({ error: { message: 'The server is overloaded.', type: 'server_error' } }) },
        'upstream_error',
        '503: The server is overloaded.',
      ],
      [
        { kind: 'error-event', at: 'session', message: "Invalid value: 'gpt-nope'. Supported values are: 'whisper-1'.", code: 'invalid_value' },
        'upstream_error',
        "Invalid value: 'gpt-nope'. Supported values are: 'whisper-1'.",
      ],
    ] as const) {
      peers.ga.behaviour = behaviour;
      const c = await openSession(h, sttQuery(h, 'rt-ga'));
      await c.stream(pcm16(new Float32Array(1600)), FRAMES);
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
      expect(c.events[1]!.code).toBe(code);
      expect(c.events[1]!.message).toContain(message);
      await expectSessionNotBilled(h, c, 100, 'engine_error');
    }
  });

  it.each(['ga', 'vllm'] as const)(
    '%s: an error event mid-session: the final before it is relayed, then an upstream_error event with its message, session.closed and 1011; billed for exactly the audio received',
    async (dialect) => {
      const peer = peers[dialect];
      peer.behaviour = { kind: 'error-event', at: 'first-transcript', message: 'The server had an error while processing your request.', code: 'server_error' };
      const before = peer.sockets.length;
      const c = await openSession(h, sttQuery(h, `rt-${dialect}`, { turn_source: 'gateway' }));
      await c.stream(pcm16(bursts(16000, [[0.2, 0.5]], 0.6)), FRAMES);
      c.command({ type: 'finalize' });
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      // The engine completed the item (so the finalize is done) before its error event.
      expect(
        eventsAfterStart(c)
          .filter((e) => e.type !== 'transcript' || e.is_final)
          .map((e) => (e.type === 'transcript' ? `final ${String(e.text)}` : e.type)),
        summary(c.events),
      ).toEqual(['turn.start', 'final alpha', 'flush_done', 'error', 'session.closed']);
      expectFinal(finals(c)[0], 'alpha', 0, 0.6);
      const [error] = c.ofType('error');
      expect(error!.code).toBe('upstream_error');
      expect(error!.message).toContain('The server had an error while processing your request.');
      expectNoKey(JSON.stringify(c.events));
      await expectSessionBilled(h, c, 600, 'engine_error', `rt-${dialect}`);
      await peer.sockets[before]!.closed;
    },
  );

  it('ga, server VAD: the engine dying right after its first transcript: the final, turn.end and turn.finalized are relayed, then an upstream_error event and 1011; billed for exactly the audio received', async () => {
    const peer = peers.ga;
    peer.behaviour = { kind: 'die' };
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga'));
    // The turn ends (500 ms after "alpha") in the last 100 ms frame: all 1.3 s reached the gateway.
    await c.stream(pcm16(bursts(16000, [[0.3, 0.7]], 1.3)), FRAMES);
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(eventsAfterStart(c).slice(0, 5)).toEqual([
      { type: 'turn.start', at: 0 },
      transcriptEvent(false, 'alpha', [['alpha', 0, 1.2]]),
      transcriptEvent(true, 'alpha', [['alpha', 0, 1.2]]),
      { type: 'turn.end', at: 1.2 },
      { type: 'turn.finalized', at: 1.2, transcript: 'alpha' },
    ]);
    expect(c.events.slice(6).map((e) => e.type)).toEqual(['error', 'session.closed']);
    expect(c.events[6]).toMatchObject({ type: 'error', code: 'upstream_error' });
    expectNoKey(JSON.stringify(c.events));
    await expectSessionBilled(h, c, 1300, 'engine_error', 'rt-ga');
    await peer.sockets[before]!.closed;
  });

  it('vllm: the engine dying after the final of a finalize: upstream_error, 1011; billed for exactly the audio received', async () => {
    const peer = peers.vllm;
    peer.behaviour = { kind: 'die' };
    const c = await openSession(h, sttQuery(h, 'rt-vllm'));
    await c.stream(pcm16(bursts(16000, [[0.2, 0.5]], 0.7)), FRAMES);
    c.command({ type: 'finalize' });
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(finals(c).map((e) => e.text)).toEqual(['alpha']);
    expect(c.ofType('error')).toEqual([expect.objectContaining({ code: 'upstream_error' })]);
    await expectSessionBilled(h, c, 700, 'engine_error', 'rt-vllm');
  });

  it.each([
    ['ga', { kind: 'hang' }],
    ['vllm', { kind: 'hang-upgrade' }],
  ] as const)(
    '%s: a slow engine (0.5 s deadline) that never sets up the session: an upstream_timeout event, 1011; not billed; the engine connection is closed',
    async (dialect, behaviour) => {
      const peer = peers[dialect];
      peer.behaviour = behaviour;
      const before = peer.sockets.length;
      const c = await openSession(hs, sttQuery(hs, `rt-${dialect}`));
      await c.stream(pcm16(new Float32Array(1600)), FRAMES);
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
      expect(c.events[1]!.code).toBe('upstream_timeout');
      await expectSessionNotBilled(hs, c, 100, 'engine_error');
      await (
        await peer.socketAt(before)
      ).closed;
    },
  );

  it('a session outlives SVC_UPSTREAM_TIMEOUT_SECONDS (0.5 s here): 3.2 s sent in real time, server VAD turns throughout; the deadline bounds the engine\u2019s silence, not the session', async () => {
    const peer = peers.ga;
    const before = peer.sockets.length;
    const c = await openSession(hs, sttQuery(hs, 'rt-ga'));
    await c.stream(threeWords(), LIVE);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);
    expect(c.ofType('error')).toEqual([]);
    expect(finals(c)).toEqual([
      transcriptEvent(true, 'alpha bravo', [
        ['alpha', 0, 0.85],
        ['bravo', 0.85, 1.7],
      ]),
      transcriptEvent(true, 'charlie', [['charlie', 1.7, 2.9]]),
    ]);
    expect([...c.ofType('turn.start'), ...c.ofType('turn.end')].map((e) => e.at)).toEqual([0, 1.7, 1.7, 2.9]);
    await expectSessionBilled(hs, c, THREE_WORDS_MS, 'client_close', 'rt-ga');
    const socket = peer.sockets[before]!;
    await socket.closed;
    expect(socket.audioBytes).toBe(bytesAt24k(THREE_WORDS_MS));
  });

  it('vllm over the 0.5 s deadline: the gateway\u2019s turns, in real time; each final commit answered within the deadline', async () => {
    const peer = peers.vllm;
    const before = peer.sockets.length;
    const c = await openSession(hs, sttQuery(hs, 'rt-vllm'));
    await c.stream(threeWords(), LIVE);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    await closeSession(c);
    expect(c.ofType('error')).toEqual([]);
    expect(finals(c).map((e) => e.text)).toEqual(['alpha bravo', 'charlie']);
    await expectSessionBilled(hs, c, THREE_WORDS_MS, 'client_close', 'rt-vllm');
    const socket = peer.sockets[before]!;
    await socket.closed;
    expect(controlsOf(socket).filter((e) => e.type === 'input_audio_buffer.commit' && e.final === true).length).toBeGreaterThanOrEqual(2);
  });

  it('the client leaving mid-session: the gateway closes the engine\u2019s socket, and bills exactly the audio it got', async () => {
    const peer = peers.ga;
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga', { turn_source: 'gateway' }));
    await c.stream(pcm16(bursts(16000, [[0.2, 0.5]], 1.0)), FRAMES);
    // Everything sent has reached the engine once flush_done is back.
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    const socket = peer.sockets[before]!;
    let closed = false;
    void socket.closed.then(() => (closed = true));
    await new Promise((r) => setImmediate(r));
    expect(closed).toBe(false);
    c.ws.terminate();
    expect((await socket.closed).code).toBe(1000);
    // All of it but the resampler's filter delay (~2.5 ms), which a finalize does not flush.
    expect(socket.audioBytes).toBeLessThanOrEqual(bytesAt24k(1000));
    expect(socket.audioBytes).toBeGreaterThanOrEqual(bytesAt24k(1000) - 2 * 64);
    await expectBilledSession(h, c.events[0]!.request_id as string, 1000, 'rt-ga');
  });

  it('failover at open: the unreachable upstream (tried first) is skipped and marked down; the engine serves the session', async () => {
    const deadId = await upstreamIdOf(h, 'rt-ga-failover', `${DEAD_URL}/v1`);
    const liveId = await upstreamIdOf(h, 'rt-ga-failover', peers.ga.url);
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('unknown');
    const before = peers.ga.sockets.length;
    const c = await openSession(h, sttQuery(h, 'rt-ga-failover'));
    await c.stream(threeWords(), FRAMES);
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 2);
    vi.restoreAllMocks();
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(liveId)).not.toBe('down');
    await closeSession(c);
    expect(finals(c).map((e) => e.text)).toEqual(['alpha bravo', 'charlie']);
    expect(peers.ga.sockets.length).toBe(before + 1);
    await expectSessionBilled(h, c, THREE_WORDS_MS, 'client_close', 'rt-ga-failover');
  });
});

// ---------------------------------------------------------------------------------------

describe('health (GET {url}/models with our key) and GET /v1/models', () => {
  const listed = async () => {
    const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { id: string; modality: string }[] }).data;
  };

  it('up while /models answers 200, down (unlisted, and refused before the upgrade with 503 model_offline) while it answers 503, up again after', async () => {
    const id = await upstreamIdOf(h, 'rt-health', peers.health.url);
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect(await listed()).toContainEqual(expect.objectContaining({ id: 'rt-health', modality: 'stt' }));

    peers.health.modelsStatus = 503;
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('down');
    expect((await listed()).map((m) => m.id)).not.toContain('rt-health');
    const row = await prisma().upstream.findUniqueOrThrow({ where: { id } });
    expect(row.health).toBe('down');
    expect(row.lastError).toContain('503');
    expectNoKey(row.lastError ?? '');
    const refused = await refusedUpgrade(h, sttQuery(h, 'rt-health'));
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'model_offline' } });
    const socketsBefore = peers.health.sockets.length;

    peers.health.modelsStatus = 200;
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect((await listed()).map((m) => m.id)).toContain('rt-health');
    const c = await openSession(h, sttQuery(h, 'rt-health'));
    await c.stream(pcm16(bursts(16000, [[0.3, 0.7]], 1.3)), FRAMES);
    await c.until((e) => e.type === 'turn.end');
    await closeSession(c);
    expect(finals(c).map((e) => e.text)).toEqual(['alpha']);
    expect(peers.health.sockets.length).toBe(socketsBefore + 1);
  });
});
