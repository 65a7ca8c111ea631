// Route tests of the `cartesia` protocol through the real gateway (HTTP and WebSocket routes,
// throw-away SQLite or PostgreSQL database) against the scripted Cartesia API
// (test/support/scripted-cartesia.ts): speech on /tts/bytes, /tts/sse and /v1/audio/speech,
// batch transcription, the streaming transcription socket (turns found by the gateway's own
// detector, since Cartesia's socket is manual-finalize), cloning, the voice catalogue import,
// pronunciation dictionaries, exact metering, every way the engine fails, failover at open and
// health. The peer's words come from voiced bursts (one scripted word per tone burst) and its
// speech is a 440 Hz tone at 20 ms per character, so audio and words are known exactly. Where the
// gateway's detector (Silero VAD, which takes no pure tone for speech) must find the turns, the
// bursts are voiced (test/support/speech-bursts.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { importEngineVoices, mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedCartesia, TONE_HZ, type CatalogueVoice, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { speechBurst } from '../../test/support/speech-bursts.ts';
import { sseReader } from '../../test/support/sse-client.ts';
import { openTtsSocket } from '../../test/support/tts-socket.ts';
import {
  audioCost,
  expectDebited,
  ledgerOf,
  openSession,
  s16le,
  summary,
  transcribe,
  wavFile,
  type SttClient,
  type SttEvent,
} from '../../test/support/stt-routes.ts';
import { FOX, codePoints, costOf, decodeRaw, expectError, post, requestId, sseData, usd } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart } from '../../test/support/voice-routes.ts';
import { tone, zeroCrossingFrequency } from '../audio/test-signals.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { listEngineVoices } from '../voices/engine-catalogue.ts';
import { MIN_AUDIO_SECONDS } from '../tts/synthesize.ts';

const KEY = 'sk_car_route_secret_4b1d9e';
const BAD_KEY = 'sk_car_route_wrong_77aa3c';
process.env.CARTESIA_ROUTE_KEY = KEY;
process.env.CARTESIA_ROUTE_BAD_KEY = BAD_KEY;
/** A closed port: connections are refused. */
const DEAD = 'http://127.0.0.1:9';
/** pico-USD per character and per second: both need rounding up to a micro-USD. */
const TTS_PRICE = 1_000_001n;
const STT_PRICE = 123_456_789n;
/** The peer speaks 20 ms per character at its asked rate; the upstream's default rate is 24 kHz. */
const ENGINE_RATE = 24000;
const MS_PER_CHAR = 20;

const CATALOGUE: CatalogueVoice[] = [
  { id: 'cv-katie', name: 'Katie', description: 'Friendly support agent', language: 'en', gender: 'feminine' },
  { id: 'cv-ronald', name: 'Ronald', description: 'Deep narrator', language: 'en', gender: 'masculine' },
  { id: 'cv-sol', name: 'Sol', description: 'Calm and even', language: 'es', gender: 'gender_neutral' },
];

let h: GatewayHarness; // default deadline (300 s)
let hs: GatewayHarness; // SVC_UPSTREAM_TIMEOUT_SECONDS=0.5
let peer: ScriptedCartesia;
let slow: ScriptedCartesia;
let imported: { created: number; updated: number };
/** Gateway voice ids: the imported catalogue (by engine id), a voice mapped to an engine id, hs's voice. */
const voices: Record<string, string> = {};
let mappedVoice = '';
let slowVoice = '';

async function orgVoice(g: GatewayHarness, name: string): Promise<string> {
  const id = newId('voice');
  await g.testDb.db.prisma.voice.create({ data: { id, orgId: g.orgId, name, tags: [] } });
  return id;
}

async function cartesiaModel(g: GatewayHarness, id: string, modality: 'tts' | 'stt', url: string, over: { apiKeyEnv?: string; upstreamModel?: string } = {}) {
  await upsertModel(g.testDb.db.prisma, checkProtocol, {
    id,
    modality,
    prices: modality === 'tts' ? { picoPerChar: TTS_PRICE } : { picoPerSecond: STT_PRICE },
    upstream: {
      url,
      protocol: 'cartesia',
      upstreamModel: over.upstreamModel ?? (modality === 'tts' ? 'sonic-3' : 'ink-whisper'),
      apiKeyEnv: over.apiKeyEnv ?? 'CARTESIA_ROUTE_KEY',
    },
  });
}

beforeAll(async () => {
  [peer, slow] = await Promise.all([startScriptedCartesia({ apiKey: KEY, voices: CATALOGUE.map((v) => ({ ...v })) }), startScriptedCartesia({ apiKey: KEY })]);
  const env = { SVC_HEALTH_CHECK_SECONDS: '3600' };
  [h, hs] = await Promise.all([
    startGateway({ creditsMicros: 100_000_000n, env }),
    startGateway({ creditsMicros: 100_000_000n, env: { ...env, SVC_UPSTREAM_TIMEOUT_SECONDS: '0.5' } }),
  ]);
  const prisma = h.testDb.db.prisma;
  await cartesiaModel(h, 'cartesia-sonic', 'tts', peer.url);
  await cartesiaModel(h, 'cartesia-ink', 'stt', peer.url);
  await cartesiaModel(h, 'cartesia-sonic-badkey', 'tts', peer.url, { apiKeyEnv: 'CARTESIA_ROUTE_BAD_KEY' });
  await cartesiaModel(h, 'cartesia-ink-badkey', 'stt', peer.url, { apiKeyEnv: 'CARTESIA_ROUTE_BAD_KEY' });
  for (const [id, modality] of [
    ['cartesia-sonic-failover', 'tts'],
    ['cartesia-ink-failover', 'stt'],
  ] as const) {
    await cartesiaModel(h, id, modality, DEAD);
    await cartesiaModel(h, id, modality, peer.url);
  }
  await h.runtime.ctx.registry.refresh();

  // The engine's catalogue, imported as platform voices with ready profiles for cartesia-sonic.
  imported = await importEngineVoices(prisma, {
    modelId: 'cartesia-sonic',
    voices: await listEngineVoices(prisma, h.runtime.ctx.config.engines, 'cartesia-sonic'),
  });
  for (const p of await prisma.voiceProfile.findMany({ where: { modelId: 'cartesia-sonic' } })) voices[p.upstreamId] = p.voiceId;
  // A second voice, mapped by hand to an engine voice id; Katie also speaks through the other tts models.
  mappedVoice = await orgVoice(h, 'Mapped to Cartesia');
  await mapVoiceToEngine(prisma, { voiceId: mappedVoice, modelId: 'cartesia-sonic', upstreamId: 'cv-mapped-engine-voice' });
  for (const modelId of ['cartesia-sonic-badkey', 'cartesia-sonic-failover'])
    await mapVoiceToEngine(prisma, { voiceId: voices['cv-katie']!, modelId, upstreamId: 'cv-katie' });

  await cartesiaModel(hs, 'slow-sonic', 'tts', slow.url);
  await cartesiaModel(hs, 'slow-ink', 'stt', slow.url);
  slowVoice = await orgVoice(hs, 'Slow voice');
  await mapVoiceToEngine(hs.testDb.db.prisma, { voiceId: slowVoice, modelId: 'slow-sonic', upstreamId: 'cv-slow' });
  await hs.runtime.ctx.registry.refresh();
}, 120_000);

afterEach(() => {
  vi.restoreAllMocks();
  if (peer) peer.behaviour = { kind: 'ok' };
  if (slow) slow.behaviour = { kind: 'ok' };
});

afterAll(async () => {
  await Promise.allSettled([h?.close(), hs?.close()]);
  await Promise.allSettled([peer?.close(), slow?.close()]);
});

// ---------------------------------------------------------------------------------------
// Helpers

/** The peer's tone, computed here as it makes it: 0.5 sin at 440 Hz, float32, then 16-bit. */
function peerTone(rate: number, samples: number): Buffer {
  const f = new Float32Array(samples);
  for (let i = 0; i < samples; i++) f[i] = 0.5 * Math.sin((2 * Math.PI * TONE_HZ * i) / rate);
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(f[i]! * 32768))), i * 2);
  return out;
}

/** Samples the peer makes for a transcript at the engine rate. */
const engineSamples = (text: string, speed = 1) => Math.round((ENGINE_RATE * MS_PER_CHAR * text.length) / 1000 / speed);

/** Bursts (a tone, or voiced: speech to the gateway's detector) and silences, in order: the peer hears one word per burst. */
function bursts(rate: number, parts: [kind: 'tone' | 'voice' | 'silence', seconds: number][]): Float32Array {
  const pieces = parts.map(([kind, seconds]) =>
    kind === 'tone' ? tone(TONE_HZ, rate, seconds) : kind === 'voice' ? speechBurst(rate, seconds) : new Float32Array(Math.round(rate * seconds)),
  );
  const out = new Float32Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function f32le(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 4);
  for (let i = 0; i < samples.length; i++) out.writeFloatLE(samples[i]!, i * 4);
  return out;
}

const ttsBody = (over: Record<string, unknown> = {}) => ({
  model_id: 'cartesia-sonic',
  transcript: FOX,
  voice: { mode: 'id', id: voices['cv-katie'] },
  output_format: { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
  ...over,
});

/** The peer's speech requests from index `from` on, as the JSON bodies it received. */
const speechRequests = (p: ScriptedCartesia, from = 0) =>
  p.received
    .slice(from)
    .filter((r) => r.path === '/tts/bytes')
    .map(
      (r) =>
        JSON.parse(r.body.toString()) as {
          model_id: string;
          transcript: string;
          voice: { mode: string; id: string };
          output_format: unknown;
          language?: string;
          generation_config?: { speed: number };
        },
    );

/** The request's debits: exactly the price of its characters, in one usage row of the route. */
async function expectTtsBilled(g: GatewayHarness, id: string, transcript: string, route: string, modelId = 'cartesia-sonic') {
  const cost = costOf(codePoints(transcript), TTS_PRICE);
  const billed = await expectDebited(g, id, cost);
  expect(billed.usage).toHaveLength(1);
  expect(billed.usage[0]).toMatchObject({ modelId, modality: 'tts', route, characters: codePoints(transcript), costMicros: cost });
  return cost;
}

async function expectNotBilled(g: GatewayHarness, id: string) {
  expect((await ledgerOf(g, id)).ledger).toHaveLength(0);
}

/** WAV header fields and the s16 data, read here. */
function readWav(bytes: Buffer): { rate: number; channels: number; bits: number; dataBytes: number; data: Buffer } {
  expect(bytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
  expect(bytes.subarray(8, 12).toString('latin1')).toBe('WAVE');
  expect(bytes.subarray(36, 40).toString('latin1')).toBe('data');
  return {
    channels: bytes.readUInt16LE(22),
    rate: bytes.readUInt32LE(24),
    bits: bytes.readUInt16LE(34),
    dataBytes: bytes.readUInt32LE(40),
    data: bytes.subarray(44),
  };
}

const sttQuery = (g: GatewayHarness, over: Record<string, string> = {}) => ({
  model: 'cartesia-ink',
  api_key: g.key,
  sample_rate: '16000',
  encoding: 'pcm_s16le',
  turn_detection: 'responsive',
  ...over,
});
const FRAMES = { frameBytes: 3200, intervalMs: 0 }; // 100 ms of 16 kHz s16, back to back
const millisOf = (samples: number, rate: number) => Math.round((samples * 1000) / rate);
const finals = (c: SttClient) => c.events.filter((e) => e.type === 'transcript' && e.is_final === true);
const interims = (c: SttClient) => c.events.filter((e) => e.type === 'transcript' && e.is_final === false);
/** Events without the interims, interims' finals as `final`. */
const shape = (c: SttClient) => c.events.filter((e) => e.type !== 'transcript' || e.is_final).map((e) => (e.type === 'transcript' ? 'final' : e.type));

/** session.closed is the last event with the audio and its cost; the ledger holds exactly that, once. */
/** A session whose engine never opened: the audio it sent is counted, nothing is billed. */
async function expectSessionNotBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string): Promise<void> {
  expect(c.events.at(-1), summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(0n) });
  // The session's end (its last debit, had there been one) is tracked by the lifecycle.
  expect(await g.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  expect((await ledgerOf(g, c.events[0]!.request_id as string)).ledger).toHaveLength(0);
}

async function expectSessionBilled(g: GatewayHarness, c: SttClient, millis: number, reason: string, modelId = 'cartesia-ink'): Promise<void> {
  const cost = audioCost(millis, STT_PRICE);
  expect(c.events.at(-1), summary(c.events)).toEqual({ type: 'session.closed', reason, audio_seconds: millis / 1000, cost_usd: usd(cost) });
  expect(c.events.filter((e) => e.type === 'session.closed')).toHaveLength(1);
  const billed = await expectDebited(g, c.events[0]!.request_id as string, cost);
  expect(billed.usageMicros).toBe(cost);
  expect(billed.audioMillis).toBe(millis);
  expect(billed.usage.every((u) => u.modality === 'stt' && u.route === 'stt.websocket' && u.modelId === modelId)).toBe(true);
}

/** The one error event before a server close, and the close itself. */
async function expectEngineClose(c: SttClient, code: string): Promise<SttEvent> {
  expect(await c.closed).toEqual({ code: 1011, reason: 'engine_error' });
  const errors = c.ofType('error');
  expect(errors, summary(c.events)).toHaveLength(1);
  expect(errors[0]).toMatchObject({ code });
  expect(c.events.indexOf(errors[0]!)).toBe(c.events.length - 2);
  return errors[0]!;
}

/** The order of a two-upstream model as the registry holds it, and the Math.random that makes the dead one first. */
function deadFirst(g: GatewayHarness, modelId: string) {
  const model = g.runtime.ctx.registry.all().find((m) => m.id === modelId)!;
  expect(model.upstreams).toHaveLength(2);
  const dead = model.upstreams.find((u) => u.url === DEAD)!;
  const live = model.upstreams.find((u) => u.url === peer.url)!;
  expect(dead.weight).toBe(1);
  expect(live.weight).toBe(1);
  // upstreamOrder: r = random x 2; the first upstream whose running weight passes r is first.
  const random = model.upstreams.indexOf(dead) === 0 ? 0 : 0.999;
  return { dead, live, random };
}

// ---------------------------------------------------------------------------------------

describe('voice catalogue and voices', () => {
  it('imports the engine catalogue (GET /voices paged with the key): GET /voices lists each voice with a ready profile for the model; a re-import updates', async () => {
    expect(imported).toEqual({ created: 3, updated: 0 });
    const listing = peer.received.filter((r) => r.path === '/voices');
    expect(listing.length).toBeGreaterThanOrEqual(1);
    expect(listing[0]!.method).toBe('GET');
    expect(listing[0]!.query.get('limit')).toBe('100');
    expect(listing[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(listing[0]!.headers['cartesia-version']).toBe('2026-03-01');

    const list = await call(h, 'GET', '/voices?tag=cartesia-sonic&limit=100');
    expect(list.status).toBe(200);
    const got = (
      list.body.voices as {
        id: string;
        name: string;
        description: string;
        language: string;
        gender: string;
        kind: string;
        is_owner: boolean;
        profiles: { model_id: string; upstream_id: string; status: string }[];
      }[]
    )
      .map((v) => ({
        name: v.name,
        description: v.description,
        language: v.language,
        gender: v.gender,
        kind: v.kind,
        is_owner: v.is_owner,
        profile: v.profiles.find((p) => p.model_id === 'cartesia-sonic'),
        id: v.id,
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
    expect(got).toEqual([
      {
        name: 'Katie',
        description: 'Friendly support agent',
        language: 'en',
        gender: 'female',
        kind: 'library',
        is_owner: false,
        profile: expect.objectContaining({ upstream_id: 'cv-katie', status: 'ready' }),
        id: voices['cv-katie'],
      },
      {
        name: 'Ronald',
        description: 'Deep narrator',
        language: 'en',
        gender: 'male',
        kind: 'library',
        is_owner: false,
        profile: expect.objectContaining({ upstream_id: 'cv-ronald', status: 'ready' }),
        id: voices['cv-ronald'],
      },
      {
        name: 'Sol',
        description: 'Calm and even',
        language: 'es',
        gender: 'neutral',
        kind: 'library',
        is_owner: false,
        profile: expect.objectContaining({ upstream_id: 'cv-sol', status: 'ready' }),
        id: voices['cv-sol'],
      },
    ]);

    // The engine renames a voice: importing again updates it, adds nothing.
    peer.voices.find((v) => v.id === 'cv-ronald')!.name = 'Ronald Deep';
    const prisma = h.testDb.db.prisma;
    expect(
      await importEngineVoices(prisma, { modelId: 'cartesia-sonic', voices: await listEngineVoices(prisma, h.runtime.ctx.config.engines, 'cartesia-sonic') }),
    ).toEqual({ created: 0, updated: 3 });
    const again = await call(h, 'GET', `/voices/${voices['cv-ronald']}`);
    expect(again.body.name).toBe('Ronald Deep');
    expect((await call(h, 'GET', '/voices?tag=cartesia-sonic&limit=100')).body.voices).toHaveLength(3);
  });

  it("GET /voices/engine-catalogue: the engine's voices for any key, one of an org without credit too (not metered); an STT model, a model whose engine lists none, an unknown one and no key are refused", async () => {
    const unfunded = await createOrg(h.testDb.db, { name: 'no credit', creditsMicros: 0n });
    const key = await createApiKey(h.testDb.db.prisma, { orgId: unfunded.id, name: 'catalogue reader' });
    const asUnfunded = { authorization: `Bearer ${key.key}` };
    const from = peer.received.length;
    const listed = await call(h, 'GET', '/voices/engine-catalogue?model=cartesia-sonic', undefined, asUnfunded);
    expect(listed.status).toBe(200);
    expect(listed.body.model).toBe('cartesia-sonic');
    expect(listed.body.voices.map((v: { id: string; name: string }) => [v.id, v.name])).toEqual(peer.voices.map((v) => [v.id, v.name]));
    expect(listed.body.voices[0]).toEqual({ id: 'cv-katie', name: 'Katie', language: 'en', gender: 'female', description: 'Friendly support agent' });
    expect(peer.received.slice(from).filter((r) => r.path === '/voices')[0]?.headers.authorization).toBe(`Bearer ${KEY}`);

    await upsertModel(h.testDb.db.prisma, checkProtocol, { id: 'catalogue-less-tts', modality: 'tts', upstream: { url: 'local:flite', protocol: 'flite' } });
    const refused = [
      await call(h, 'GET', '/voices/engine-catalogue?model=cartesia-ink'),
      await call(h, 'GET', '/voices/engine-catalogue?model=catalogue-less-tts'),
      await call(h, 'GET', '/voices/engine-catalogue?model=no-such-model'),
      await call(h, 'GET', '/voices/engine-catalogue'),
      await call(h, 'GET', '/voices/engine-catalogue?model=cartesia-sonic', undefined, { authorization: 'Bearer sk_svc_not_a_key' }),
    ];
    expect(refused.map((r) => [r.status, r.body.error.code, r.body.error.param])).toEqual([
      [400, 'invalid_request', 'model'],
      [400, 'invalid_request', 'model'],
      [404, 'model_not_found', null],
      [400, 'invalid_request', 'model'],
      [401, 'invalid_api_key', null],
    ]);
    expect(refused[1]!.body.error.message).toContain('svc voices map');
  });

  it('synthesis with each imported voice, and with a voice mapped by hand, reaches the engine with that engine voice id', async () => {
    const cases = [...CATALOGUE.map((v) => [voices[v.id]!, v.id] as const), [mappedVoice, 'cv-mapped-engine-voice'] as const];
    for (const [voiceId, engineId] of cases) {
      const from = peer.received.length;
      const res = await post(h, '/tts/bytes', ttsBody({ transcript: 'Hi.', voice: { mode: 'id', id: voiceId } }));
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(peerTone(ENGINE_RATE, engineSamples('Hi.')))).toBe(true);
      expect(speechRequests(peer, from).map((r) => r.voice)).toEqual([{ mode: 'id', id: engineId }]);
    }
  });

  it('POST /voices/clone with the cartesia model: the clip reaches the engine, the profile keeps its voice id, synthesis sends that id', async () => {
    const parts: [kind: 'tone' | 'silence', seconds: number][] = [];
    for (let i = 0; i < 11; i++) parts.push(['tone', 0.6], ['silence', 0.4]); // 11 s: a clone needs 10
    const clip = wavFile([bursts(16000, parts)], 16000);
    const from = peer.received.length;
    const r = await cloneMultipart(h, clip, { name: 'Cloned on Cartesia', model_id: 'cartesia-sonic', language: 'en-US' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const created = peer.voices.at(-1)!;
    expect(created).toMatchObject({ name: 'Cloned on Cartesia', language: 'en' });
    const cloneRequests = peer.received.slice(from).filter((q) => q.path === '/voices/clone');
    expect(cloneRequests).toHaveLength(1);
    const form = cloneRequests[0]!.form!;
    const file = form.get('clip') as File;
    expect([file.name, file.type]).toEqual(['clip.wav', 'audio/wav']);
    expect(Buffer.from(await file.arrayBuffer()).equals(clip)).toBe(true);
    expect([form.get('name'), form.get('language'), form.get('mode')]).toEqual(['Cloned on Cartesia', 'en', null]);
    expect(cloneRequests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);

    expect(r.body).toMatchObject({ name: 'Cloned on Cartesia', kind: 'instant_clone', is_owner: true });
    expect(r.body.profiles).toEqual([expect.objectContaining({ model_id: 'cartesia-sonic', upstream_id: created.id, status: 'ready', expires_at: null })]);
    expect(r.body.source_metadata).toMatchObject({ engine: 'cartesia', upstream_voice_id: created.id });
    // Nothing is spoken on the clone's request: its preview is the preview worker's (off in this test).
    expect(speechRequests(peer, from)).toEqual([]);
    expect(r.body.sample_blob_id).toBeNull();

    const id = requestId('clone-tts');
    const before = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody({ voice: { mode: 'id', id: r.body.id } }), { requestId: id });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(peerTone(ENGINE_RATE, engineSamples(FOX)))).toBe(true);
    expect(speechRequests(peer, before)).toEqual([expect.objectContaining({ model_id: 'sonic-3', transcript: FOX, voice: { mode: 'id', id: created.id } })]);
    await expectTtsBilled(h, id, FOX, 'tts.bytes');
  });
});

// ---------------------------------------------------------------------------------------

describe('speech: happy paths and exact metering', () => {
  it('/tts/bytes raw at the engine rate: the engine\u2019s PCM byte for byte, asked for as the reference says; billed per character', async () => {
    const id = requestId('raw');
    const from = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody({ language: 'en-US' }), { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.length).toBe(engineSamples(FOX) * 2);
    expect(bytes.equals(peerTone(ENGINE_RATE, engineSamples(FOX)))).toBe(true);

    const received = peer.received.slice(from);
    expect(received).toHaveLength(1);
    expect(received[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(received[0]!.headers['cartesia-version']).toBe('2026-03-01');
    expect(JSON.parse(received[0]!.body.toString())).toEqual({
      model_id: 'sonic-3',
      transcript: FOX,
      voice: { mode: 'id', id: 'cv-katie' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: ENGINE_RATE },
      language: 'en',
    });
    const cost = await expectTtsBilled(h, id, FOX, 'tts.bytes');
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
  });

  it('/tts/bytes wav at 16 kHz (converted from the engine\u2019s 24 kHz), with speed 1.25 sent as generation_config', async () => {
    const id = requestId('wav');
    const from = peer.received.length;
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({ output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' }, generation_config: { speed: 1.25 } }),
      { requestId: id },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const wav = readWav(Buffer.from(await res.arrayBuffer()));
    const expected = Math.round((engineSamples(FOX, 1.25) * 16000) / ENGINE_RATE);
    expect({ rate: wav.rate, channels: wav.channels, bits: wav.bits, dataBytes: wav.dataBytes, length: wav.data.length }).toEqual({
      rate: 16000,
      channels: 1,
      bits: 16,
      dataBytes: expected * 2,
      length: expected * 2,
    });
    const samples = decodeRaw(wav.data, 'pcm_s16le');
    expect(zeroCrossingFrequency(samples.subarray(200, -200), 16000)).toBeCloseTo(TONE_HZ, 0);
    expect(speechRequests(peer, from)).toEqual([
      expect.objectContaining({ generation_config: { speed: 1.25 }, output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: ENGINE_RATE } }),
    ]);
    await expectTtsBilled(h, id, FOX, 'tts.bytes');
  });

  it('/tts/sse: chunk events then done; the audio (8 kHz mu-law) is the same as /tts/bytes makes; billed once', async () => {
    const output_format = { container: 'raw', sample_rate: 8000, encoding: 'pcm_mulaw' };
    const id = requestId('sse');
    const res = await post(h, '/tts/sse', ttsBody({ output_format }), { requestId: id });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toEqual({ type: 'done', done: true, status_code: 200 });
    const chunks = events.slice(0, -1);
    expect(chunks.length).toBeGreaterThanOrEqual(1);
    expect(chunks.every((e) => e.type === 'chunk' && e.done === false && e.status_code === 206)).toBe(true);
    const audio = Buffer.concat(chunks.map((e) => Buffer.from(e.data as string, 'base64')));
    expect(audio.length).toBe(Math.round((engineSamples(FOX) * 8000) / ENGINE_RATE));
    const batch = await post(h, '/tts/bytes', ttsBody({ output_format }));
    expect(audio.equals(Buffer.from(await batch.arrayBuffer()))).toBe(true);
    expect(zeroCrossingFrequency(decodeRaw(audio, 'pcm_mulaw').subarray(100, -100), 8000)).toBeCloseTo(TONE_HZ, -1);
    await expectTtsBilled(h, id, FOX, 'tts.sse');
  });

  it('/v1/audio/speech: pcm is the engine\u2019s 24 kHz audio; speed reaches the engine; the sse stream ends with usage', async () => {
    const id = requestId('speech');
    const from = peer.received.length;
    const res = await post(
      h,
      '/v1/audio/speech',
      { model: 'cartesia-sonic', input: FOX, voice: voices['cv-ronald'], response_format: 'pcm', speed: 1.25 },
      { requestId: id },
    );
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.equals(peerTone(ENGINE_RATE, engineSamples(FOX, 1.25)))).toBe(true);
    expect(speechRequests(peer, from)).toEqual([
      expect.objectContaining({ transcript: FOX, voice: { mode: 'id', id: 'cv-ronald' }, generation_config: { speed: 1.25 } }),
    ]);
    await expectTtsBilled(h, id, FOX, 'audio.speech');

    const sseId = requestId('speech-sse');
    const sse = await post(
      h,
      '/v1/audio/speech',
      { model: 'cartesia-sonic', input: 'Hello there', voice: voices['cv-sol'], response_format: 'pcm', stream_format: 'sse' },
      { requestId: sseId },
    );
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toEqual({ type: 'speech.audio.done', usage: { input_tokens: 11, output_tokens: 0, total_tokens: 11 } });
    expect(events.slice(0, -1).every((e) => e.type === 'speech.audio.delta')).toBe(true);
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.audio as string, 'base64')));
    expect(audio.equals(peerTone(ENGINE_RATE, engineSamples('Hello there')))).toBe(true);
    await expectTtsBilled(h, sseId, 'Hello there', 'audio.speech');
  });

  it('a pronunciation dictionary is applied before the text leaves: aliases as text, phonemes as Cartesia\u2019s inline IPA; billed on the submitted text', async () => {
    const dict = await call(h, 'POST', '/pronunciation-dicts', {
      name: 'cartesia terms',
      entries: [
        { grapheme: 'SQL', alias: 'sequel' },
        { grapheme: 'GIF', phoneme: "dZ'If", case_sensitive: true },
      ],
    });
    expect(dict.status, JSON.stringify(dict.body)).toBe(201);
    const transcript = 'Is sql a GIF or a gif?';
    for (const path of ['/tts/bytes', '/tts/sse'] as const) {
      const id = requestId('dict');
      const from = peer.received.length;
      const res = await post(h, path, ttsBody({ transcript, pronunciation_dict_id: dict.body.id }), { requestId: id });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      // eSpeak dZ'If: d Z -> dʒ, ' -> ˈ, I -> ɪ, f; one <<...>> per word, phones between bars.
      expect(speechRequests(peer, from).map((r) => r.transcript)).toEqual(['Is sequel a <<dʒ|ˈ|ɪ|f>> or a gif?']);
      await expectTtsBilled(h, id, transcript, path === '/tts/bytes' ? 'tts.bytes' : 'tts.sse');
    }
  });
});

// ---------------------------------------------------------------------------------------

describe('speech: engine failures', () => {
  const routes = [
    ['/tts/bytes', () => ttsBody()],
    ['/tts/sse', () => ttsBody()],
    ['/v1/audio/speech', () => ({ model: 'cartesia-sonic', input: FOX, voice: voices['cv-katie'], response_format: 'pcm' })],
  ] as const;

  it('the engine refusing our key: 502 upstream_error with the engine\u2019s message; neither key appears; nothing billed', async () => {
    for (const [path, body] of routes) {
      const b = body() as Record<string, unknown>;
      const badBody = 'model_id' in b ? { ...b, model_id: 'cartesia-sonic-badkey' } : { ...b, model: 'cartesia-sonic-badkey' };
      const id = requestId('badkey');
      const from = peer.received.length;
      const res = await post(h, path, badBody, { requestId: id });
      const text = await res.clone().text();
      const err = await expectError(res, { status: 502, code: 'upstream_error', param: null, type: 'api_error' });
      expect(err.message).toContain('401');
      expect(err.message).toContain('Invalid API key.');
      expect(text).not.toContain(BAD_KEY);
      expect(text).not.toContain(KEY);
      expect(peer.received.slice(from).map((r) => r.headers.authorization)).toEqual([`Bearer ${BAD_KEY}`]);
      await expectNotBilled(h, id);
    }
    // An engine that echoes the key in its refusal: the message is kept, the key cut out.
    peer.behaviour = { kind: 'error', status: 401, message: `The API key ${KEY} was revoked.` };
    for (const [path, body] of routes) {
      const res = await post(h, path, body());
      const text = await res.clone().text();
      const err = await expectError(res, { status: 502, code: 'upstream_error', param: null });
      expect(err.message).toContain('was revoked');
      expect(text).not.toContain(KEY);
    }
  });

  it('engine 400/422 -> 400 invalid_request with the engine\u2019s message; 500/503 -> 502 upstream_error; nothing billed', async () => {
    for (const [path, body] of routes) {
      for (const [status, message, expected] of [
        [400, 'transcript must not be empty.', { status: 400, code: 'invalid_request' }],
        [422, 'Voice not found.', { status: 400, code: 'invalid_request' }],
        [500, 'Internal server error.', { status: 502, code: 'upstream_error' }],
        [503, 'Overloaded, retry later.', { status: 502, code: 'upstream_error' }],
      ] as const) {
        peer.behaviour = { kind: 'error', status, message };
        const id = requestId('engine-status');
        const res = await post(h, path, body(), { requestId: id });
        const err = await expectError(res, { ...expected, param: null });
        if (expected.status === 400) expect(err.message, `${path} ${status}`).toBe(message);
        else expect(err.message, `${path} ${status}`).toBe(`The model upstream returned ${status}: ${message}`);
        await expectNotBilled(h, id);
      }
    }
  });

  it('the engine dying mid-stream: /tts/sse ends with an error event after the audio delivered, billed once at its first audio', async () => {
    peer.behaviour = { kind: 'die' };
    const id = requestId('die-sse');
    const res = await post(h, '/tts/sse', ttsBody(), { requestId: id });
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 502, error_code: 'upstream_error', request_id: id });
    expect(events.filter((e) => e.type === 'done')).toHaveLength(0);
    expect(events.slice(0, -1).every((e) => e.type === 'chunk')).toBe(true);
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.data as string, 'base64')));
    // The peer sent one chunk of 4095 bytes: 2047 whole samples, the odd byte is not a sample.
    expect(audio.equals(peerTone(ENGINE_RATE, 2047))).toBe(true);
    const cost = await expectTtsBilled(h, id, FOX, 'tts.sse');
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
  });

  it('the engine dying mid-stream: streamed /tts/bytes and /v1/audio/speech are cut; whole-file /tts/bytes is a 502 and costs nothing', async () => {
    peer.behaviour = { kind: 'die' };
    const streamed = await post(h, '/tts/bytes', ttsBody({ stream: true }));
    expect(streamed.status).toBe(200);
    await expect(streamed.arrayBuffer()).rejects.toThrow();
    const speech = await post(h, '/v1/audio/speech', { model: 'cartesia-sonic', input: FOX, voice: voices['cv-katie'], response_format: 'pcm' });
    expect(speech.status).toBe(200);
    await expect(speech.arrayBuffer()).rejects.toThrow();

    const id = requestId('die-batch');
    const whole = await post(h, '/tts/bytes', ttsBody(), { requestId: id });
    await expectError(whole, { status: 502, code: 'upstream_error', param: null });
    await expectNotBilled(h, id);
  });

  it('the client leaving mid-stream: the engine\u2019s connection is closed', async () => {
    peer.behaviour = { kind: 'stall' };
    const controller = new AbortController();
    const from = peer.received.length;
    const res = await post(h, '/tts/sse', ttsBody(), { signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = sseReader(res);
    const first = JSON.parse((await reader.next())!) as { type: string };
    expect(first.type).toBe('chunk');
    const engine = await peer.request(from + 1);
    expect(engine.path).toBe('/tts/bytes');
    controller.abort();
    await engine.closed;
  });

  it('an engine that streams without end for a short text: cut off at the text\u2019s bound (30 s of audio) with 502 upstream_error on /tts/websocket and /tts/sse, the engine\u2019s connection closed', async () => {
    peer.behaviour = { kind: 'endless' };
    // 'Hi.' is three characters: the floor of the bound applies.
    const boundSamples = MIN_AUDIO_SECONDS * ENGINE_RATE;
    const output_format = { container: 'raw', encoding: 'pcm_s16le', sample_rate: ENGINE_RATE };
    const id = requestId('endless-ws');
    const from = peer.received.length;
    const s = await openTtsSocket(h, { headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id } });
    s.send({ context_id: 'e', model_id: 'cartesia-sonic', voice: { mode: 'id', id: voices['cv-katie'] }, output_format, transcript: 'Hi.', continue: false });
    const end = await s.end('e');
    expect(end).toMatchObject({ type: 'error', status_code: 502, code: 'upstream_error', context_id: 'e' });
    expect(end.message).toMatch(/more than 30 s of audio for (this text|\d+ characters)/);
    const samples = s.audio('e').length / 2;
    expect(samples).toBeGreaterThan(ENGINE_RATE);
    expect(samples).toBeLessThanOrEqual(boundSamples);
    await (
      await peer.request(from + 1)
    ).closed;
    // Billed as every stream is: its audio started.
    await expectTtsBilled(h, id, 'Hi.', 'tts.websocket');
    s.ws.close();
    await s.closed;

    const sse = await post(h, '/tts/sse', ttsBody({ transcript: 'Hi.' }));
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', status_code: 502, error_code: 'upstream_error' });
    const sseAudio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.data as string, 'base64')));
    expect(sseAudio.length / 2).toBeLessThanOrEqual(boundSamples);
  });

  it('failover at open: the unreachable upstream is tried first, marked down, and the peer answers', async () => {
    const { dead, live, random } = deadFirst(h, 'cartesia-sonic-failover');
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('unknown');
    vi.spyOn(Math, 'random').mockReturnValue(random);
    const id = requestId('failover');
    const from = peer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: 'cartesia-sonic-failover' }), { requestId: id });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(peerTone(ENGINE_RATE, engineSamples(FOX)))).toBe(true);
    vi.restoreAllMocks();
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(live.id)).not.toBe('down');
    expect(speechRequests(peer, from)).toHaveLength(1);
    await expectTtsBilled(h, id, FOX, 'tts.bytes', 'cartesia-sonic-failover');
  });
});

// ---------------------------------------------------------------------------------------

describe('batch transcription (POST /v1/audio/transcriptions)', () => {
  // 1.3 s at 24 kHz: two bursts, so two words.
  const audio = bursts(24000, [
    ['silence', 0.2],
    ['tone', 0.3],
    ['silence', 0.3],
    ['tone', 0.3],
    ['silence', 0.2],
  ]);
  const wav = wavFile([audio], 24000);

  it('the words with their times, from a WAV sent as the reference says; billed per millisecond of audio', async () => {
    const id = requestId('batch');
    const from = peer.received.length;
    const res = await transcribe(h, wav, { model: 'cartesia-ink', language: 'en-GB' }, { requestId: id });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      text: 'alpha bravo',
      words: [
        { word: 'alpha', start: 0.2, end: 0.5 },
        { word: 'bravo', start: 0.8, end: 1.1 },
      ],
      duration_seconds: 1.3,
    });
    const received = peer.received.slice(from);
    expect(received.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /stt']);
    expect(received[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    const form = received[0]!.form!;
    expect([form.get('model'), form.get('language'), form.getAll('timestamp_granularities[]')]).toEqual(['ink-whisper', 'en', ['word']]);
    const sent = readWav(Buffer.from(await (form.get('file') as File).arrayBuffer()));
    expect([sent.rate, sent.channels, sent.bits, sent.dataBytes]).toEqual([24000, 1, 16, audio.length * 2]);

    const cost = audioCost(1300, STT_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toHaveLength(1);
    expect(billed.usage[0]).toMatchObject({ modelId: 'cartesia-ink', modality: 'stt', route: 'audio.transcriptions', audioMillis: 1300, costMicros: cost });
  });

  it('key refused -> 502 with the engine\u2019s message and no key; 400/422 -> 400 invalid_request; 5xx and a cut answer -> 502; nothing billed', async () => {
    const badId = requestId('batch-badkey');
    const bad = await transcribe(h, wav, { model: 'cartesia-ink-badkey' }, { requestId: badId });
    const badText = await bad.clone().text();
    expect((await expectError(bad, { status: 502, code: 'upstream_error', param: null })).message).toBe('The model upstream returned 401: Invalid API key.');
    expect(badText).not.toContain(BAD_KEY);
    await expectNotBilled(h, badId);

    peer.behaviour = { kind: 'error', status: 401, message: `Key ${KEY} revoked.` };
    const echoed = await transcribe(h, wav, { model: 'cartesia-ink' });
    const echoedText = await echoed.clone().text();
    await expectError(echoed, { status: 502, code: 'upstream_error', param: null });
    expect(echoedText).not.toContain(KEY);

    for (const [status, message, code, httpStatus] of [
      [400, 'Unsupported audio.', 'invalid_request', 400],
      [422, 'Language not supported.', 'invalid_request', 400],
      [500, 'Internal error.', 'upstream_error', 502],
    ] as const) {
      peer.behaviour = { kind: 'error', status, message };
      const id = requestId('batch-status');
      const err = await expectError(await transcribe(h, wav, { model: 'cartesia-ink' }, { requestId: id }), { status: httpStatus, code, param: null });
      expect(err.message).toContain(message);
      await expectNotBilled(h, id);
    }

    peer.behaviour = { kind: 'die' };
    const id = requestId('batch-die');
    await expectError(await transcribe(h, wav, { model: 'cartesia-ink' }, { requestId: id }), { status: 502, code: 'upstream_error', param: null });
    await expectNotBilled(h, id);
  });

  it('the client leaving while the engine works: the engine\u2019s connection is closed; nothing billed', async () => {
    peer.behaviour = { kind: 'hang' };
    const from = peer.received.length;
    const controller = new AbortController();
    const form = new FormData();
    form.append('model', 'cartesia-ink');
    form.append('file', new Blob([new Uint8Array(wav)]), 'audio.wav');
    const id = requestId('batch-gone');
    const pending = fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id },
      body: form,
      signal: controller.signal,
    });
    const engine = await peer.request(from + 1);
    expect(engine.path).toBe('/stt');
    controller.abort();
    await expect(pending).rejects.toThrow();
    await engine.closed;
    await expectNotBilled(h, id);
  });
});

// ---------------------------------------------------------------------------------------

describe('streaming transcription (GET /stt/websocket)', () => {
  it('turns found by the gateway (responsive): turn.start, interims, turn.end, then the final with word times and turn.finalized; finalize -> final then flush_done; close bills the audio exactly once', async () => {
    // Two words 100 ms apart (one responsive turn), the silence that ends it; a third word, then
    // a finalize before its turn could end (2.3 s, then 0.5 s).
    const first = bursts(16000, [
      ['silence', 0.2],
      ['voice', 0.3],
      ['silence', 0.1],
      ['voice', 0.5],
      ['silence', 1.2],
    ]);
    const second = bursts(16000, [
      ['voice', 0.4],
      ['silence', 0.1],
    ]);
    const n = peer.sttSockets.length + 1;
    const c = await openSession(h, sttQuery(h, { language: 'en-US', keyterms: 'Cartesia,Ink' }));
    await c.until((e) => e.type === 'session.started');
    let sent = await c.stream(s16le(first), FRAMES);
    await c.until((e) => e.type === 'turn.finalized');
    sent += await c.stream(s16le(second), FRAMES);
    c.command({ type: 'finalize' });
    await c.until((e) => e.type === 'flush_done');
    c.command({ type: 'close' });
    expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });

    // turn.end at the detector's decision; the final as the engine answers the turn's finalize, then turn.finalized.
    expect(shape(c), summary(c.events)).toEqual([
      'session.started',
      'turn.start',
      'turn.end',
      'final',
      'turn.finalized',
      'turn.start',
      'final',
      'flush_done',
      'session.closed',
    ]);
    expect(c.ofType('turn.finalized')).toEqual([{ type: 'turn.finalized', at: c.ofType('turn.end')[0]!.at, transcript: 'alpha bravo' }]);
    expect(c.events[0]).toMatchObject({ model: 'cartesia-ink', sample_rate: 16000, encoding: 'pcm_s16le', turn_detection: 'responsive' });
    // Where the words start and end, within about a VAD frame (32 ms).
    expect(c.ofType('turn.start').map((e) => e.at)).toEqual([expect.closeTo(0.2, 1), expect.closeTo(2.3, 1)]);
    expect(c.ofType('turn.end').map((e) => e.at)).toEqual([expect.closeTo(1.1, 1)]);
    // Interims: sent when the hypothesis changes; Cartesia's leading space of a later utterance is gone.
    expect(interims(c).map((e) => e.text)).toEqual(['alpha', 'alpha bravo', 'charlie']);
    // The first may come before turn.start: the peer answers a word's first voiced frame, the
    // detector needs three of its 32 ms frames (and runs beside the engine). Each precedes its final.
    const [firstFinal, secondFinal] = finals(c);
    expect(
      interims(c).map((e) => c.events.indexOf(e) < c.events.indexOf(e.text === 'charlie' ? secondFinal! : firstFinal!)),
      summary(c.events),
    ).toEqual([true, true, true]);
    expect(finals(c)).toEqual([
      {
        type: 'transcript',
        is_final: true,
        text: 'alpha bravo',
        words: [
          { word: 'alpha', start: 0.2, end: 0.5 },
          { word: 'bravo', start: 0.6, end: 1.1 },
        ],
      },
      { type: 'transcript', is_final: true, text: 'charlie', words: [{ word: 'charlie', start: 2.3, end: 2.7 }] },
    ]);
    expect(c.ofType('error')).toHaveLength(0);

    const millis = millisOf(first.length + second.length, 16000);
    expect(millis).toBe(2800);
    expect(sent).toBe((first.length + second.length) * 2);
    await expectSessionBilled(h, c, millis, 'client_close');

    // The engine got the session as asked, every byte once, and a finalize per utterance end.
    const socket = await peer.sttSocket(n);
    expect(await socket.closed).toMatchObject({ code: 1000 });
    expect(Object.fromEntries(socket.query)).toMatchObject({ model: 'ink-whisper', encoding: 'pcm_s16le', sample_rate: '16000', language: 'en' });
    expect(socket.query.getAll('keyterm')).toEqual(['Cartesia', 'Ink']);
    expect(socket.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(socket.headers['cartesia-version']).toBe('2026-03-01');
    expect(socket.audioBytes).toBe(sent);
    // The turn's end, the client's finalize, the close's finalize; then `close`, the clean end
    // the stream's close() sends (stt-stream.ts) -- unless the call's signal tore the stream down first.
    expect(socket.commands).toEqual(['finalize', 'finalize', 'finalize', 'close']);
  });

  it('pcm_f32le at 48 kHz: the engine gets 16-bit PCM at 48 kHz; the turn ends and the audio is billed exactly', async () => {
    const audio = bursts(48000, [
      ['silence', 0.2],
      ['voice', 0.3],
      ['silence', 0.5],
    ]); // 1.0 s
    const n = peer.sttSockets.length + 1;
    const c = await openSession(h, sttQuery(h, { sample_rate: '48000', encoding: 'pcm_f32le' }));
    await c.stream(f32le(audio), { frameBytes: 4801, intervalMs: 0 }); // odd frames: samples split across them
    await c.until((e) => e.type === 'turn.end');
    c.command({ type: 'close' });
    expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });
    expect(shape(c), summary(c.events)).toEqual(['session.started', 'turn.start', 'turn.end', 'final', 'turn.finalized', 'session.closed']);
    expect(finals(c)[0]).toMatchObject({ text: 'alpha', words: [{ word: 'alpha', start: 0.2, end: 0.5 }] });
    expect(c.ofType('turn.end')[0]!.at).toEqual(expect.closeTo(0.5, 1));
    await expectSessionBilled(h, c, 1000, 'client_close');
    const socket = await peer.sttSocket(n);
    await socket.closed;
    expect(socket.query.get('sample_rate')).toBe('48000');
    expect(socket.audioBytes).toBe(audio.length * 2);
  });

  it('the engine refusing our key: an upstream_error event with its message and no key, close 1011; nothing billed (no engine took the audio)', async () => {
    const audio = bursts(16000, [
      ['tone', 0.3],
      ['silence', 0.2],
    ]);
    const c = await openSession(h, sttQuery(h, { model: 'cartesia-ink-badkey' }));
    await c.until((e) => e.type === 'session.started');
    c.ws.send(s16le(audio));
    const error = await expectEngineClose(c, 'upstream_error');
    expect(error.message).toContain('401');
    expect(error.message).toContain('Invalid API key.');
    expect(JSON.stringify(c.events)).not.toContain(BAD_KEY);
    expect(JSON.stringify(c.events)).not.toContain(KEY);
    await expectSessionNotBilled(h, c, 500, 'engine_error');

    peer.behaviour = { kind: 'error', status: 401, message: `API key ${KEY} was revoked.` };
    const echoed = await openSession(h, sttQuery(h));
    await echoed.until((e) => e.type === 'session.started');
    echoed.ws.send(s16le(audio));
    expect((await expectEngineClose(echoed, 'upstream_error')).message).toContain('was revoked');
    expect(JSON.stringify(echoed.events)).not.toContain(KEY);
  });

  it('engine 400/422 at the upgrade or as an error event -> invalid_request with its message; 5xx -> upstream_error; close 1011', async () => {
    const audio = s16le(bursts(16000, [['tone', 0.2]]));
    for (const [behaviour, code] of [
      [{ kind: 'error', status: 400, message: 'Unsupported language.' }, 'invalid_request'],
      [{ kind: 'error', status: 422, message: 'Unknown model.' }, 'invalid_request'],
      [{ kind: 'error', status: 503, message: 'Overloaded.' }, 'upstream_error'],
      [{ kind: 'stream_error', status: 400, message: 'The audio is not valid.' }, 'invalid_request'],
      [{ kind: 'stream_error', status: 500, message: 'Transcription crashed.' }, 'upstream_error'],
    ] as const) {
      peer.behaviour = behaviour;
      const c = await openSession(h, sttQuery(h));
      await c.until((e) => e.type === 'session.started');
      c.ws.send(audio);
      const error = await expectEngineClose(c, code);
      expect(error.message, JSON.stringify(behaviour)).toContain(behaviour.message);
      // Refused at the upgrade: no engine took the audio. Failed after opening: the audio it took is billed.
      if (behaviour.kind === 'error') await expectSessionNotBilled(h, c, 200, 'engine_error');
      else await expectSessionBilled(h, c, 200, 'engine_error');
    }
  });

  it('the engine dying mid-stream: an upstream_error event and close 1011; billed for exactly the audio received', async () => {
    peer.behaviour = { kind: 'die' };
    const audio = bursts(16000, [
      ['silence', 0.2],
      ['tone', 0.3],
      ['silence', 0.5],
    ]); // 1.0 s, one frame
    const n = peer.sttSockets.length + 1;
    const c = await openSession(h, sttQuery(h));
    await c.until((e) => e.type === 'session.started');
    c.ws.send(s16le(audio));
    await expectEngineClose(c, 'upstream_error');
    expect(finals(c)).toHaveLength(0);
    await expectSessionBilled(h, c, 1000, 'engine_error');
    await (
      await peer.sttSocket(n)
    ).closed;
  });

  it('the client leaving mid-stream: the engine\u2019s socket is closed; what the client sent is billed', async () => {
    const audio = bursts(16000, [
      ['silence', 0.2],
      ['tone', 0.3],
      ['silence', 0.3],
      ['tone', 0.3],
      ['silence', 0.1],
    ]); // 1.2 s
    const n = peer.sttSockets.length + 1;
    const c = await openSession(h, sttQuery(h));
    await c.stream(s16le(audio), FRAMES);
    // All of it reached the engine (the gateway writes it on while its detector runs), which answered.
    const socket = await peer.sttSocket(n);
    await socket.audioReached(audio.length * 2);
    await c.until((e) => e.type === 'transcript');
    c.ws.terminate();
    await c.closed;
    expect(await socket.closed).toMatchObject({ code: 1000 });
    expect(socket.audioBytes).toBe(audio.length * 2);
    const billed = await expectDebited(h, c.events[0]!.request_id as string, audioCost(1200, STT_PRICE));
    expect(billed.audioMillis).toBe(1200);
  });

  it('failover at open: the unreachable upstream is tried first and marked down, the session runs on the peer; batch fails over too', async () => {
    const { dead, live, random } = deadFirst(h, 'cartesia-ink-failover');
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('unknown');
    vi.spyOn(Math, 'random').mockReturnValue(random);
    const audio = bursts(16000, [
      ['silence', 0.2],
      ['voice', 0.3],
      ['silence', 0.5],
    ]);
    const c = await openSession(h, sttQuery(h, { model: 'cartesia-ink-failover' }));
    await c.stream(s16le(audio), FRAMES);
    await c.until((e) => e.type === 'turn.end');
    vi.restoreAllMocks();
    c.command({ type: 'close' });
    expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });
    expect(finals(c).map((e) => e.text)).toEqual(['alpha']);
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(live.id)).not.toBe('down');
    await expectSessionBilled(h, c, 1000, 'client_close', 'cartesia-ink-failover');

    // Batch, with the dead upstream unknown again and first again.
    h.runtime.ctx.registry.setHealth(dead.id, 'unknown');
    vi.spyOn(Math, 'random').mockReturnValue(random);
    const res = await transcribe(h, wavFile([audio], 16000), { model: 'cartesia-ink-failover' });
    vi.restoreAllMocks();
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toBe('alpha');
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('down');
  });
});

// ---------------------------------------------------------------------------------------

describe('slow engine (SVC_UPSTREAM_TIMEOUT_SECONDS=0.5)', () => {
  it('speech that never answers -> 504 upstream_timeout on every route; nothing billed', async () => {
    slow.behaviour = { kind: 'hang' };
    for (const [path, body] of [
      ['/tts/bytes', { ...ttsBody(), model_id: 'slow-sonic', voice: { mode: 'id', id: slowVoice } }],
      ['/tts/sse', { ...ttsBody(), model_id: 'slow-sonic', voice: { mode: 'id', id: slowVoice } }],
      ['/v1/audio/speech', { model: 'slow-sonic', input: FOX, voice: slowVoice, response_format: 'pcm' }],
    ] as const) {
      const id = requestId('slow');
      const from = slow.received.length;
      await expectError(await post(hs, path, body, { requestId: id }), { status: 504, code: 'upstream_timeout', param: null, type: 'api_error' });
      expect(slow.received.slice(from).map((r) => r.path)).toEqual(['/tts/bytes']);
      await expectNotBilled(hs, id);
    }
  });

  it('speech that stalls after its first audio: /tts/sse ends with an upstream_timeout error event (504)', async () => {
    slow.behaviour = { kind: 'stall' };
    const res = await post(hs, '/tts/sse', { ...ttsBody(), model_id: 'slow-sonic', voice: { mode: 'id', id: slowVoice } });
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 504, error_code: 'upstream_timeout' });
    expect(events.slice(0, -1).length).toBeGreaterThanOrEqual(1);
    expect(events.slice(0, -1).every((e) => e.type === 'chunk')).toBe(true);
  });

  it('batch transcription that never answers -> 504 upstream_timeout; nothing billed', async () => {
    slow.behaviour = { kind: 'hang' };
    const id = requestId('slow-batch');
    await expectError(await transcribe(hs, wavFile([bursts(16000, [['tone', 0.3]])], 16000), { model: 'slow-ink' }, { requestId: id }), {
      status: 504,
      code: 'upstream_timeout',
      param: null,
    });
    await expectNotBilled(hs, id);
  });

  it('a socket the engine does not accept (nothing billed), or a finalize it does not answer (the audio it took billed): an upstream_timeout event, close 1011', async () => {
    const audio = bursts(16000, [
      ['tone', 0.3],
      ['silence', 0.2],
    ]);
    slow.behaviour = { kind: 'hang' };
    const never = await openSession(hs, sttQuery(hs, { model: 'slow-ink' }));
    await never.until((e) => e.type === 'session.started');
    never.ws.send(s16le(audio));
    await expectEngineClose(never, 'upstream_timeout');
    await expectSessionNotBilled(hs, never, 500, 'engine_error');

    slow.behaviour = { kind: 'mute' };
    const mute = await openSession(hs, sttQuery(hs, { model: 'slow-ink' }));
    await mute.until((e) => e.type === 'session.started');
    mute.ws.send(s16le(audio));
    mute.command({ type: 'finalize' });
    await expectEngineClose(mute, 'upstream_timeout');
    expect(mute.ofType('flush_done')).toHaveLength(0);
    await expectSessionBilled(hs, mute, 500, 'engine_error', 'slow-ink');
  });

  it('a session that lasts longer than the deadline with an engine that answers runs on: the deadline bounds the opening and each silence, not the session', async () => {
    // 1.5 s of audio sent in real time (100 ms frames, 100 ms apart): three times the 0.5 s deadline.
    const audio = bursts(16000, [
      ['silence', 0.2],
      ['voice', 0.3],
      ['silence', 1.0],
    ]);
    const n = slow.sttSockets.length + 1;
    const c = await openSession(hs, sttQuery(hs, { model: 'slow-ink' }));
    await c.stream(s16le(audio), { frameBytes: 3200, intervalMs: 100 });
    await c.until((e) => e.type === 'turn.end' || e.type === 'error');
    expect(c.ofType('error')).toEqual([]);
    c.command({ type: 'close' });
    expect(await c.closed, summary(c.events)).toEqual({ code: 1000, reason: 'client_close' });
    expect(shape(c)).toEqual(['session.started', 'turn.start', 'turn.end', 'final', 'turn.finalized', 'session.closed']);
    await expectSessionBilled(hs, c, 1500, 'client_close', 'slow-ink');
    const socket = await slow.sttSocket(n);
    await socket.closed;
    expect(socket.audioBytes).toBe(audio.length * 2);
  });
});

describe('health through the gateway', () => {
  it('an authenticated GET /voices?limit=1: up while it answers, down when the key is refused; GET /v1/models lists the models only while up', async () => {
    const registry = hs.runtime.ctx.registry;
    const ups = registry
      .all()
      .filter((m) => m.id.startsWith('slow-'))
      .flatMap((m) => m.upstreams);
    expect(ups).toHaveLength(2);
    const listed = async () =>
      ((await call(hs, 'GET', '/v1/models')).body.data as { id: string }[])
        .map((m) => m.id)
        .filter((id) => id.startsWith('slow-'))
        .sort();

    const from = slow.received.length;
    await hs.runtime.ctx.health.checkAll();
    expect(ups.map((u) => registry.healthOf(u.id))).toEqual(['up', 'up']);
    const checks = slow.received.slice(from);
    expect(checks).toHaveLength(2);
    for (const r of checks) expect([r.method, r.path, r.query.get('limit'), r.headers.authorization]).toEqual(['GET', '/voices', '1', `Bearer ${KEY}`]);
    expect(await listed()).toEqual(['slow-ink', 'slow-sonic']);

    slow.behaviour = { kind: 'error', status: 401, message: 'Invalid API key.' };
    await hs.runtime.ctx.health.checkAll();
    expect(ups.map((u) => registry.healthOf(u.id))).toEqual(['down', 'down']);
    expect(await listed()).toEqual([]);
    await expectError(await post(hs, '/tts/bytes', { ...ttsBody(), model_id: 'slow-sonic', voice: { mode: 'id', id: slowVoice } }), {
      status: 503,
      code: 'model_offline',
      param: null,
    });

    slow.behaviour = { kind: 'ok' };
    await hs.runtime.ctx.health.checkAll();
    expect(ups.map((u) => registry.healthOf(u.id))).toEqual(['up', 'up']);
    expect(await listed()).toEqual(['slow-ink', 'slow-sonic']);
    const res = await post(hs, '/tts/bytes', { ...ttsBody(), model_id: 'slow-sonic', voice: { mode: 'id', id: slowVoice } });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(peerTone(ENGINE_RATE, engineSamples(FOX)))).toBe(true);
  });
});
