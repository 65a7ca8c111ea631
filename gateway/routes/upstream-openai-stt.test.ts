// Route tests of streaming transcription over an OpenAI-compatible *batch* engine (protocol
// `openai`: POST {url}/audio/transcriptions, verbose_json with word times) through the real
// gateway: GET /stt/websocket, where the gateway's turn detector cuts the audio into utterances
// and gateway/upstreams/segmented-streaming.ts sends each one whole for its final transcript (and
// re-sends the growing utterance now and then for an interim one). Against the scripted OpenAI
// server (test/support/scripted-openai-upstream.ts, `transcription: 'energy'`): one word per
// voiced burst of each uploaded WAV, named after its pitch (`tone120` for 120 Hz), timed within
// that file -- so word times in the session show each utterance's offset, and the peer's records
// show every engine call made. The bursts are speech to the gateway's detector
// (test/support/speech-bursts.ts); the words of one turn fall in pitch, as a statement does (a
// rise would tell the detector that more is coming).
//
// The point of the metering tests: interims re-send audio to the engine (more calls, more audio
// uploaded than spoken), yet the session bills the audio the client sent, once.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { getModel, upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { speechBursts } from '../../test/support/speech-bursts.ts';
import { audioCost, expectDebited, ledgerOf, openSession, refusedUpgrade, summary, type SttClient, type SttEvent } from '../../test/support/stt-routes.ts';
import { usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { memoryOutbox } from '../../test/support/memory-outbox.ts';
import { startPlannedSession, streamingModel } from '../stt/open-session.ts';
import type { SttEvent as SessionEvent } from '../stt/stt-events.ts';
import { METER_EVERY_MS } from '../stt/stt-session.ts';
import { presetSettings } from '../stt/turn-params.ts';

const KEY_ENV = 'OPENAI_STT_ROUTE_TEST_KEY';
const OA_KEY = 'sk-oa-stt-route-secret-5e1d77b2c0';
/** pico-USD per second of audio: needs rounding up to a micro-USD. */
const STT_PRICE = 123_456_789n;
/** Nothing listens there (the discard port): connections are refused. */
const DEAD_URL = 'http://127.0.0.1:9/v1';
const RATE = 16000;

let peer: ScriptedUpstream;
/** A second peer for the health checks. */
let healthPeer: ScriptedUpstream;
let h: GatewayHarness;
/** SVC_UPSTREAM_TIMEOUT_SECONDS=0.5: for the slow engine. */
let hs: GatewayHarness;

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;
const prices = { picoPerSecond: STT_PRICE };
const upstream = (url: string, weight?: number) => ({
  url,
  protocol: 'openai',
  upstreamModel: 'whisper-1',
  apiKeyEnv: KEY_ENV,
  ...(weight !== undefined && { weight }),
});

beforeAll(async () => {
  [peer, healthPeer] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  peer.transcription = { kind: 'energy' };
  healthPeer.transcription = { kind: 'energy' };
  process.env[KEY_ENV] = OA_KEY;
  [h, hs] = await Promise.all([
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } }),
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_UPSTREAM_TIMEOUT_SECONDS: '0.5' } }),
  ]);
  for (const g of [h, hs]) await upsertModel(prisma(g), checkProtocol, { id: 'oa-whisper', modality: 'stt', prices, upstream: upstream(peer.baseUrl) });
  // Two upstreams, the dead one weighted 99 to 1: with Math.random() at 0.5 it comes first.
  await upsertModel(prisma(), checkProtocol, { id: 'oa-whisper-failover', modality: 'stt', prices, upstream: upstream(DEAD_URL, 99) });
  await upsertModel(prisma(), checkProtocol, { id: 'oa-whisper-failover', modality: 'stt', prices, upstream: upstream(peer.baseUrl, 1) });
  await upsertModel(prisma(), checkProtocol, { id: 'oa-health', modality: 'stt', prices, upstream: upstream(healthPeer.baseUrl) });
  await Promise.all([h.runtime.ctx.registry.refresh(), hs.runtime.ctx.registry.refresh()]);
}, 60_000);

afterEach(() => {
  peer.transcription = { kind: 'energy' };
  healthPeer.modelsStatus = 200;
  peer.modelsStatus = 200;
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.allSettled([h?.close(), hs?.close()]);
  await Promise.allSettled([peer?.close(), healthPeer?.close()]);
  delete process.env[KEY_ENV];
});

// ---------------------------------------------------------------------------------------
// Helpers

/** Voiced bursts [start, end, hz] (one word each, named after the pitch), silence elsewhere, at 16 kHz. */
const bursts = (spans: [number, number, number][], totalSeconds: number): Float32Array => speechBursts(RATE, spans, totalSeconds);

/** A time the detector reports: where the audio says, within about a VAD frame (32 ms). */
const near = (seconds: number) => expect.closeTo(seconds, 1);

/** 16-bit little-endian PCM written here. */
function pcm16(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** 100 ms frames, sent back to back. */
const FRAMES = { frameBytes: 3200, intervalMs: 0 };

const sttQuery = (g: GatewayHarness, over: Record<string, string> = {}) => ({
  model: 'oa-whisper',
  api_key: g.key,
  sample_rate: String(RATE),
  encoding: 'pcm_s16le',
  turn_detection: 'responsive',
  ...over,
});

const transcriptEvent = (isFinal: boolean, text: string, words: [string, number, number][]) => ({
  type: 'transcript',
  is_final: isFinal,
  text,
  words: words.map(([word, start, end]) => ({ word, start, end })),
});

/**
 * A final whose word times are those given within the scripted engine's resolution: it times
 * words in 20 ms frames from the start of the utterance it is sent, and an utterance starts where
 * the detector ended the turn before, on its 32 ms frames (less than 0.02 s off).
 */
const transcriptNear = (text: string, words: [string, number, number][]) => ({
  ...transcriptEvent(true, text, []),
  words: words.map(([word, start, end]) => ({ word, start: expect.closeTo(start, 1.4), end: expect.closeTo(end, 1.4) })),
});

const eventsAfterStart = (c: SttClient) => c.events.slice(1);
const finals = (c: SttClient) => c.ofType('transcript').filter((e) => e.is_final);
const interims = (c: SttClient) => c.ofType('transcript').filter((e) => !e.is_final);

function expectNoKey(text: string): void {
  expect(text).not.toContain(OA_KEY);
}

async function closeSession(c: SttClient): Promise<void> {
  c.command({ type: 'close' });
  expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });
}

async function expectBilledSession(g: GatewayHarness, id: string, millis: number, modelId = 'oa-whisper'): Promise<void> {
  const cost = audioCost(millis, STT_PRICE);
  const billed = await expectDebited(g, id, cost);
  expect(billed.usageMicros).toBe(cost);
  expect(billed.audioMillis).toBe(millis);
  expect(billed.usage.every((u) => u.modality === 'stt' && u.route === 'stt.websocket' && u.modelId === modelId)).toBe(true);
}

/** session.closed is the last event, with exactly this audio and cost; the ledger holds exactly that, once. */
async function expectSessionBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string, modelId = 'oa-whisper'): Promise<void> {
  const last = c.events.at(-1)!;
  expect(c.ofType('session.closed')).toHaveLength(1);
  expect(last, summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(audioCost(millis, STT_PRICE)) });
  await expectBilledSession(g, c.events[0]!.request_id as string, millis, modelId);
}

async function expectSessionNotBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string): Promise<void> {
  expect(c.events.at(-1), summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(0n) });
  expect(await g.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  expect((await ledgerOf(g, c.events[0]!.request_id as string)).ledger).toHaveLength(0);
}

/**
 * The engine calls (their lengths in samples, in order) include each utterance sent whole, once:
 * calls that add up to the session's audio from its start, the k-th ending within `cuts[k]` --
 * the silence where that turn ended -- and the last of them the last call: what comes after the
 * last turn (the close's rest) is silence, which is never sent. Interim calls (each a prefix of
 * its utterance) may come between.
 */
function expectUtterances(lengths: number[], cuts: [from: number, to: number][]): void {
  const found = (from: number, sent: number, k: number): boolean =>
    k === cuts.length
      ? from === lengths.length
      : lengths.slice(from).some((length, i) => {
          const end = sent + length;
          return end > cuts[k]![0] * RATE && end <= cuts[k]![1] * RATE && found(from + i + 1, end, k + 1);
        });
  expect(found(0, 0, 0), `utterances cut within ${JSON.stringify(cuts)} among the calls ${JSON.stringify(lengths)}`).toBe(true);
}

/** Events in short; turn events without their time (checked on their own where it matters). */
const short = (e: SttEvent) => (e.type === 'transcript' ? `${e.is_final ? 'final' : 'interim'} ${String(e.text)}` : e.type);

// ---------------------------------------------------------------------------------------

describe('streaming over a batch engine: GET /stt/websocket', () => {
  it('the gateway\u2019s detector cuts the utterances (responsive: in the silence after each word); turn.end at each cut, then the utterance sent whole, once, for a final with session times, then turn.finalized; billed exactly the audio sent', async () => {
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h, { language: 'en', keyterms: 'Kubernetes,Istio' }));
    // Three words, 0.8 s apart: a responsive turn ends ~0.2 s into the silence.
    const audio = pcm16(
      bursts(
        [
          [0.2, 0.5, 100],
          [1.3, 1.6, 120],
          [2.4, 2.7, 140],
        ],
        3.5,
      ),
    );
    expect(await c.stream(audio, FRAMES)).toBe(audio.length);
    await c.until((e) => e.type === 'turn.finalized' && (e.at as number) > 2);
    await closeSession(c);

    // An interim (one call at most in flight, one due per second of utterance) may show a word
    // when the engine answers the previous final late; it is then that utterance's final so far.
    const settled = eventsAfterStart(c).filter((e) => !(e.type === 'transcript' && !e.is_final));
    for (const interim of interims(c)) {
      const next = c.events.slice(c.events.indexOf(interim)).find((e) => e.type === 'transcript' && e.is_final);
      expect(String(next?.text).startsWith(String(interim.text)), summary(c.events)).toBe(true);
    }
    expect(settled, summary(c.events)).toEqual([
      { type: 'turn.start', at: near(0.2) },
      { type: 'turn.end', at: near(0.5) },
      transcriptNear('tone100', [['tone100', 0.2, 0.5]]),
      { type: 'turn.finalized', at: near(0.5), transcript: 'tone100' },
      { type: 'turn.start', at: near(1.3) },
      { type: 'turn.end', at: near(1.6) },
      transcriptNear('tone120', [['tone120', 1.3, 1.6]]),
      { type: 'turn.finalized', at: near(1.6), transcript: 'tone120' },
      { type: 'turn.start', at: near(2.4) },
      { type: 'turn.end', at: near(2.7) },
      transcriptNear('tone140', [['tone140', 2.4, 2.7]]),
      { type: 'turn.finalized', at: near(2.7), transcript: 'tone140' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 3.5, cost_usd: usd(audioCost(3500, STT_PRICE)) },
    ]);
    await expectSessionBilled(h, c, 3500, 'client_close');

    // The utterances as cut (each where its turn was found, in the silence before the next
    // word, at the end of the detector's frame that decided it): every sample up to the last
    // turn's end sent once as a final, the close's rest (silence) not at all; interim calls may
    // come between.
    const calls = peer.transcriptions.slice(before);
    expectUtterances(
      calls.map((r) => r.samples),
      [
        [0.5, 1.3],
        [1.6, 2.4],
        [2.7, 3.4],
      ],
    );
    for (const call of calls) {
      expect(call.sampleRate).toBe(RATE);
      expect(call.headers.authorization).toBe(`Bearer ${OA_KEY}`);
      expect(call.fields).toMatchObject({
        model: ['whisper-1'],
        response_format: ['verbose_json'],
        'timestamp_granularities[]': ['word'],
        language: ['en'],
        prompt: ['Kubernetes, Istio'],
      });
    }
  });

  it('a long utterance: interims while it grows (each a prefix of the final, words in session time), then one final; more engine calls than utterances and more audio uploaded than spoken, yet billed exactly the audio sent, once', async () => {
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h));
    // Four words 100 ms apart (one turn under responsive), then silence: 3 s.
    const audio = pcm16(
      bursts(
        [
          [0.3, 0.9, 130],
          [1.0, 1.3, 120],
          [1.4, 1.7, 110],
          [1.8, 2.1, 100],
        ],
        3.0,
      ),
    );
    // The first second: the utterance reaches 1 s, an interim call goes out; its answer is awaited.
    await c.stream(audio.subarray(0, 2 * RATE), FRAMES);
    const first = await c.until((e) => e.type === 'transcript' && e.is_final === false);
    expect(first).toEqual(transcriptEvent(false, 'tone130', [['tone130', 0.3, 0.9]]));
    // To 2 s, inside the last word (no turn can end there): a second interim call goes out, and its
    // answer is awaited too. Sent on at once, the turn's end could otherwise come while that call
    // was still being uploaded and stop it before the engine had it.
    await c.stream(audio.subarray(2 * RATE, 4 * RATE), FRAMES);
    await c.until((e) => e.type === 'transcript' && e.is_final === false, { from: c.events.indexOf(first) + 1 });
    await c.stream(audio.subarray(4 * RATE), FRAMES);
    await c.until((e) => e.type === 'turn.end');
    await closeSession(c);

    const [final, ...moreFinals] = finals(c);
    expect(moreFinals).toEqual([]);
    expect(final).toEqual(
      transcriptEvent(true, 'tone130 tone120 tone110 tone100', [
        ['tone130', 0.3, 0.9],
        ['tone120', 1.0, 1.3],
        ['tone110', 1.4, 1.7],
        ['tone100', 1.8, 2.1],
      ]),
    );
    for (const interim of interims(c)) expect(String(final!.text).startsWith(String(interim.text))).toBe(true);
    // turn.end precedes the final (the final engine call starts at it), turn.finalized follows it;
    // turn.start is at the first word's start, turn.end at the last word's end.
    expect(
      eventsAfterStart(c)
        .filter((e) => !(e.type === 'transcript' && !e.is_final))
        .map(short),
    ).toEqual(['turn.start', 'turn.end', 'final tone130 tone120 tone110 tone100', 'turn.finalized', 'session.closed']);
    expect([c.ofType('turn.start')[0]!.at, c.ofType('turn.end')[0]!.at]).toEqual([near(0.3), near(2.1)]);

    const calls = peer.transcriptions.slice(before);
    const uploaded = calls.reduce((n, r) => n + r.samples, 0);
    // One utterance, but interim calls besides: of its first second, and of its first two.
    expect(calls.length).toBeGreaterThan(2);
    expect(uploaded).toBeGreaterThan(3 * RATE);
    expect(calls[0]!.samples).toBe(1 * RATE);
    // The final call took the whole utterance, cut in the silence after the last word, once.
    expectUtterances(
      calls.map((r) => r.samples),
      [[2.1, 2.9]],
    );
    await expectSessionBilled(h, c, 3000, 'client_close');
  });

  it('{"type":"finalize"} mid-utterance: the final of what was sent, then flush_done; the turn goes on and ends later', async () => {
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts([[0.2, 0.5, 110]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    const flush = await c.until((e) => e.type === 'flush_done');
    expect(eventsAfterStart(c).slice(0, c.events.indexOf(flush))).toEqual([
      { type: 'turn.start', at: near(0.2) },
      transcriptEvent(true, 'tone110', [['tone110', 0.2, 0.5]]),
      { type: 'flush_done' },
    ]);
    // More speech in the same turn (100 ms later), then the silence that ends it.
    await c.stream(pcm16(bursts([[0.0, 0.2, 100]], 0.7)), FRAMES);
    await c.until((e) => e.type === 'turn.end');
    await closeSession(c);
    expect(eventsAfterStart(c).map(short)).toEqual([
      'turn.start',
      'final tone110',
      'flush_done',
      'turn.end',
      'final tone100',
      'turn.finalized',
      'session.closed',
    ]);
    // The turn's text: both its finals, the client's finalize's and the turn end's.
    expect(c.ofType('turn.finalized')).toEqual([{ type: 'turn.finalized', at: near(0.8), transcript: 'tone110 tone100' }]);
    expect(c.ofType('turn.end')[0]!.at).toEqual(near(0.8));
    expect(finals(c)[1]).toEqual(transcriptEvent(true, 'tone100', [['tone100', 0.6, 0.8]]));
    await expectSessionBilled(h, c, 1300, 'client_close');
  });
});

describe('only speech reaches the engine', () => {
  it('silence after a turn gets no engine call, interim or final: its finalize and the close are answered without one', async () => {
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 1.0)), FRAMES);
    await c.until((e) => e.type === 'turn.finalized');
    // The turn's final went out (under a second of utterance: no interim was due).
    const afterTurn = peer.transcriptions.length;
    expect(afterTurn).toBe(before + 1);
    // Five seconds of silence (five interims due by length alone), a finalize of it, the close.
    await c.stream(pcm16(new Float32Array(5 * RATE)), FRAMES);
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    await closeSession(c);
    expect(peer.transcriptions.length).toBe(afterTurn);
    expect(eventsAfterStart(c).map(short)).toEqual(['turn.start', 'turn.end', 'final tone120', 'turn.finalized', 'flush_done', 'session.closed']);
    await expectSessionBilled(h, c, 6000, 'client_close');
  });

  it('no engine call starts once the client is gone, not even for the close it asked for just before', async () => {
    const { ctx } = h.runtime;
    const auth = await ctx.core.admit(h.key, true);
    const outbox = memoryOutbox<SessionEvent>();
    // Driven in this process (as the realtime session drives one), so that the close command is
    // still queued behind the audio when the client goes.
    const session = startPlannedSession(ctx, outbox, {
      plan: {
        model: streamingModel(ctx, 'oa-whisper', null),
        sampleRate: RATE,
        encoding: 'pcm_s16le',
        turnSource: 'gateway',
        turns: presetSettings('patient', { eager: false }),
        keyterms: [],
        language: undefined,
      },
      auth,
      requestId: `oa-gone-${Date.now()}`,
      log: h.runtime.app.log,
      hold: await ctx.core.reserve(auth, audioCost(METER_EVERY_MS, STT_PRICE)),
      revoked: new AbortController().signal,
      usageRoute: 'stt.websocket',
    });
    // Speech that starts a turn, under a second (no interim due).
    const speech = pcm16(bursts([[0.1, 0.8, 120]], 0.8));
    for (let at = 0; at < speech.length; at += 3200) session.audio(speech.subarray(at, at + 3200));
    await outbox.next((e) => e.type === 'turn' && e.turn === 'turn.start');
    const before = peer.transcriptions.length;
    // Every call the stream makes, counted as it starts (an aborted one may never reach the peer).
    const calls = vi.spyOn(ctx.protocols.get('openai')!.transcription!, 'transcribe');
    session.command({ type: 'close' });
    session.close();
    expect(await ctx.lifecycle.settled(10_000)).toBe(true);
    expect(calls).not.toHaveBeenCalled();
    expect(peer.transcriptions.length).toBe(before);
  });
});

describe('failures', () => {
  const refusal = {
    error: {
      message: `Incorrect API key provided: ${OA_KEY}. You can find your API key at https://platform.openai.com/account/api-keys.`,
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_api_key',
    },
  };

  it('the engine answering 401 to a final: an upstream_error event with its message (the key cut out), session.closed and 1011', async () => {
    peer.transcription = { kind: 'error', status: 401, body: refusal };
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(c.events.map((e) => e.type)).toEqual(['session.started', 'turn.start', 'error', 'session.closed']);
    const [error] = c.ofType('error');
    expect(error!.code).toBe('upstream_error');
    expect(error!.message).toContain('401: Incorrect API key provided: [redacted]. You can find your API key');
    expectNoKey(JSON.stringify(c.events));
    // The engine got our key, once: the final.
    expect(peer.transcriptions.slice(before).map((r) => [r.headers.authorization, r.samples])).toEqual([[`Bearer ${OA_KEY}`, 0.6 * RATE]]);
    expect(c.events.at(-1)).toMatchObject({ type: 'session.closed', reason: 'engine_error', audio_seconds: 0.6 });
  });

  it('the engine refusing our key (found at open, by GET /models): not billed, as docs/stt.md says of a session whose engine refused the gateway\u2019s key (no engine ever took the audio)', async () => {
    peer.modelsStatus = 401;
    peer.transcription = { kind: 'error', status: 401, body: refusal };
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    await expectSessionNotBilled(h, c, 600, 'engine_error');
  });

  it('a 5xx answer to a final: upstream_error with the engine\u2019s status and message; billed for the audio received (the engine had transcribed before)', async () => {
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    peer.transcription = { kind: 'error', status: 500, body: { error: { message: 'CUDA out of memory', type: 'server_error', param: null, code: null } } };
    // The next word 100 ms later: the same turn (whether its end or the finalize asks next, the engine answers 500).
    await c.stream(pcm16(bursts([[0.0, 0.2, 100]], 0.4)), FRAMES);
    c.command({ type: 'finalize' });
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(eventsAfterStart(c).map(short)).toEqual(['turn.start', 'final tone120', 'flush_done', 'error', 'session.closed']);
    expect(c.ofType('error')[0]).toMatchObject({ code: 'upstream_error' });
    expect(c.ofType('error')[0]!.message).toContain('500: CUDA out of memory');
    await expectSessionBilled(h, c, 1000, 'engine_error');
  });

  it('a slow engine (0.5 s deadline) that never answers a final: an upstream_timeout event, 1011; its request is closed', async () => {
    peer.transcription = { kind: 'hang' };
    const before = peer.transcriptions.length;
    const c = await openSession(hs, sttQuery(hs));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(c.ofType('error')[0]).toMatchObject({ code: 'upstream_timeout' });
    const [call] = await peer.waitForTranscriptions(before + 1).then((all) => all.slice(before));
    expect(await call!.done).toEqual({ closedEarly: true });
  });

  it('the client leaving while a final is in flight: the gateway closes that engine request; billed exactly the audio sent', async () => {
    peer.transcription = { kind: 'energy', hold: () => true };
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h));
    // 0.5 s: no interim is due before the finalize, so the one call is the final.
    await c.stream(pcm16(bursts([[0.2, 0.4, 120]], 0.5)), FRAMES);
    c.command({ type: 'finalize' });
    const [call] = (await peer.waitForTranscriptions(before + 1)).slice(before);
    expect(call!.samples).toBe(0.5 * RATE);
    c.ws.terminate();
    expect(await call!.done).toEqual({ closedEarly: true });
    expect(finals(c)).toEqual([]);
    await expectBilledSession(h, c.events[0]!.request_id as string, 500);
    expect(peer.transcriptions.length).toBe(before + 1);
  });

  it('failover at open: the unreachable upstream (first pick) is skipped and marked down; the live engine transcribes', async () => {
    const model = await getModel(prisma(), 'oa-whisper-failover');
    const deadId = model.upstreams.find((u) => u.url === DEAD_URL)!.id;
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const before = peer.transcriptions.length;
    const c = await openSession(h, sttQuery(h, { model: 'oa-whisper-failover' }));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    const outcome = await c.until((e) => e.type === 'flush_done' || e.type === 'error');
    vi.restoreAllMocks();
    // Soft: every way this goes wrong is reported (see the report: the stream "opens" without
    // reaching the engine, so the dead upstream is not skipped, and its connect failure
    // mid-session does not mark it down either).
    expect.soft(outcome, summary(c.events)).toEqual({ type: 'flush_done' });
    expect.soft(finals(c).map((e) => e.text)).toEqual(['tone120']);
    expect.soft(h.runtime.ctx.registry.healthOf(deadId), 'the unreachable upstream marked down').toBe('down');
    expect.soft(peer.transcriptions.length).toBe(before + 1);
    c.ws.terminate();
    await c.closed;
  });
});

describe('health (GET {url}/models) and GET /v1/models', () => {
  it('up while /models answers 200, down (unlisted; the upgrade refused with 503 model_offline) while it answers 503, up again after', async () => {
    const model = await getModel(prisma(), 'oa-health');
    const id = model.upstreams[0]!.id;
    const listed = async () => {
      const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.key}` } });
      return ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id);
    };
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect(await listed()).toContain('oa-health');
    healthPeer.modelsStatus = 503;
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('down');
    expect(await listed()).not.toContain('oa-health');
    const refused = await refusedUpgrade(h, sttQuery(h, { model: 'oa-health' }));
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'model_offline' } });
    healthPeer.modelsStatus = 200;
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect(await listed()).toContain('oa-health');
    const c = await openSession(h, sttQuery(h, { model: 'oa-health' }));
    await c.stream(pcm16(bursts([[0.2, 0.5, 120]], 0.6)), FRAMES);
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    await closeSession(c);
    expect(finals(c).map((e) => e.text)).toEqual(['tone120']);
  });
});
