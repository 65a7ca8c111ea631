// Route tests of the `deepgram` protocol through the real gateway (real runtime, throw-away
// SQLite or PostgreSQL database, real HTTP and WebSocket) against a scripted Deepgram
// (test/support/scripted-deepgram.ts): Aura speech on /tts/bytes, /tts/sse and /v1/audio/speech
// with voices imported from Deepgram's model list or mapped one by one; batch transcription on
// POST /v1/audio/transcriptions; streaming transcription on /stt/websocket with Deepgram's own
// turns (turn_source=auto) and the gateway's (turn_source=gateway). Every way the engine fails
// (refused key, 4xx, 5xx, dropped stream, silence), the client leaving, failover at open and
// health checks; exact metering throughout.
//
// The scripted peer makes one word per tone burst it hears ("alpha", "bravo", ...) with times
// from the burst's place in the audio it received, and speaks a 440 Hz tone of 10 ms per
// character of the text it got, so every transcript, time and sample here is known exactly.
// Where the gateway's own detector (Silero VAD) must find the turns, the bursts are voiced
// (test/support/speech-bursts.ts): a tone is no speech to it.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeSamples } from '../audio/sample-encoding.ts';
import { newId } from '../../server/db/ids.ts';
import { getModel, upsertModel } from '../../server/services/models/upsert-model.ts';
import { importEngineVoices, mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  scriptedToneSample,
  startScriptedDeepgram,
  type ListenSocket,
  type ReceivedRequest,
  type ScriptedDeepgram,
} from '../../test/support/scripted-deepgram.ts';
import { speechBursts } from '../../test/support/speech-bursts.ts';
import { audioCost, expectDebited, ledgerOf, openSession, summary, transcribe, wavFile, type SttClient, type SttEvent } from '../../test/support/stt-routes.ts';
import { checkTtsEvents, costOf, expectError, expectNotBilled, post, sseData, sseReader, usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { listEngineVoices } from '../voices/engine-catalogue.ts';

const KEY_ENV = 'DEEPGRAM_ROUTE_TEST_KEY';
const WRONG_KEY_ENV = 'DEEPGRAM_ROUTE_TEST_WRONG_KEY';
const DG_KEY = 'dg_route_secret_4f1c9a0b7d';
const WRONG_KEY = 'dg_route_wrong_7e2b55c1e9';
/** pico-USD per character and per second of audio: both need rounding up to a micro-USD. */
const TTS_PRICE = 1_500_001n;
const STT_PRICE = 123_456_789n;
/** Nothing listens there (the discard port): connections are refused. */
const DEAD_URL = 'http://127.0.0.1:9';
/** The peer's tone: 10 ms per character at the engine's rate (24 kHz by default). */
const ENGINE_RATE = 24000;
const samplesFor = (text: string, rate = ENGINE_RATE) => Math.round((rate * text.length * 10) / 1000);

let peer: ScriptedDeepgram;
/** A second peer, only for the health checks (its behaviour changes the health of one model). */
let healthPeer: ScriptedDeepgram;
let h: GatewayHarness;
/** SVC_UPSTREAM_TIMEOUT_SECONDS=0.5: for the slow engine. */
let hs: GatewayHarness;

/** Voices of org A on h (and hs): each with a profile for one model only. */
const voices = { badKey: '', failover: '', slow: '' };

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;

async function registerModels(g: GatewayHarness): Promise<void> {
  const up = (upstreamModel: string, apiKeyEnv = KEY_ENV, url = peer.url, weight?: number) => ({
    url,
    protocol: 'deepgram',
    upstreamModel,
    apiKeyEnv,
    ...(weight !== undefined && { weight }),
  });
  await upsertModel(prisma(g), checkProtocol, { id: 'dg-aura', modality: 'tts', prices: { picoPerChar: TTS_PRICE }, upstream: up('aura-2') });
  await upsertModel(prisma(g), checkProtocol, { id: 'dg-nova', modality: 'stt', prices: { picoPerSecond: STT_PRICE }, upstream: up('nova-3') });
}

beforeAll(async () => {
  [peer, healthPeer] = await Promise.all([startScriptedDeepgram({ apiKey: DG_KEY }), startScriptedDeepgram({ apiKey: DG_KEY })]);
  process.env[KEY_ENV] = DG_KEY;
  process.env[WRONG_KEY_ENV] = WRONG_KEY;
  // No periodic health checks: every check here is the test's own (checkAll).
  [h, hs] = await Promise.all([
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } }),
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_UPSTREAM_TIMEOUT_SECONDS: '0.5' } }),
  ]);
  await Promise.all([registerModels(h), registerModels(hs)]);
  const db = prisma(h);
  const upstream = (url: string, upstreamModel: string, apiKeyEnv = KEY_ENV, weight?: number) => ({
    url,
    protocol: 'deepgram',
    upstreamModel,
    apiKeyEnv,
    ...(weight !== undefined && { weight }),
  });
  // Our key refused: the variable holds a key the engine does not know.
  await upsertModel(db, checkProtocol, {
    id: 'dg-aura-badkey',
    modality: 'tts',
    prices: { picoPerChar: TTS_PRICE },
    upstream: upstream(peer.url, 'aura-2', WRONG_KEY_ENV),
  });
  await upsertModel(db, checkProtocol, {
    id: 'dg-nova-badkey',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: upstream(peer.url, 'nova-3', WRONG_KEY_ENV),
  });
  // Two upstreams, the dead one weighted 99 to 1: with Math.random() at 0.5 it comes first
  // whatever order the database lists them in (upstreamOrder: weighted first pick).
  for (const id of ['dg-aura-failover', 'dg-nova-failover-ws', 'dg-nova-failover-batch']) {
    const modality = id.startsWith('dg-aura') ? 'tts' : 'stt';
    const prices = modality === 'tts' ? { picoPerChar: TTS_PRICE } : { picoPerSecond: STT_PRICE };
    const model = modality === 'tts' ? 'aura-2' : 'nova-3';
    await upsertModel(db, checkProtocol, { id, modality, prices, upstream: upstream(DEAD_URL, model, KEY_ENV, 99) });
    await upsertModel(db, checkProtocol, { id, modality, prices, upstream: upstream(peer.url, model, KEY_ENV, 1) });
  }
  await upsertModel(db, checkProtocol, { id: 'dg-health', modality: 'tts', prices: { picoPerChar: TTS_PRICE }, upstream: upstream(healthPeer.url, 'aura-2') });
  await Promise.all([h.runtime.ctx.registry.refresh(), hs.runtime.ctx.registry.refresh()]);
  voices.badKey = await mappedVoice(h, 'dg-aura-badkey', 'aura-2-thalia-en');
  voices.failover = await mappedVoice(h, 'dg-aura-failover', 'aura-2-thalia-en');
  voices.slow = await mappedVoice(hs, 'dg-aura', 'aura-2-thalia-en');
}, 60_000);

afterEach(() => {
  peer.behaviour = { kind: 'ok' };
  healthPeer.behaviour = { kind: 'ok' };
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.allSettled([h?.close(), hs?.close()]);
  await Promise.allSettled([peer?.close(), healthPeer?.close()]);
  delete process.env[KEY_ENV];
  delete process.env[WRONG_KEY_ENV];
});

// ---------------------------------------------------------------------------------------
// Helpers

async function orgVoice(g: GatewayHarness, name: string): Promise<string> {
  const id = newId('voice');
  await prisma(g).voice.create({ data: { id, orgId: g.orgId, name, tags: [] } });
  return id;
}

/** An org voice speaking through `modelId`'s engine as its voice `upstreamId`. */
async function mappedVoice(g: GatewayHarness, modelId: string, upstreamId: string): Promise<string> {
  const id = await orgVoice(g, `mapped ${upstreamId} for ${modelId}`);
  await mapVoiceToEngine(prisma(g), { voiceId: id, modelId, upstreamId });
  return id;
}

async function upstreamIdOf(g: GatewayHarness, modelId: string, url: string): Promise<string> {
  const model = await getModel(prisma(g), modelId);
  return model.upstreams.find((u) => u.url === url)!.id;
}

let rid = 0;
const requestId = (label: string) => `dg-${label}-${++rid}-${Date.now()}`;

/** The peer's 440 Hz tone, sample by sample. */
function tone(count: number, rate = ENGINE_RATE): Int16Array {
  return Int16Array.from({ length: count }, (_, i) => scriptedToneSample(i, rate));
}

function s16(bytes: Buffer): Int16Array {
  expect(bytes.length % 2).toBe(0);
  return Int16Array.from({ length: bytes.length / 2 }, (_, i) => bytes.readInt16LE(i * 2));
}

/**
 * A WAV file read here (not by the product's parser): its format and 16-bit samples. `streaming`:
 * the sizes are 0xFFFFFFFF (docs/tts.md: a streamed WAV's header), the data runs to the end.
 */
function readWav(buf: Buffer, streaming = false): { format: number; channels: number; rate: number; bits: number; samples: Int16Array } {
  expect(buf.toString('latin1', 0, 4)).toBe('RIFF');
  expect(buf.toString('latin1', 8, 12)).toBe('WAVE');
  expect(buf.readUInt32LE(4)).toBe(streaming ? 0xffffffff : buf.length - 8);
  let fmt: { format: number; channels: number; rate: number; bits: number } | null = null;
  for (let at = 12; at + 8 <= buf.length;) {
    const id = buf.toString('latin1', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    if (id === 'fmt ')
      fmt = { format: buf.readUInt16LE(at + 8), channels: buf.readUInt16LE(at + 10), rate: buf.readUInt32LE(at + 12), bits: buf.readUInt16LE(at + 22) };
    if (id === 'data') {
      expect(fmt).not.toBeNull();
      expect(size).toBe(streaming ? 0xffffffff : buf.length - at - 8);
      return { ...fmt!, samples: s16(buf.subarray(at + 8)) };
    }
    at += 8 + size + (size % 2);
  }
  throw new Error('no data chunk');
}

/** Upward zero crossings: a 440 Hz tone has 440 a second. */
function upwardCrossings(x: Int16Array): number {
  let n = 0;
  for (let i = 1; i < x.length; i++) if (x[i - 1]! < 0 && x[i]! >= 0) n++;
  return n;
}

const peak = (x: Int16Array) => x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);

/** The last request the peer got on `path` (the speak, listen or models endpoint). */
const lastRequest = (path: string): ReceivedRequest => [...peer.received].reverse().find((r) => r.path === path)!;

const ttsBody = (
  voiceId: string,
  transcript: string,
  output: Record<string, unknown> = { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
  over: Record<string, unknown> = {},
) => ({
  model_id: 'dg-aura',
  transcript,
  voice: { mode: 'id', id: voiceId },
  output_format: output,
  ...over,
});

/** The exact debit of a synthesis: price x characters of the submitted transcript, one usage row. */
async function expectTtsBilled(g: GatewayHarness, id: string, characters: number, route: string, modelId = 'dg-aura') {
  const cost = costOf(characters, TTS_PRICE);
  const billed = await expectDebited(g, id, cost);
  expect(billed.usage).toEqual([expect.objectContaining({ modelId, modality: 'tts', route, characters, costMicros: cost })]);
  return cost;
}

/** Never the engine's key, nor the wrong one, in anything a client sees. */
function expectNoKey(text: string): void {
  expect(text).not.toContain(DG_KEY);
  expect(text).not.toContain(WRONG_KEY);
}

// Audio for the listener: tone bursts (one scripted word each) at [start, end] seconds, silence elsewhere.
function bursts(rate: number, spans: [number, number][], totalSeconds: number): Float32Array {
  const out = new Float32Array(Math.round(rate * totalSeconds));
  for (const [start, end] of spans) {
    for (let i = Math.round(start * rate); i < Math.round(end * rate); i++) out[i] = 0.45 * Math.sin((2 * Math.PI * 300 * i) / rate);
  }
  return out;
}

/** 16-bit little-endian PCM written here. */
function pcm16(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** 100 ms frames, sent back to back (the gateway keeps their order; nothing here depends on pacing). */
const frames = (rate: number, bytesPerSample = 2) => ({ frameBytes: (rate / 10) * bytesPerSample, intervalMs: 0 });

const sttQuery = (g: GatewayHarness, over: Record<string, string> = {}) => ({
  model: 'dg-nova',
  api_key: g.key,
  sample_rate: '16000',
  encoding: 'pcm_s16le',
  ...over,
});

/** The Deepgram socket the gateway opened last (after `before` sockets). */
async function listenSocket(before: number): Promise<ListenSocket> {
  await vi.waitFor(() => expect(peer.sockets.length).toBeGreaterThan(before), { timeout: 10_000, interval: 10 });
  return peer.sockets[before]!;
}

/** Events without session.started (whose ids and times vary), as the client got them. */
const eventsAfterStart = (c: SttClient) => c.events.slice(1);

const transcriptEvent = (isFinal: boolean, text: string, words: [string, number, number][]) => ({
  type: 'transcript',
  is_final: isFinal,
  text,
  words: words.map(([word, start, end]) => ({ word, start, end })),
});

/** session.closed is the last event, with exactly this audio and cost; the ledger holds exactly that, once. */
/** A session whose engine never opened: the audio it sent is counted, nothing is billed. */
async function expectSessionNotBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string): Promise<void> {
  expect(c.events.at(-1), summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(0n) });
  // The session's end (its last debit, had there been one) is tracked by the lifecycle.
  expect(await g.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  expect((await ledgerOf(g, c.events[0]!.request_id as string)).ledger).toHaveLength(0);
}

async function expectSessionBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string, modelId = 'dg-nova'): Promise<void> {
  const last = c.events.at(-1)!;
  expect(last.type, summary(c.events)).toBe('session.closed');
  expect(c.ofType('session.closed')).toHaveLength(1);
  const cost = audioCost(millis, STT_PRICE);
  expect(last).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(cost) });
  await expectBilledSession(g, c.events[0]!.request_id as string, millis, modelId);
}

async function expectBilledSession(g: GatewayHarness, id: string, millis: number, modelId = 'dg-nova'): Promise<void> {
  const cost = audioCost(millis, STT_PRICE);
  const billed = await expectDebited(g, id, cost);
  expect(billed.usageMicros).toBe(cost);
  expect(billed.audioMillis).toBe(millis);
  expect(billed.usage.every((u) => u.modality === 'stt' && u.route === 'stt.websocket' && u.modelId === modelId)).toBe(true);
}

/** Sends close; the session ends with session.closed and a 1000 close. */
async function closeSession(c: SttClient): Promise<void> {
  c.command({ type: 'close' });
  expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });
}

const controlsOf = (s: ListenSocket) => s.controls.map((m) => m.type).filter((t) => t !== 'KeepAlive');

// ---------------------------------------------------------------------------------------

describe('voices: Deepgram\u2019s model list imported, and a voice mapped by hand', () => {
  it('listEngineVoices reads GET /v1/models with our key; importEngineVoices makes them platform voices that GET /voices lists with ready profiles; a re-import updates them', async () => {
    const before = peer.received.length;
    const catalogue = await listEngineVoices(prisma(), h.runtime.ctx.config.engines, 'dg-aura');
    expect(catalogue).toEqual([
      { id: 'aura-2-thalia-en', name: 'thalia', language: 'en', gender: 'female', description: 'American accent; Casual chat, Customer service' },
      { id: 'aura-2-apollo-en', name: 'apollo', language: 'en', gender: 'male', description: 'American accent; Interview' },
      { id: 'aura-2-celeste-es', name: 'celeste', language: 'es', gender: null, description: 'Colombian accent' },
      { id: 'aura-orion-en', name: 'orion', language: 'en', gender: null, description: '' },
    ]);
    expect(peer.received.slice(before).map((r) => [r.method, r.path, r.headers.authorization])).toEqual([['GET', '/v1/models', `Token ${DG_KEY}`]]);

    expect(await importEngineVoices(prisma(), { modelId: 'dg-aura', voices: catalogue })).toEqual({ created: 4, updated: 0 });
    expect(await importEngineVoices(prisma(), { modelId: 'dg-aura', voices: catalogue })).toEqual({ created: 0, updated: 4 });

    const res = await fetch(`${h.url}/voices?tag=dg-aura&limit=200`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(res.status).toBe(200);
    const listed = ((await res.json()) as { voices: Record<string, unknown>[] }).voices;
    const byEngineId = new Map(listed.map((v) => [(v.profiles as { upstream_id: string }[])[0]!.upstream_id, v]));
    expect([...byEngineId.keys()].sort()).toEqual(['aura-2-apollo-en', 'aura-2-celeste-es', 'aura-2-thalia-en', 'aura-orion-en']);
    expect(listed).toHaveLength(4);
    for (const v of catalogue) {
      const voice = byEngineId.get(v.id)!;
      expect(voice).toMatchObject({
        name: v.name,
        language: v.language,
        gender: v.gender ?? '',
        description: v.description,
        kind: 'library',
        is_owner: false,
        tags: ['imported', 'dg-aura'],
        source_metadata: { imported_from: 'dg-aura', upstream_voice_id: v.id },
      });
      expect(voice.profiles).toEqual([expect.objectContaining({ model_id: 'dg-aura', upstream_id: v.id, status: 'ready', expires_at: null })]);
    }

    // Each imported voice speaks as its Aura model.
    for (const engineId of ['aura-2-apollo-en', 'aura-orion-en']) {
      const res2 = await post(h, '/tts/bytes', ttsBody(byEngineId.get(engineId)!.id as string, 'Hi.'));
      expect(res2.status).toBe(200);
      expect(s16(Buffer.from(await res2.arrayBuffer()))).toEqual(tone(samplesFor('Hi.')));
      expect(lastRequest('/v1/speak').query.get('model')).toBe(engineId);
    }
  });

  it('a voice of the org mapped with mapVoiceToEngine to an Aura model outside the list speaks as that model; before the mapping it is 409 voice_profile_missing', async () => {
    const voiceId = await orgVoice(h, 'our brand voice');
    const id = requestId('unmapped');
    await expectError(await post(h, '/tts/bytes', ttsBody(voiceId, 'Hello.'), { requestId: id }), {
      status: 409,
      code: 'voice_profile_missing',
      param: 'voice.id',
    });
    await expectNotBilled(h, id);

    await mapVoiceToEngine(prisma(), { voiceId, modelId: 'dg-aura', upstreamId: 'aura-asteria-en' });
    const got = (await (await fetch(`${h.url}/voices/${voiceId}`, { headers: { authorization: `Bearer ${h.key}` } })).json()) as {
      profiles: unknown[];
      is_owner: boolean;
    };
    expect(got.is_owner).toBe(true);
    expect(got.profiles).toEqual([expect.objectContaining({ model_id: 'dg-aura', upstream_id: 'aura-asteria-en', status: 'ready' })]);

    const before = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody(voiceId, 'Hello.', undefined, { generation_config: { speed: 1.2 } }));
    expect(res.status).toBe(200);
    expect(s16(Buffer.from(await res.arrayBuffer()))).toEqual(tone(samplesFor('Hello.')));
    const sent = peer.received.slice(before);
    expect(sent).toHaveLength(1);
    // An Aura-1 voice: no speed parameter (only Aura-2 takes one).
    expect(Object.fromEntries(sent[0]!.query)).toEqual({ model: 'aura-asteria-en', encoding: 'linear16', sample_rate: '24000', container: 'none' });

    // Mapped again, to another engine voice: the profile is replaced, synthesis follows.
    await mapVoiceToEngine(prisma(), { voiceId, modelId: 'dg-aura', upstreamId: 'aura-2-apollo-en' });
    const again = await post(h, '/tts/bytes', ttsBody(voiceId, 'Hello.', undefined, { generation_config: { speed: 1.2 } }));
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(Object.fromEntries(lastRequest('/v1/speak').query)).toEqual({
      model: 'aura-2-apollo-en',
      encoding: 'linear16',
      sample_rate: '24000',
      container: 'none',
      speed: '1.2',
    });
  });
});

// ---------------------------------------------------------------------------------------

describe('speech (Aura) on the TTS routes', () => {
  const TEXT = 'The quick brown fox jumps over the lazy dog.';
  let thalia: string;

  beforeAll(async () => {
    thalia = await mappedVoice(h, 'dg-aura', 'aura-2-thalia-en');
  });

  it('/tts/bytes raw at the engine\u2019s rate: every sample the engine made, the voice as the model, our key, billed per character', async () => {
    const id = requestId('bytes-raw');
    const before = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody(thalia, TEXT), { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(s16(Buffer.from(await res.arrayBuffer()))).toEqual(tone(samplesFor(TEXT)));
    const sent = peer.received.slice(before);
    expect(sent.map((r) => [r.method, r.path])).toEqual([['POST', '/v1/speak']]);
    expect(Object.fromEntries(sent[0]!.query)).toEqual({ model: 'aura-2-thalia-en', encoding: 'linear16', sample_rate: '24000', container: 'none' });
    expect(JSON.parse(sent[0]!.body.toString())).toEqual({ text: TEXT });
    expect(sent[0]!.headers.authorization).toBe(`Token ${DG_KEY}`);
    const cost = await expectTtsBilled(h, id, TEXT.length, 'tts.bytes');
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
  });

  it('/tts/bytes WAV at 16 kHz: converted from the engine\u2019s 24 kHz (two thirds of the samples, the same 440 Hz tone)', async () => {
    const id = requestId('bytes-wav');
    const res = await post(h, '/tts/bytes', ttsBody(thalia, TEXT, { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' }), { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const wav = readWav(Buffer.from(await res.arrayBuffer()));
    expect([wav.format, wav.channels, wav.rate, wav.bits]).toEqual([1, 1, 16000, 16]);
    const seconds = TEXT.length * 0.01;
    expect(wav.samples.length).toBe(Math.round(seconds * 16000));
    expect(Math.abs(upwardCrossings(wav.samples) - 440 * seconds)).toBeLessThanOrEqual(2);
    expect(Math.abs(peak(wav.samples) - 16384)).toBeLessThan(16384 * 0.05);
    await expectTtsBilled(h, id, TEXT.length, 'tts.bytes');
  });

  it('/tts/sse: chunk events carry exactly the engine\u2019s samples, then one done; billed', async () => {
    const id = requestId('sse');
    const res = await post(h, '/tts/sse', ttsBody(thalia, TEXT), { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const { audio, events } = checkTtsEvents(await res.text());
    expect(s16(audio)).toEqual(tone(samplesFor(TEXT)));
    expect(events.at(-1)).toMatchObject({ type: 'done', done: true, status_code: 200 });
    await expectTtsBilled(h, id, TEXT.length, 'tts.sse');
  });

  it('/v1/audio/speech: pcm and wav (24 kHz, the engine\u2019s samples) and stream_format sse; billed per character', async () => {
    const speech = (over: Record<string, unknown>) => ({ model: 'dg-aura', input: TEXT, voice: thalia, ...over });
    let id = requestId('speech-pcm');
    const pcm = await post(h, '/v1/audio/speech', speech({ response_format: 'pcm' }), { requestId: id });
    expect(pcm.status).toBe(200);
    expect(s16(Buffer.from(await pcm.arrayBuffer()))).toEqual(tone(samplesFor(TEXT)));
    expect(lastRequest('/v1/speak').query.get('model')).toBe('aura-2-thalia-en');
    await expectTtsBilled(h, id, TEXT.length, 'audio.speech');

    id = requestId('speech-wav');
    const wavRes = await post(h, '/v1/audio/speech', speech({ response_format: 'wav', voice: { id: thalia } }), { requestId: id });
    expect(wavRes.status).toBe(200);
    expect(wavRes.headers.get('content-type')).toBe('audio/wav');
    // Relayed progressively, like OpenAI's: a streaming WAV header.
    const wav = readWav(Buffer.from(await wavRes.arrayBuffer()), true);
    expect([wav.format, wav.channels, wav.rate, wav.bits]).toEqual([1, 1, 24000, 16]);
    expect(wav.samples).toEqual(tone(samplesFor(TEXT)));
    await expectTtsBilled(h, id, TEXT.length, 'audio.speech');

    id = requestId('speech-sse');
    const sse = await post(h, '/v1/audio/speech', speech({ response_format: 'pcm', stream_format: 'sse' }), { requestId: id });
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toEqual({ type: 'speech.audio.done', usage: { input_tokens: TEXT.length, output_tokens: 0, total_tokens: TEXT.length } });
    const deltas = events.slice(0, -1);
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.every((e) => e.type === 'speech.audio.delta' && typeof e.audio === 'string')).toBe(true);
    expect(s16(Buffer.concat(deltas.map((e) => Buffer.from(e.audio as string, 'base64'))))).toEqual(tone(samplesFor(TEXT)));
    await expectTtsBilled(h, id, TEXT.length, 'audio.speech');
  });

  it('a pronunciation dictionary is applied before the text leaves: Deepgram gets the aliases (a phoneme, which Aura cannot take, leaves the word as written); billing counts the submitted characters', async () => {
    const created = await post(h, '/pronunciation-dicts', {
      name: 'deepgram terms',
      entries: [
        { grapheme: 'SQL', alias: 'sequel' },
        { grapheme: 'k8s', alias: 'kubernetes' },
        { grapheme: 'GIF', phoneme: "dZ'If" },
      ],
    });
    expect(created.status).toBe(201);
    const dictId = ((await created.json()) as { id: string }).id;
    const transcript = 'SQL on k8s, and a GIF of sql.';
    const expanded = 'sequel on kubernetes, and a GIF of sequel.';
    for (const [path, body] of [
      ['/tts/bytes', ttsBody(thalia, transcript, undefined, { pronunciation_dict_id: dictId })],
      ['/tts/sse', ttsBody(thalia, transcript, undefined, { pronunciation_dict_id: dictId })],
      ['/v1/audio/speech', { model: 'dg-aura', input: transcript, voice: thalia, response_format: 'pcm', pronunciation_dict_id: dictId }],
    ] as const) {
      const id = requestId('dict');
      const before = peer.received.length;
      const res = await post(h, path, body, { requestId: id });
      expect(res.status, path).toBe(200);
      const audio = path === '/tts/sse' ? checkTtsEvents(await res.text()).audio : Buffer.from(await res.arrayBuffer());
      // The audio is the engine's reading of the expanded text (10 ms per character of it).
      expect(s16(audio)).toEqual(tone(samplesFor(expanded)));
      const sent = peer.received.slice(before);
      expect(sent).toHaveLength(1);
      expect(JSON.parse(sent[0]!.body.toString())).toEqual({ text: expanded });
      await expectTtsBilled(h, id, transcript.length, path === '/tts/bytes' ? 'tts.bytes' : path === '/tts/sse' ? 'tts.sse' : 'audio.speech');
    }
  });

  it('the engine refusing our key: 502 upstream_error with Deepgram\u2019s message, no key in the answer, nothing billed (a wrong key, and a revoked one)', async () => {
    const cases = [
      { model: 'dg-aura-badkey', voice: () => voices.badKey, behaviour: { kind: 'ok' } as const },
      { model: 'dg-aura', voice: () => thalia, behaviour: { kind: 'auth_refused' } as const },
    ];
    for (const c of cases) {
      peer.behaviour = c.behaviour;
      for (const [path, body] of [
        ['/tts/bytes', ttsBody(c.voice(), TEXT, undefined, { model_id: c.model })],
        ['/tts/sse', ttsBody(c.voice(), TEXT, undefined, { model_id: c.model })],
        ['/v1/audio/speech', { model: c.model, input: TEXT, voice: c.voice(), response_format: 'pcm' }],
      ] as const) {
        const id = requestId('refused');
        const before = peer.received.length;
        const res = await post(h, path, body, { requestId: id });
        const text = await res.text();
        expectNoKey(text);
        expectNoKey(JSON.stringify([...res.headers]));
        const err = await expectError(new Response(text, { status: res.status, headers: res.headers }), {
          status: 502,
          code: 'upstream_error',
          param: null,
          type: 'api_error',
        });
        expect(err.message).toContain('401');
        expect(err.message).toContain('Invalid credentials.');
        await expectNotBilled(h, id);
        // The key the engine refused was the one the upstream names.
        expect(peer.received.slice(before).map((r) => r.headers.authorization)).toEqual([`Token ${c.model === 'dg-aura' ? DG_KEY : WRONG_KEY}`]);
      }
    }
  });

  it('engine 400 and 422 are the caller\u2019s 400 invalid_request with Deepgram\u2019s message; 500 and 503 are 502 upstream_error; nothing billed', async () => {
    for (const [status, code, message] of [
      [400, 'invalid_request', 'No such model: aura-2-nobody-en'],
      [422, 'invalid_request', 'Text contains unsupported characters.'],
      [500, 'upstream_error', 'Something went wrong.'],
      [503, 'upstream_error', 'Service is temporarily unavailable.'],
    ] as const) {
      peer.behaviour = { kind: 'error', status, body: { err_code: 'SCRIPTED', err_msg: message, request_id: 'r-1' } };
      for (const path of ['/tts/bytes', '/tts/sse', '/v1/audio/speech'] as const) {
        const id = requestId(`engine-${status}`);
        const body = path === '/v1/audio/speech' ? { model: 'dg-aura', input: TEXT, voice: thalia, response_format: 'pcm' } : ttsBody(thalia, TEXT);
        const err = await expectError(await post(h, path, body, { requestId: id }), { status: code === 'invalid_request' ? 400 : 502, code, param: null });
        if (code === 'invalid_request') expect(err.message).toBe(message);
        else expect(err.message).toBe(`The model upstream returned ${status}: ${message}`);
        await expectNotBilled(h, id);
      }
    }
  });

  it('the engine dying mid-stream: /tts/sse ends with an upstream_error event after exactly the audio delivered (debited at the first audio, as documented); streamed /tts/bytes is cut; a whole file is 502 and free', async () => {
    // 4800 bytes of the answer (0.1 s of audio), then the connection is dropped.
    peer.behaviour = { kind: 'die', after: 4800 };
    let id = requestId('die-sse');
    const sse = await post(h, '/tts/sse', ttsBody(thalia, TEXT), { requestId: id });
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 502, error_code: 'upstream_error', request_id: id });
    expect(events.filter((e) => e.type === 'done')).toHaveLength(0);
    const chunks = events.slice(0, -1);
    expect(chunks.every((e) => e.type === 'chunk')).toBe(true);
    expect(s16(Buffer.concat(chunks.map((e) => Buffer.from(e.data as string, 'base64'))))).toEqual(tone(2400));
    expect(lastRequest('/v1/speak').closedEarly).toBe(true);
    await expectTtsBilled(h, id, TEXT.length, 'tts.sse');

    id = requestId('die-bytes-stream');
    const streamed = await post(h, '/tts/bytes', ttsBody(thalia, TEXT, undefined, { stream: true }), { requestId: id });
    expect(streamed.status).toBe(200);
    await expect(streamed.arrayBuffer()).rejects.toThrow();
    await expectTtsBilled(h, id, TEXT.length, 'tts.bytes');

    id = requestId('die-bytes');
    const before = await h.balanceMicros();
    await expectError(await post(h, '/tts/bytes', ttsBody(thalia, TEXT), { requestId: id }), {
      status: 502,
      code: 'upstream_error',
      param: null,
      type: 'api_error',
    });
    await expectNotBilled(h, id);
    expect(await h.balanceMicros()).toBe(before);
  });

  it('a slow engine (0.5 s deadline): 504 upstream_timeout on every route when it never answers; an upstream_timeout event on /tts/sse when it stalls mid-stream', async () => {
    peer.behaviour = { kind: 'hang' };
    for (const [path, body] of [
      ['/tts/bytes', ttsBody(voices.slow, TEXT)],
      ['/tts/sse', ttsBody(voices.slow, TEXT)],
      ['/v1/audio/speech', { model: 'dg-aura', input: TEXT, voice: voices.slow, response_format: 'pcm' }],
    ] as const) {
      const id = requestId('hang');
      const before = peer.received.length;
      await expectError(await post(hs, path, body, { requestId: id }), { status: 504, code: 'upstream_timeout', param: null, type: 'api_error' });
      await expectNotBilled(hs, id);
      const sent = peer.received.slice(before);
      expect(sent).toHaveLength(1);
      // The gateway gave up and closed its connection.
      await sent[0]!.closed;
    }

    peer.behaviour = { kind: 'stall', after: 4800 };
    const id = requestId('stall');
    const sse = await post(hs, '/tts/sse', ttsBody(voices.slow, TEXT), { requestId: id });
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 504, error_code: 'upstream_timeout' });
    expect(s16(Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.data as string, 'base64'))))).toEqual(tone(2400));
    const request = lastRequest('/v1/speak');
    await request.closed;
    expect(request.closedEarly).toBe(true);
  });

  it('the client leaving mid-stream: the gateway drops its connection to Deepgram', async () => {
    peer.behaviour = { kind: 'stall', after: 4800 };
    for (const path of ['/tts/sse', '/tts/bytes'] as const) {
      const controller = new AbortController();
      const before = peer.received.length;
      const body = path === '/tts/sse' ? ttsBody(thalia, TEXT) : ttsBody(thalia, TEXT, undefined, { stream: true });
      const res = await post(h, path, body, { signal: controller.signal });
      expect(res.status).toBe(200);
      if (path === '/tts/sse') {
        const first = JSON.parse((await sseReader(res).next())!) as { type: string };
        expect(first.type).toBe('chunk');
      } else {
        const { value } = await res.body!.getReader().read();
        expect(value!.length).toBeGreaterThan(0);
      }
      const request = peer.received.slice(before).find((r) => r.path === '/v1/speak')!;
      expect(request.closedEarly).toBe(false);
      controller.abort();
      await request.closed;
      expect(request.closedEarly).toBe(true);
    }
  });

  it('failover at open: the unreachable upstream (tried first) is skipped and marked down, the request is served by Deepgram', async () => {
    const deadId = await upstreamIdOf(h, 'dg-aura-failover', DEAD_URL);
    const liveId = await upstreamIdOf(h, 'dg-aura-failover', peer.url);
    // Weighted 99 to 1, a draw of 0.5 makes the dead upstream the first pick in either order.
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('unknown');
    const id = requestId('failover-tts');
    const before = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody(voices.failover, TEXT, undefined, { model_id: 'dg-aura-failover' }), { requestId: id });
    expect(res.status).toBe(200);
    expect(s16(Buffer.from(await res.arrayBuffer()))).toEqual(tone(samplesFor(TEXT)));
    expect(peer.received.slice(before).map((r) => r.path)).toEqual(['/v1/speak']);
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(liveId)).not.toBe('down');
    await expectTtsBilled(h, id, TEXT.length, 'tts.bytes', 'dg-aura-failover');
  });
});

// ---------------------------------------------------------------------------------------

describe('batch transcription: POST /v1/audio/transcriptions', () => {
  const RATE = 24000;
  const clip = () =>
    wavFile(
      [
        bursts(
          RATE,
          [
            [0.3, 0.6],
            [1.0, 1.2],
          ],
          1.5,
        ),
      ],
      RATE,
    );

  it('posts the audio as a 16-bit WAV with the model, language and keyterms; returns Deepgram\u2019s words with their times; billed exactly', async () => {
    const id = requestId('batch');
    const before = peer.received.length;
    const res = await transcribe(h, clip(), { model: 'dg-nova', language: 'en-US', keyterms: 'Acme, Zed Corp' }, { requestId: id });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(JSON.parse(text)).toEqual({
      text: 'Alpha bravo.',
      words: [
        { word: 'Alpha', start: 0.3, end: 0.6 },
        { word: 'bravo.', start: 1.0, end: 1.2 },
      ],
      duration_seconds: 1.5,
    });
    const sent = peer.received.slice(before);
    expect(sent.map((r) => [r.method, r.path])).toEqual([['POST', '/v1/listen']]);
    expect(Object.fromEntries(sent[0]!.query)).toMatchObject({ model: 'nova-3', punctuate: 'true', smart_format: 'true', language: 'en-US' });
    expect(sent[0]!.query.getAll('keyterm')).toEqual(['Acme', 'Zed Corp']);
    expect(sent[0]!.headers.authorization).toBe(`Token ${DG_KEY}`);
    expect(sent[0]!.headers['content-type']).toBe('audio/wav');
    const wav = readWav(sent[0]!.body);
    expect([wav.format, wav.channels, wav.rate, wav.bits, wav.samples.length]).toEqual([1, 1, RATE, 16, 1.5 * RATE]);
    const cost = audioCost(1500, STT_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([
      expect.objectContaining({ modelId: 'dg-nova', modality: 'stt', route: 'audio.transcriptions', audioMillis: 1500, costMicros: cost }),
    ]);
  });

  it('the engine refusing our key: 502 upstream_error with its message and no key; 400 is the caller\u2019s 400 with its message; 5xx is 502; nothing billed', async () => {
    let id = requestId('batch-badkey');
    let res = await transcribe(h, clip(), { model: 'dg-nova-badkey' }, { requestId: id });
    let text = await res.text();
    expectNoKey(text);
    let err = await expectError(new Response(text, { status: res.status, headers: res.headers }), {
      status: 502,
      code: 'upstream_error',
      param: null,
      type: 'api_error',
    });
    expect(err.message).toBe('The model upstream returned 401: Invalid credentials.');
    expect(lastRequest('/v1/listen').headers.authorization).toBe(`Token ${WRONG_KEY}`);
    expect((await ledgerOf(h, id)).ledger).toHaveLength(0);

    peer.behaviour = { kind: 'auth_refused' };
    id = requestId('batch-revoked');
    res = await transcribe(h, clip(), { model: 'dg-nova' }, { requestId: id });
    text = await res.text();
    expectNoKey(text);
    err = await expectError(new Response(text, { status: res.status, headers: res.headers }), { status: 502, code: 'upstream_error', param: null });
    expect(err.message).toContain('Invalid credentials.');
    expect((await ledgerOf(h, id)).ledger).toHaveLength(0);

    peer.behaviour = {
      kind: 'error',
      status: 400,
      body: { err_code: 'Bad Request', err_msg: 'Bad Request: No such model/version/tier combination found.', request_id: 'r-2' },
    };
    id = requestId('batch-400');
    err = await expectError(await transcribe(h, clip(), { model: 'dg-nova' }, { requestId: id }), { status: 400, code: 'invalid_request', param: null });
    expect(err.message).toBe('Bad Request: No such model/version/tier combination found.');
    expect((await ledgerOf(h, id)).ledger).toHaveLength(0);

    peer.behaviour = { kind: 'error', status: 503, body: { err_code: 'SERVICE_UNAVAILABLE', err_msg: 'Service is temporarily unavailable.' } };
    id = requestId('batch-503');
    err = await expectError(await transcribe(h, clip(), { model: 'dg-nova' }, { requestId: id }), { status: 502, code: 'upstream_error', param: null });
    expect(err.message).toBe('The model upstream returned 503: Service is temporarily unavailable.');
    expect((await ledgerOf(h, id)).ledger).toHaveLength(0);
  });

  it('an answer dropped half-way is 502, a silent engine 504 upstream_timeout; nothing billed', async () => {
    peer.behaviour = { kind: 'die', after: 20 };
    let id = requestId('batch-die');
    await expectError(await transcribe(h, clip(), { model: 'dg-nova' }, { requestId: id }), { status: 502, code: 'upstream_error', param: null });
    expect((await ledgerOf(h, id)).ledger).toHaveLength(0);

    peer.behaviour = { kind: 'hang' };
    id = requestId('batch-hang');
    await expectError(await transcribe(hs, clip(), { model: 'dg-nova' }, { requestId: id }), {
      status: 504,
      code: 'upstream_timeout',
      param: null,
      type: 'api_error',
    });
    expect((await ledgerOf(hs, id)).ledger).toHaveLength(0);
    await lastRequest('/v1/listen').closed;
  });

  it('failover at open: the unreachable upstream is skipped and marked down, Deepgram transcribes', async () => {
    const deadId = await upstreamIdOf(h, 'dg-nova-failover-batch', DEAD_URL);
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const id = requestId('failover-batch');
    const res = await transcribe(h, clip(), { model: 'dg-nova-failover-batch' }, { requestId: id });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toBe('Alpha bravo.');
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('down');
    await expectDebited(h, id, audioCost(1500, STT_PRICE));
  });
});

// ---------------------------------------------------------------------------------------

describe('streaming transcription: GET /stt/websocket', () => {
  /** Two words at [0.2, 0.5] and [0.7, 1.0], then 1.4 s of silence: 2.4 s at 16 kHz. */
  const twoWords = () =>
    pcm16(
      bursts(
        16000,
        [
          [0.2, 0.5],
          [0.7, 1.0],
        ],
        2.4,
      ),
    );

  it('turn_source=auto (the default): Deepgram finds the turns (vad_events, endpointing, utterance_end_ms); finals with word times, turn.start/turn.end from SpeechStarted and speech_final (the final, then turn.end and turn.finalized); finalize gives flush_done after the final; close bills exactly the audio sent', async () => {
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, { language: 'en', keyterms: 'Acme,Zed Corp' }));
    await c.until((e) => e.type === 'session.started');
    // The engine is opened at the first audio, not at connect.
    expect(peer.sockets.length).toBe(before);
    const audio = twoWords();
    expect(await c.stream(audio, frames(16000))).toBe(audio.length);
    const socket = await listenSocket(before);
    expect(Object.fromEntries(socket.query)).toEqual({
      model: 'nova-3',
      punctuate: 'true',
      smart_format: 'true',
      language: 'en',
      keyterm: 'Zed Corp',
      encoding: 'linear16',
      sample_rate: '16000',
      channels: '1',
      interim_results: 'true',
      vad_events: 'true',
      endpointing: '300',
      utterance_end_ms: '1000',
    });
    expect(socket.query.getAll('keyterm')).toEqual(['Acme', 'Zed Corp']);
    expect(socket.headers.authorization).toBe(`Token ${DG_KEY}`);

    await c.until((e) => e.type === 'turn.end');
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    // Deepgram's UtteranceEnd (1 s after the last word) came too, and ended no second turn.
    expect(socket.sent.map((m) => m.type)).toContain('UtteranceEnd');
    await closeSession(c);

    expect(eventsAfterStart(c), summary(c.events)).toEqual([
      { type: 'turn.start', at: 0.2 },
      transcriptEvent(false, 'Alpha.', [['Alpha.', 0.2, 0.5]]),
      transcriptEvent(false, 'Alpha bravo.', [
        ['Alpha', 0.2, 0.5],
        ['bravo.', 0.7, 1.0],
      ]),
      transcriptEvent(true, 'Alpha bravo.', [
        ['Alpha', 0.2, 0.5],
        ['bravo.', 0.7, 1.0],
      ]),
      // speech_final after 300 ms of silence following the last word: the engine's own turn, its final before its end.
      { type: 'turn.end', at: 1.3 },
      { type: 'turn.finalized', at: 1.3, transcript: 'Alpha bravo.' },
      { type: 'flush_done' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 2.4, cost_usd: usd(audioCost(2400, STT_PRICE)) },
    ]);
    await expectSessionBilled(h, c, 2400, 'client_close');
    // Deepgram got every byte, once; the close ended its stream (CloseStream) and its socket.
    expect(socket.audioBytes).toBe(audio.length);
    expect(await socket.closed).toEqual({ code: 1000, reason: '' });
    expect(controlsOf(socket)).toEqual(['Finalize', 'CloseStream']);
  });

  it('turn_source=gateway: Deepgram\u2019s endpointing is off (endpointing=false), the gateway\u2019s detector finds the turn and finalizes it; turn.end goes out at its decision, the final follows, then turn.finalized', async () => {
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, { turn_source: 'gateway' }));
    // Two spoken words 100 ms apart: one turn (Deepgram's "Alpha." between them is a full stop,
    // which shortens the pause that ends a turn).
    const audio = pcm16(
      speechBursts(
        16000,
        [
          [0.2, 0.5],
          [0.6, 0.9],
        ],
        2.4,
      ),
    );
    await c.stream(audio, frames(16000));
    const socket = await listenSocket(before);
    expect(socket.query.get('endpointing')).toBe('false');
    expect(socket.query.has('vad_events')).toBe(false);
    expect(socket.query.has('utterance_end_ms')).toBe(false);
    await c.until((e) => e.type === 'turn.finalized');
    await closeSession(c);

    // The interims come as Deepgram hears the words, the detector's decision as it finds the
    // silence: they race, so they are checked apart.
    const isInterim = (e: SttEvent) => e.type === 'transcript' && !e.is_final;
    expect(
      eventsAfterStart(c).filter((e) => !isInterim(e)),
      summary(c.events),
    ).toEqual([
      // balanced: the turn starts where the first word does and ends, in the silence after the
      // last, at that word's end (both within about a VAD frame); the final comes once Deepgram
      // answers the turn's Finalize, then turn.finalized with the turn's text.
      { type: 'turn.start', at: expect.closeTo(0.2, 1) },
      { type: 'turn.end', at: expect.closeTo(0.9, 1) },
      transcriptEvent(true, 'Alpha bravo.', [
        ['Alpha', 0.2, 0.5],
        ['bravo.', 0.6, 0.9],
      ]),
      { type: 'turn.finalized', at: c.ofType('turn.end')[0]!.at, transcript: 'Alpha bravo.' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 2.4, cost_usd: usd(audioCost(2400, STT_PRICE)) },
    ]);
    expect(eventsAfterStart(c).filter(isInterim)).toEqual([
      transcriptEvent(false, 'Alpha.', [['Alpha.', 0.2, 0.5]]),
      transcriptEvent(false, 'Alpha bravo.', [
        ['Alpha', 0.2, 0.5],
        ['bravo.', 0.6, 0.9],
      ]),
    ]);
    // Every interim before the final.
    const finalAt = c.events.findIndex((e) => e.type === 'transcript' && e.is_final);
    expect(c.events.findLastIndex(isInterim)).toBeLessThan(finalAt);
    // Deepgram sent no speech events of its own: the final came from the gateway's Finalize.
    expect(socket.sent.filter((m) => m.type === 'SpeechStarted' || m.type === 'UtteranceEnd')).toEqual([]);
    expect(socket.sent.filter((m) => m.type === 'Results' && m.is_final).map((m) => m.from_finalize)).toEqual([true, true]);
    await expectSessionBilled(h, c, 2400, 'client_close');
    expect(socket.audioBytes).toBe(audio.length);
    await socket.closed;
    expect(controlsOf(socket)).toEqual(['Finalize', 'Finalize', 'CloseStream']);
  });

  it('finalize mid-utterance: the final, then flush_done, no turn.end; the session carries on with times running on, and an UtteranceEnd later ends the turn', async () => {
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h));
    await c.stream(pcm16(bursts(16000, [[0.1, 0.4]], 0.5)), frames(16000));
    c.command({ type: 'finalize' });
    const flush1 = await c.until((e) => e.type === 'flush_done');
    await c.stream(pcm16(bursts(16000, [[0.2, 0.4]], 0.5)), frames(16000));
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done', { from: c.events.indexOf(flush1) + 1 });
    // 1.2 s of silence: Deepgram's UtteranceEnd (1 s after the last word) ends the turn at that word's end.
    await c.stream(pcm16(new Float32Array(16000 * 1.2)), frames(16000));
    await c.until((e) => e.type === 'turn.end');
    await closeSession(c);

    expect(eventsAfterStart(c), summary(c.events)).toEqual([
      { type: 'turn.start', at: 0.1 },
      transcriptEvent(false, 'Alpha.', [['Alpha.', 0.1, 0.4]]),
      transcriptEvent(true, 'Alpha.', [['Alpha.', 0.1, 0.4]]),
      { type: 'flush_done' },
      transcriptEvent(false, 'Bravo.', [['Bravo.', 0.7, 0.9]]),
      transcriptEvent(true, 'Bravo.', [['Bravo.', 0.7, 0.9]]),
      { type: 'flush_done' },
      { type: 'turn.end', at: 0.9 },
      { type: 'turn.finalized', at: 0.9, transcript: 'Alpha. Bravo.' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 2.2, cost_usd: usd(audioCost(2200, STT_PRICE)) },
    ]);
    await expectSessionBilled(h, c, 2200, 'client_close');
    const socket = peer.sockets[before]!;
    expect(socket.audioBytes).toBe(2.2 * 16000 * 2);
    await socket.closed;
    expect(controlsOf(socket)).toEqual(['Finalize', 'Finalize', 'Finalize', 'CloseStream']);
  });

  it('pcm_mulaw at 8 kHz goes to Deepgram as linear16 at 8 kHz (exact times); pcm_f32le at 22.05 kHz is resampled to 16 kHz', async () => {
    let before = peer.sockets.length;
    const mulaw = await openSession(h, sttQuery(h, { sample_rate: '8000', encoding: 'pcm_mulaw' }));
    await mulaw.stream(
      encodeSamples(
        bursts(
          8000,
          [
            [0.1, 0.3],
            [0.5, 0.8],
          ],
          1.2,
        ),
        'pcm_mulaw',
      ),
      frames(8000, 1),
    );
    await mulaw.until((e) => e.type === 'turn.end');
    await closeSession(mulaw);
    let socket = peer.sockets[before]!;
    expect([socket.query.get('encoding'), socket.query.get('sample_rate')]).toEqual(['linear16', '8000']);
    expect(socket.audioBytes).toBe(1.2 * 8000 * 2);
    expect(mulaw.ofType('transcript').filter((e) => e.is_final)).toEqual([
      transcriptEvent(true, 'Alpha bravo.', [
        ['Alpha', 0.1, 0.3],
        ['bravo.', 0.5, 0.8],
      ]),
    ]);
    expect([...mulaw.ofType('turn.start'), ...mulaw.ofType('turn.end')]).toEqual([
      { type: 'turn.start', at: 0.1 },
      { type: 'turn.end', at: 1.1 },
    ]);
    await expectSessionBilled(h, mulaw, 1200, 'client_close');

    before = peer.sockets.length;
    const f32 = await openSession(h, sttQuery(h, { sample_rate: '22050', encoding: 'pcm_f32le' }));
    const samples = bursts(22050, [[0.2, 0.5]], 1.2);
    await f32.stream(encodeSamples(samples, 'pcm_f32le'), frames(22050, 4));
    await f32.until((e) => e.type === 'turn.end');
    await closeSession(f32);
    socket = peer.sockets[before]!;
    expect(socket.query.get('sample_rate')).toBe('16000');
    // All of it but the resampler's filter delay (~2.5 ms), which the session does not flush at a finalize or a close.
    expect(socket.audioBytes).toBeLessThanOrEqual(1.2 * 16000 * 2);
    expect(socket.audioBytes).toBeGreaterThanOrEqual((1.2 * 16000 - 48) * 2);
    const [final, ...more] = f32.ofType('transcript').filter((e) => e.is_final);
    expect(more).toEqual([]);
    expect(final!.text).toBe('Alpha.');
    const [word] = final!.words as { word: string; start: number; end: number }[];
    // Resampling shifts the burst's edges by at most a fraction of the peer's 20 ms frames.
    expect(Math.abs(word!.start - 0.2)).toBeLessThanOrEqual(0.02 + 1e-9);
    expect(Math.abs(word!.end - 0.5)).toBeLessThanOrEqual(0.02 + 1e-9);
    await expectSessionBilled(h, f32, 1200, 'client_close');
  });

  it('the engine refusing our key: an upstream_error event with Deepgram\u2019s message and no key, then session.closed and 1011; nothing billed (no engine took the audio)', async () => {
    for (const [model, behaviour, key] of [
      ['dg-nova-badkey', { kind: 'ok' }, WRONG_KEY],
      ['dg-nova', { kind: 'auth_refused' }, DG_KEY],
    ] as const) {
      peer.behaviour = behaviour;
      const before = peer.received.length;
      const c = await openSession(h, sttQuery(h, { model }));
      await c.stream(pcm16(bursts(16000, [[0, 0.1]], 0.1)), frames(16000));
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
      expect(c.events[1]!.code).toBe('upstream_error');
      expect(c.events[1]!.message).toContain('401: Invalid credentials.');
      expectNoKey(JSON.stringify(c.events));
      expect(peer.received.slice(before).map((r) => [r.path, r.headers.authorization])).toEqual([['/v1/listen', `Token ${key}`]]);
      await expectSessionNotBilled(h, c, 100, 'engine_error');
    }
  });

  it('engine 400 at the upgrade: an invalid_request event with Deepgram\u2019s message; 503: upstream_error; both close 1011', async () => {
    for (const [status, code, message] of [
      [400, 'invalid_request', 'Bad Request: No such model/version/tier combination found.'],
      [503, 'upstream_error', 'Service is temporarily unavailable.'],
    ] as const) {
      peer.behaviour = { kind: 'error', status, body: { err_code: 'SCRIPTED', err_msg: message } };
      const c = await openSession(h, sttQuery(h));
      await c.stream(pcm16(new Float32Array(1600)), frames(16000));
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
      expect(c.events[1]!.code).toBe(code);
      expect(c.events[1]!.message).toContain(message);
      if (status >= 500) expect(c.events[1]!.message).toContain(String(status));
      await expectSessionNotBilled(h, c, 100, 'engine_error');
    }
  });

  it('the engine dying mid-stream: what it said is relayed, then an upstream_error event, session.closed and 1011; billed for exactly the audio received', async () => {
    // Two messages (SpeechStarted, the first interim), then the connection is dropped.
    peer.behaviour = { kind: 'die', after: 2 };
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h));
    // The interim that precedes the drop is made from the last 100 ms frame: all 0.4 s reached the gateway.
    await c.stream(pcm16(bursts(16000, [[0.1, 0.3]], 0.4)), frames(16000));
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(eventsAfterStart(c).slice(0, 3)).toEqual([
      { type: 'turn.start', at: 0.1 },
      transcriptEvent(false, 'Alpha.', [['Alpha.', 0.1, 0.3]]),
      expect.objectContaining({ type: 'error', code: 'upstream_error' }),
    ]);
    expect(c.events).toHaveLength(5);
    expectNoKey(JSON.stringify(c.events));
    await expectSessionBilled(h, c, 400, 'engine_error');
    expect(peer.sockets[before]!.audioBytes).toBe(0.4 * 16000 * 2);
  });

  it('Deepgram closing the stream itself (1011 NET-0001) ends the session with an upstream_error event naming it', async () => {
    peer.idleTimeoutMs = 300;
    try {
      const c = await openSession(h, sttQuery(h));
      await c.stream(pcm16(bursts(16000, [[0.1, 0.3]], 0.4)), frames(16000));
      await c.until((e) => e.type === 'transcript');
      // No more audio: the peer closes its idle socket after 300 ms.
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      const [error] = c.ofType('error');
      expect(error).toMatchObject({ code: 'upstream_error' });
      expect(error!.message).toContain('NET-0001');
      await expectSessionBilled(h, c, 400, 'engine_error');
    } finally {
      peer.idleTimeoutMs = 10_000;
    }
  });

  it('a slow engine (0.5 s deadline) that never accepts the upgrade: an upstream_timeout event, then 1011', async () => {
    peer.behaviour = { kind: 'hang' };
    const c = await openSession(hs, sttQuery(hs));
    await c.stream(pcm16(new Float32Array(1600)), frames(16000));
    expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
    expect(c.events.map((e) => e.type)).toEqual(['session.started', 'error', 'session.closed']);
    expect(c.events[1]!.code).toBe('upstream_timeout');
    await expectSessionNotBilled(hs, c, 100, 'engine_error');
  });

  it('a session outlives SVC_UPSTREAM_TIMEOUT_SECONDS (0.5 s here): the deadline bounds the engine\u2019s silence, not the session', async () => {
    // 2.2 s of audio sent in real time (a live source): two utterances, Deepgram answering throughout.
    const before = peer.sockets.length;
    const c = await openSession(hs, sttQuery(hs));
    await c.stream(
      pcm16(
        bursts(
          16000,
          [
            [0.2, 0.4],
            [1.5, 1.7],
          ],
          2.2,
        ),
      ),
      { frameBytes: 3200, intervalMs: 100 },
    );
    await c.until((e) => e.type === 'turn.end' && (e.at as number) > 1);
    await closeSession(c);
    expect(eventsAfterStart(c), summary(c.events)).toEqual([
      { type: 'turn.start', at: 0.2 },
      transcriptEvent(false, 'Alpha.', [['Alpha.', 0.2, 0.4]]),
      transcriptEvent(true, 'Alpha.', [['Alpha.', 0.2, 0.4]]),
      { type: 'turn.end', at: 0.7 },
      { type: 'turn.finalized', at: 0.7, transcript: 'Alpha.' },
      { type: 'turn.start', at: 1.5 },
      transcriptEvent(false, 'Bravo.', [['Bravo.', 1.5, 1.7]]),
      transcriptEvent(true, 'Bravo.', [['Bravo.', 1.5, 1.7]]),
      { type: 'turn.end', at: 2.0 },
      { type: 'turn.finalized', at: 2.0, transcript: 'Bravo.' },
      { type: 'session.closed', reason: 'client_close', audio_seconds: 2.2, cost_usd: usd(audioCost(2200, STT_PRICE)) },
    ]);
    await expectSessionBilled(hs, c, 2200, 'client_close');
    const socket = peer.sockets[before]!;
    expect(socket.audioBytes).toBe(2.2 * 16000 * 2);
    await socket.closed;
    expect(controlsOf(socket)).toEqual(['Finalize', 'CloseStream']);
  });

  it('an engine gone silent with words pending: the finalize ends in an upstream_timeout error, not in a flush_done without their final', async () => {
    // SpeechStarted and the interim "Alpha.", then nothing more: the Finalize is never answered.
    peer.behaviour = { kind: 'stall', after: 2 };
    const c = await openSession(h, sttQuery(h));
    try {
      await c.stream(pcm16(bursts(16000, [[0.1, 0.3]], 0.4)), frames(16000));
      await c.until((e) => e.type === 'transcript');
      c.command({ type: 'finalize' });
      const outcome = await c.until((e) => e.type === 'flush_done' || e.type === 'error');
      expect(eventsAfterStart(c).slice(0, 2)).toEqual([{ type: 'turn.start', at: 0.1 }, transcriptEvent(false, 'Alpha.', [['Alpha.', 0.1, 0.3]])]);
      // The client was shown "Alpha." as an interim: a flush_done now tells it the utterance is
      // complete while its final never came (the word is lost, and nothing says so).
      expect(outcome, summary(c.events)).toMatchObject({ type: 'error', code: 'upstream_timeout' });
      expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
      await expectSessionBilled(h, c, 400, 'engine_error');
    } finally {
      c.ws.terminate();
    }
  });

  it('the client leaving mid-session: the gateway closes Deepgram\u2019s stream, and bills exactly the audio it got', async () => {
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h));
    const audio = pcm16(bursts(16000, [[0.2, 0.5]], 1.0));
    await c.stream(audio, frames(16000));
    // Everything sent has reached Deepgram once flush_done is back.
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    const socket = peer.sockets[before]!;
    expect(socket.isClosed).toBe(false);
    c.ws.terminate();
    expect((await socket.closed).code).toBe(1000);
    expect(controlsOf(socket)).toEqual(['Finalize', 'CloseStream']);
    expect(socket.audioBytes).toBe(audio.length);
    await expectBilledSession(h, c.events[0]!.request_id as string, 1000);
  });

  it('failover at open: the unreachable upstream (tried first) is skipped and marked down; Deepgram serves the session', async () => {
    const deadId = await upstreamIdOf(h, 'dg-nova-failover-ws', DEAD_URL);
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const before = peer.sockets.length;
    const c = await openSession(h, sttQuery(h, { model: 'dg-nova-failover-ws' }));
    await c.stream(twoWords(), frames(16000));
    await c.until((e) => e.type === 'turn.end');
    vi.restoreAllMocks();
    expect(h.runtime.ctx.registry.healthOf(deadId)).toBe('down');
    await closeSession(c);
    expect(
      c
        .ofType('transcript')
        .filter((e) => e.is_final)
        .map((e) => e.text),
    ).toEqual(['Alpha bravo.']);
    expect(peer.sockets.length).toBe(before + 1);
    await expectSessionBilled(h, c, 2400, 'client_close', 'dg-nova-failover-ws');
  });
});

// ---------------------------------------------------------------------------------------

describe('health (GET /v1/projects with our key) and GET /v1/models', () => {
  const listed = async () => {
    const res = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { id: string; modality: string }[] }).data;
  };

  it('up while Deepgram accepts our key, down (and unlisted, and 503 model_offline) while it refuses it, up again after', async () => {
    const id = await upstreamIdOf(h, 'dg-health', healthPeer.url);
    const voiceId = await mappedVoice(h, 'dg-health', 'aura-2-thalia-en');
    const before = healthPeer.received.length;
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect(healthPeer.received.slice(before).map((r) => [r.method, r.path, r.headers.authorization])).toEqual([['GET', '/v1/projects', `Token ${DG_KEY}`]]);
    expect(await listed()).toContainEqual(expect.objectContaining({ id: 'dg-health', modality: 'tts' }));

    healthPeer.behaviour = { kind: 'auth_refused' };
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('down');
    expect((await listed()).map((m) => m.id)).not.toContain('dg-health');
    const row = await prisma().upstream.findUniqueOrThrow({ where: { id } });
    expect(row.health).toBe('down');
    expect(row.lastError).toContain('401');
    expectNoKey(row.lastError ?? '');
    const res = await post(h, '/tts/bytes', ttsBody(voiceId, 'Hello.', undefined, { model_id: 'dg-health' }));
    const text = await res.text();
    expectNoKey(text);
    await expectError(new Response(text, { status: res.status, headers: res.headers }), { status: 503, code: 'model_offline', param: null });

    healthPeer.behaviour = { kind: 'ok' };
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(id)).toBe('up');
    expect((await listed()).map((m) => m.id)).toContain('dg-health');
    const ok = await post(h, '/tts/bytes', ttsBody(voiceId, 'Hello.', undefined, { model_id: 'dg-health' }));
    expect(ok.status).toBe(200);
    expect(s16(Buffer.from(await ok.arrayBuffer()))).toEqual(tone(samplesFor('Hello.')));
  });
});
