// Route tests of the `elevenlabs` protocol through the real gateway (HTTP routes, real runtime,
// throw-away SQLite or PostgreSQL database) against the scripted ElevenLabs API
// (test/support/scripted-elevenlabs.ts): speech on /tts/bytes, /tts/sse and /v1/audio/speech,
// Scribe on POST /v1/audio/transcriptions, instant cloning on POST /voices/clone, the engine
// voice catalogue import, and the refusal of /stt/websocket (ElevenLabs does not stream
// transcription here). Then how each route fails: the engine refusing our key, its 4xx and 5xx,
// a stream dying or stalling, the client leaving, failover at open, and health checks.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import { isServiceError } from '../../server/services/errors.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { importEngineVoices, mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { peerTone, peerVoice, startScriptedElevenLabs, type ElevenLabsBehaviour, type ScriptedElevenLabs } from '../../test/support/scripted-elevenlabs.ts';
import { audioCost, expectDebited, ledgerOf, refusedUpgrade, transcribe, wavFile } from '../../test/support/stt-routes.ts';
import { checkTtsEvents, codePoints, costOf, expectError, FOX, post, sseData, sseReader, ttsBody, usd } from '../../test/support/tts-routes.ts';
import { call } from '../../test/support/voice-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { listEngineVoices } from '../voices/engine-catalogue.ts';

const KEY_ENV = 'ELEVENLABS_ROUTE_TEST_KEY';
const WRONG_KEY_ENV = 'ELEVENLABS_ROUTE_TEST_WRONG_KEY';
const API_KEY = 'xi_route_test_secret_7c1d2e5f';
const WRONG_KEY = 'xi_revoked_key_93ab0f61';

/** pico-USD per character and per second: both need rounding up to a micro-USD. */
const TTS_PRICE = 1_234_567n;
const STT_PRICE = 123_456_789n;
/** The rate the upstream's settings ask ElevenLabs for (`output_format=pcm_22050`). */
const ENGINE_RATE = 22050;
/** The scripted engine's audio per character (its default). */
const MS_PER_CHAR = 40;

const TTS = 'eleven-tts';
const STT = 'eleven-stt';
const TTS_BAD_KEY = 'eleven-tts-badkey';
const STT_BAD_KEY = 'eleven-stt-badkey';

const GEORGE = 'JBFqnCBsd6RMkjVDRZzb';
const SARAH = 'EXAVITQu4vr4xnSDxMaL';
const LIAM = 'TX3LPaxmHKxFdv7VOQHJ';
const MAPPED = 'pNInz6obpgDQGcFmaJgB';

const RAW_ENGINE_RATE = { container: 'raw', sample_rate: ENGINE_RATE, encoding: 'pcm_s16le' };
/** The protocol's default rate (upstreams registered without settings). */
const RAW_24K = { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' };

let peer: ScriptedElevenLabs;
let h: GatewayHarness; // the default deadline (300 s)
let hd: GatewayHarness; // SVC_UPSTREAM_TIMEOUT_SECONDS=1
/** Gateway voice ids: imported from the catalogue (george, sarah, liam), mapped (mapped), and one on hd. */
const voices = { george: '', sarah: '', liam: '', mapped: '', slow: '', badKey: '' };
/** What the catalogue import of beforeAll sent to the engine. */
let catalogueRequests: ScriptedElevenLabs['received'] = [];

let rid = 0;
const requestId = (label: string) => `eleven-${label}-${++rid}-${Date.now()}`;

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;

async function registerModels(g: GatewayHarness): Promise<void> {
  await upsertModel(prisma(g), checkProtocol, {
    id: TTS,
    modality: 'tts',
    prices: { picoPerChar: TTS_PRICE },
    upstream: {
      url: peer.url,
      protocol: 'elevenlabs',
      upstreamModel: 'eleven_flash_v2_5',
      apiKeyEnv: KEY_ENV,
      settings: { output_sample_rate: ENGINE_RATE, stability: 0.4 },
    },
  });
  await upsertModel(prisma(g), checkProtocol, {
    id: STT,
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: peer.url, protocol: 'elevenlabs', upstreamModel: 'scribe_v2', apiKeyEnv: KEY_ENV },
  });
  await g.runtime.ctx.registry.refresh();
}

/** A voice of the harness org, made to speak through `modelId` as the engine's voice `upstreamId`. */
async function mappedVoice(g: GatewayHarness, modelId: string, upstreamId: string): Promise<string> {
  const id = newId('voice');
  await prisma(g).voice.create({ data: { id, orgId: g.orgId, name: `mapped ${upstreamId}`, language: 'en-US', tags: [] } });
  await mapVoiceToEngine(prisma(g), { voiceId: id, modelId, upstreamId });
  return id;
}

async function gatewayVoiceFor(g: GatewayHarness, modelId: string, upstreamId: string): Promise<string> {
  const profile = await prisma(g).voiceProfile.findFirstOrThrow({ where: { modelId, upstreamId, voice: { orgId: null } } });
  return profile.voiceId;
}

function upstreamsOf(g: GatewayHarness, modelId: string) {
  return g.runtime.ctx.registry.all().find((m) => m.id === modelId)!.upstreams;
}

// ---------------------------------------------------------------------------------------
// Audio, written here

/** Silence and 440 Hz bursts (amplitude 0.5) at `rate`, as [seconds, voiced] pieces. */
function bursts(pieces: [number, boolean][], rate = 16000): Float32Array {
  const total = pieces.reduce((n, [s]) => n + Math.round(s * rate), 0);
  const out = new Float32Array(total);
  let at = 0;
  for (const [seconds, voiced] of pieces) {
    const n = Math.round(seconds * rate);
    if (voiced) for (let i = 0; i < n; i++) out[at + i] = 0.5 * Math.sin((2 * Math.PI * 440 * i) / rate);
    at += n;
  }
  return out;
}

/** Two words for Scribe: voiced 0.3-0.7 s and 1.0-1.5 s of 1.7 s (boundaries on 20 ms frames). */
const SPEECH = bursts([
  [0.3, false],
  [0.4, true],
  [0.3, false],
  [0.5, true],
  [0.2, false],
]);
const SPEECH_WAV = wavFile([SPEECH], 16000);
const SPEECH_MILLIS = 1700;
/** A clone clip: 10.5 s (the gateway asks for at least 10). */
const CLIP = wavFile(
  [
    bursts([
      [0.25, false],
      [10, true],
      [0.25, false],
    ]),
  ],
  16000,
);

function s16(bytes: Buffer): Int16Array {
  const out = new Int16Array(Math.floor(bytes.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = bytes.readInt16LE(i * 2);
  return out;
}

/** Upward zero crossings per second. */
function crossingFrequency(samples: Int16Array, rate: number): number {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 && samples[i]! >= 0) crossings++;
  return crossings / (samples.length / rate);
}

/** The samples the scripted engine makes for `text` at `rate` (speed 1). */
const engineSamples = (text: string, rate = ENGINE_RATE, speed = 1) => Math.round((rate * text.length * MS_PER_CHAR) / 1000 / speed);

/** A canonical 16-bit mono WAV file as the gateway writes a whole one: its rate and samples. */
function readWav(bytes: Buffer): { rate: number; samples: Int16Array } {
  expect(bytes.toString('latin1', 0, 4)).toBe('RIFF');
  expect(bytes.toString('latin1', 8, 12)).toBe('WAVE');
  expect(bytes.readUInt16LE(20)).toBe(1); // PCM
  expect(bytes.readUInt16LE(22)).toBe(1); // mono
  expect(bytes.readUInt16LE(34)).toBe(16);
  expect(bytes.toString('latin1', 36, 40)).toBe('data');
  const dataBytes = bytes.readUInt32LE(40);
  expect(dataBytes).toBe(bytes.length - 44);
  return { rate: bytes.readUInt32LE(24), samples: s16(bytes.subarray(44)) };
}

// ---------------------------------------------------------------------------------------
// Requests

interface Target {
  g: GatewayHarness;
  tts: string;
  voice: string;
  stt: string;
}

function clone(g: GatewayHarness, fields: Record<string, string>, signal?: AbortSignal): Promise<Response> {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(CLIP)], { type: 'audio/wav' }), 'clip.wav');
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  return fetch(`${g.url}/voices/clone`, { method: 'POST', headers: { authorization: `Bearer ${g.key}` }, body: form, signal });
}

/** Every route the protocol serves, one request each; all fail before any audio is relayed when the engine does. */
const OPS: { name: string; billed: boolean; run: (t: Target, id: string) => Promise<Response> }[] = [
  {
    name: 'POST /tts/bytes',
    billed: true,
    run: (t, id) =>
      post(t.g, '/tts/bytes', ttsBody({ model_id: t.tts, voice: { mode: 'id', id: t.voice }, output_format: RAW_ENGINE_RATE }), { requestId: id }),
  },
  {
    name: 'POST /tts/sse',
    billed: true,
    run: (t, id) => post(t.g, '/tts/sse', ttsBody({ model_id: t.tts, voice: { mode: 'id', id: t.voice }, output_format: RAW_ENGINE_RATE }), { requestId: id }),
  },
  {
    name: 'POST /v1/audio/speech',
    billed: true,
    run: (t, id) => post(t.g, '/v1/audio/speech', { model: t.tts, input: FOX, voice: t.voice, response_format: 'pcm' }, { requestId: id }),
  },
  { name: 'POST /v1/audio/transcriptions', billed: true, run: (t, id) => transcribe(t.g, SPEECH_WAV, { model: t.stt }, { requestId: id }) },
  { name: 'POST /voices/clone', billed: false, run: (t) => clone(t.g, { name: 'Ada', model_id: t.tts, language: 'de' }) },
];

async function notBilled(g: GatewayHarness, id: string): Promise<void> {
  const l = await ledgerOf(g, id);
  expect(l.ledger).toHaveLength(0);
  expect(l.debited).toBe(0n);
}

// ---------------------------------------------------------------------------------------

beforeAll(async () => {
  peer = await startScriptedElevenLabs({
    apiKey: API_KEY,
    voices: [
      peerVoice(GEORGE, { name: 'George', description: 'Warm British narrator', labels: { accent: 'british', gender: 'male', language: 'en-GB' } }),
      peerVoice(SARAH, {
        name: 'Sarah',
        labels: { gender: 'female', accent: 'american', descriptive: 'soft', age: 'young' },
        verified_languages: [{ language: 'pt', model_id: 'eleven_flash_v2_5', accent: null }],
      }),
      peerVoice(LIAM, { name: 'Liam', labels: { gender: 'male' } }),
    ],
  });
  process.env[KEY_ENV] = API_KEY;
  process.env[WRONG_KEY_ENV] = WRONG_KEY;
  [h, hd] = await Promise.all([
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } }),
    startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_UPSTREAM_TIMEOUT_SECONDS: '1' } }),
  ]);
  await registerModels(h);
  await registerModels(hd);

  // The engine's catalogue, imported through the protocol as an operator does (`svc voices import`).
  const listed = await listEngineVoices(prisma(), h.runtime.ctx.config.engines, TTS);
  catalogueRequests = [...peer.received];
  expect(await importEngineVoices(prisma(), { modelId: TTS, voices: listed })).toEqual({ created: 3, updated: 0 });
  voices.george = await gatewayVoiceFor(h, TTS, GEORGE);
  voices.sarah = await gatewayVoiceFor(h, TTS, SARAH);
  voices.liam = await gatewayVoiceFor(h, TTS, LIAM);
  voices.mapped = await mappedVoice(h, TTS, MAPPED);
  voices.slow = await mappedVoice(hd, TTS, GEORGE);
  peer.received.length = 0;
}, 60_000);

beforeEach(() => {
  peer.received.length = 0;
});

afterEach(() => {
  peer.behaviour = { kind: 'ok' };
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.allSettled([h?.close(), hd?.close()]);
  await peer?.close();
  delete process.env[KEY_ENV];
  delete process.env[WRONG_KEY_ENV];
});

const main = (): Target => ({ g: h, tts: TTS, voice: voices.george, stt: STT });
const slow = (): Target => ({ g: hd, tts: TTS, voice: voices.slow, stt: STT });

// ---------------------------------------------------------------------------------------

describe('the voice catalogue import', () => {
  it('lists the account\u2019s voices with our key; GET /voices shows them with a ready profile for the model', async () => {
    expect(catalogueRequests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v2/voices']);
    expect(catalogueRequests[0]!.headers['xi-api-key']).toBe(API_KEY);
    expect(catalogueRequests[0]!.query).toEqual({ page_size: '100' });

    const res = await call(h, 'GET', `/voices?tag=${TTS}`);
    expect(res.status).toBe(200);
    const listed = (res.body.voices as Record<string, any>[]).sort((a, b) => a.name.localeCompare(b.name));
    expect(
      listed.map((v) => ({ id: v.id, name: v.name, language: v.language, gender: v.gender, description: v.description, kind: v.kind, is_owner: v.is_owner })),
    ).toEqual([
      { id: voices.george, name: 'George', language: 'en-GB', gender: 'male', description: 'Warm British narrator', kind: 'library', is_owner: false },
      { id: voices.liam, name: 'Liam', language: 'en', gender: 'male', description: '', kind: 'library', is_owner: false },
      { id: voices.sarah, name: 'Sarah', language: 'pt', gender: 'female', description: 'american, soft, young', kind: 'library', is_owner: false },
    ]);
    for (const [v, engineId] of [
      [listed[0]!, GEORGE],
      [listed[1]!, LIAM],
      [listed[2]!, SARAH],
    ] as const) {
      expect(v.profiles).toEqual([expect.objectContaining({ model_id: TTS, upstream_id: engineId, status: 'ready', expires_at: null })]);
      expect(v.source_metadata).toEqual({ imported_from: TTS, upstream_voice_id: engineId });
    }
  });

  it('synthesis with an imported voice and with a mapped one reaches the engine with that engine voice id', async () => {
    for (const [voice, engineId] of [
      [voices.liam, LIAM],
      [voices.mapped, MAPPED],
    ] as const) {
      const res = await post(h, '/tts/bytes', ttsBody({ model_id: TTS, transcript: 'Hi.', voice: { mode: 'id', id: voice }, output_format: RAW_ENGINE_RATE }));
      expect(res.status).toBe(200);
      const bytes = Buffer.from(await res.arrayBuffer());
      const req = peer.received.at(-1)!;
      expect(req.path).toBe(`/v1/text-to-speech/${engineId}/stream`);
      expect(bytes.equals(req.sent)).toBe(true);
    }
  });
});

describe('speech', () => {
  it('/tts/bytes raw at the engine\u2019s rate: the engine\u2019s PCM byte for byte, the request as ElevenLabs takes it, billed per character', async () => {
    const id = requestId('bytes');
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.george }, output_format: RAW_ENGINE_RATE }), {
      requestId: id,
    });
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());

    expect(peer.received).toHaveLength(1);
    const req = peer.received[0]!;
    expect(`${req.method} ${req.path}`).toBe(`POST /v1/text-to-speech/${GEORGE}/stream`);
    expect(req.query).toEqual({ output_format: `pcm_${ENGINE_RATE}` });
    expect(req.headers['xi-api-key']).toBe(API_KEY);
    // The upstream's settings (stability), and the voice's language (en-GB) as ISO 639-1.
    expect(req.json).toEqual({ text: FOX, model_id: 'eleven_flash_v2_5', voice_settings: { stability: 0.4 }, language_code: 'en' });

    expect(bytes.length).toBe(engineSamples(FOX) * 2);
    expect(bytes.equals(req.sent)).toBe(true);
    expect(bytes.equals(peerTone(ENGINE_RATE, engineSamples(FOX), 440))).toBe(true);

    const cost = costOf(codePoints(FOX), TTS_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([
      expect.objectContaining({ modelId: TTS, modality: 'tts', route: 'tts.bytes', characters: codePoints(FOX), costMicros: cost, audioMillis: 0 }),
    ]);
  });

  it('/tts/bytes wav at 16 kHz: resampled from the engine\u2019s 22.05 kHz; language and speed (clamped to 1.2) reach the engine', async () => {
    const id = requestId('wav');
    const transcript = 'Olá, tudo bem com você? Vamos começar.';
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({
        model_id: TTS,
        transcript,
        voice: { mode: 'id', id: voices.sarah },
        language: 'pt-BR',
        generation_config: { speed: 1.5 },
        output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' },
      }),
      { requestId: id },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^audio\/(wav|x-wav|wave)/);
    const req = peer.received[0]!;
    expect(req.path).toBe(`/v1/text-to-speech/${SARAH}/stream`);
    expect(req.json).toEqual({ text: transcript, model_id: 'eleven_flash_v2_5', voice_settings: { stability: 0.4, speed: 1.2 }, language_code: 'pt' });

    const wav = readWav(Buffer.from(await res.arrayBuffer()));
    expect(wav.rate).toBe(16000);
    const engineCount = req.sent.length / 2;
    expect(engineCount).toBe(engineSamples(transcript, ENGINE_RATE, 1.2));
    expect(Math.abs(wav.samples.length - (engineCount * 16000) / ENGINE_RATE)).toBeLessThanOrEqual(3);
    expect(Math.abs(crossingFrequency(wav.samples, 16000) - 440)).toBeLessThan(3);
    const cost = costOf(codePoints(transcript), TTS_PRICE);
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([expect.objectContaining({ route: 'tts.bytes', characters: codePoints(transcript), costMicros: cost })]);
  });

  it('/tts/sse: chunk events carrying the engine\u2019s PCM, then done; billed once', async () => {
    const id = requestId('sse');
    const res = await post(h, '/tts/sse', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.mapped }, output_format: RAW_ENGINE_RATE }), {
      requestId: id,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const { audio, chunks } = checkTtsEvents(await res.text());
    const req = peer.received[0]!;
    expect(req.path).toBe(`/v1/text-to-speech/${MAPPED}/stream`);
    // The mapped voice's language (en-US).
    expect(req.json).toEqual({ text: FOX, model_id: 'eleven_flash_v2_5', voice_settings: { stability: 0.4 }, language_code: 'en' });
    expect(chunks.length).toBeGreaterThan(1);
    expect(audio.equals(req.sent)).toBe(true);
    const cost = costOf(codePoints(FOX), TTS_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([expect.objectContaining({ route: 'tts.sse', characters: codePoints(FOX), costMicros: cost })]);
  });

  it('/v1/audio/speech pcm: OpenAI\u2019s 24 kHz, resampled from 22.05 kHz; billed per character', async () => {
    const id = requestId('speech');
    const input = 'Speech through the OpenAI route.';
    const res = await post(h, '/v1/audio/speech', { model: TTS, input, voice: voices.george, response_format: 'pcm' }, { requestId: id });
    expect(res.status).toBe(200);
    const samples = s16(Buffer.from(await res.arrayBuffer()));
    const req = peer.received[0]!;
    expect(req.path).toBe(`/v1/text-to-speech/${GEORGE}/stream`);
    expect((req.json as { text: string }).text).toBe(input);
    const engineCount = req.sent.length / 2;
    expect(engineCount).toBe(engineSamples(input));
    expect(Math.abs(samples.length - (engineCount * 24000) / ENGINE_RATE)).toBeLessThanOrEqual(3);
    expect(Math.abs(crossingFrequency(samples, 24000) - 440)).toBeLessThan(3);
    const cost = costOf(codePoints(input), TTS_PRICE);
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([expect.objectContaining({ modelId: TTS, route: 'audio.speech', characters: codePoints(input), costMicros: cost })]);
  });

  it('a pronunciation dictionary is applied before the text leaves: aliases replaced, phonemes left as written (no inline phonemes); billed on the submitted text', async () => {
    const dictRes = await call(h, 'POST', '/pronunciation-dicts', {
      name: 'eleven dict',
      entries: [
        { grapheme: 'fox', alias: 'wolf' },
        { grapheme: 'SQL', alias: 'sequel' },
        { grapheme: 'GIF', phoneme: "dZ'If", case_sensitive: true },
      ],
    });
    expect(dictRes.status).toBe(201);
    const transcript = 'The fox sends a GIF and writes SQL.';
    const expanded = 'The wolf sends a GIF and writes sequel.';
    const id = requestId('dict');
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({ model_id: TTS, transcript, voice: { mode: 'id', id: voices.george }, pronunciation_dict_id: dictRes.body.id, output_format: RAW_ENGINE_RATE }),
      { requestId: id },
    );
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect((peer.received[0]!.json as { text: string }).text).toBe(expanded);
    expect(bytes.length).toBe(engineSamples(expanded) * 2);
    const cost = costOf(codePoints(transcript), TTS_PRICE);
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([expect.objectContaining({ characters: codePoints(transcript), costMicros: cost })]);
  });
});

describe('batch transcription (Scribe)', () => {
  it('POST /v1/audio/transcriptions: the audio as WAV with the model, language and keyterms; the words with their times; billed per millisecond', async () => {
    const id = requestId('scribe');
    const res = await transcribe(h, SPEECH_WAV, { model: STT, language: 'en-US', keyterms: 'Acme, Zyxel router' }, { requestId: id });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(JSON.parse(text)).toEqual({
      text: 'alpha bravo',
      words: [
        { word: 'alpha', start: 0.3, end: 0.7 },
        { word: 'bravo', start: 1, end: 1.5 },
      ],
      duration_seconds: 1.7,
    });

    expect(peer.received).toHaveLength(1);
    const req = peer.received[0]!;
    expect(`${req.method} ${req.path}`).toBe('POST /v1/speech-to-text');
    expect(req.headers['xi-api-key']).toBe(API_KEY);
    expect(req.fields).toEqual({
      model_id: ['scribe_v2'],
      timestamps_granularity: ['word'],
      tag_audio_events: ['false'],
      language_code: ['en'],
      keyterms: ['Acme', 'Zyxel router'],
    });
    expect(req.audio).toEqual({ sampleRate: 16000, samples: SPEECH.length });

    const cost = audioCost(SPEECH_MILLIS, STT_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([
      expect.objectContaining({ modelId: STT, modality: 'stt', route: 'audio.transcriptions', audioMillis: SPEECH_MILLIS, costMicros: cost, characters: 0 }),
    ]);
  });
});

describe('cloning', () => {
  it('POST /voices/clone: the clip goes to ElevenLabs, the profile holds its voice id, and synthesis with the new voice sends that id', async () => {
    const res = await clone(h, { name: 'Ada', model_id: TTS, language: 'de' });
    const body = (await res.json()) as Record<string, any>;
    expect(res.status, JSON.stringify(body)).toBe(201);

    const add = peer.received[0]!;
    expect(`${add.method} ${add.path}`).toBe('POST /v1/voices/add');
    expect(add.headers['xi-api-key']).toBe(API_KEY);
    expect(add.fields).toEqual({ name: ['Ada'], labels: [JSON.stringify({ language: 'de' })] });
    expect(add.files.files).toHaveLength(1);
    expect(add.files.files![0]!.bytes.equals(CLIP)).toBe(true);
    const engineId = peer.voices.at(-1)!.voice_id;
    expect(peer.voices.at(-1)).toMatchObject({ name: 'Ada', category: 'cloned' });

    expect(body).toMatchObject({ name: 'Ada', language: 'de', kind: 'instant_clone', is_owner: true });
    expect(body.profiles).toEqual([expect.objectContaining({ model_id: TTS, upstream_id: engineId, status: 'ready', expires_at: null })]);
    expect(body.source_metadata).toMatchObject({ engine: 'elevenlabs', upstream_voice_id: engineId, requires_verification: false });
    // Nothing is spoken on the clone's request: its preview is the preview worker's (off in this test).
    expect(body.sample_blob_id).toBeNull();
    expect(peer.received.slice(1)).toEqual([]);

    const tts = await post(
      h,
      '/tts/bytes',
      ttsBody({ model_id: TTS, transcript: 'Guten Tag.', voice: { mode: 'id', id: body.id }, output_format: RAW_ENGINE_RATE }),
    );
    expect(tts.status).toBe(200);
    const audio = Buffer.from(await tts.arrayBuffer());
    const req = peer.received.at(-1)!;
    expect(req.path).toBe(`/v1/text-to-speech/${engineId}/stream`);
    expect(req.json).toEqual({ text: 'Guten Tag.', model_id: 'eleven_flash_v2_5', voice_settings: { stability: 0.4 }, language_code: 'de' });
    expect(audio.equals(req.sent)).toBe(true);
  });
});

describe('no streaming transcription', () => {
  it('/stt/websocket for a model whose only upstream is ElevenLabs is refused before the upgrade: 503 model_offline, it cannot stream', async () => {
    const refused = await refusedUpgrade(
      h,
      { model: STT, sample_rate: '16000', encoding: 'pcm_s16le', turn_detection: 'balanced' },
      { authorization: `Bearer ${h.key}` },
    );
    expect(refused.status).toBe(503);
    const body = JSON.parse(refused.body) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('model_offline');
    expect(body.error.message).toMatch(/stream/);
    expect(body.error.message).toContain(STT);
    expect(peer.received).toHaveLength(0);
  });
});

describe('the engine refusing our key', () => {
  const bad = (): Target => ({ g: h, tts: TTS_BAD_KEY, voice: voices.badKey, stt: STT_BAD_KEY });

  beforeAll(async () => {
    await upsertModel(prisma(), checkProtocol, {
      id: TTS_BAD_KEY,
      modality: 'tts',
      prices: { picoPerChar: TTS_PRICE },
      upstream: { url: peer.url, protocol: 'elevenlabs', upstreamModel: 'eleven_flash_v2_5', apiKeyEnv: WRONG_KEY_ENV },
    });
    await upsertModel(prisma(), checkProtocol, {
      id: STT_BAD_KEY,
      modality: 'stt',
      prices: { picoPerSecond: STT_PRICE },
      upstream: { url: peer.url, protocol: 'elevenlabs', upstreamModel: 'scribe_v1', apiKeyEnv: WRONG_KEY_ENV },
    });
    voices.badKey = await mappedVoice(h, TTS_BAD_KEY, GEORGE);
    await h.runtime.ctx.registry.refresh();
  });

  it.each(OPS)('$name -> 502 upstream_error with the engine\u2019s message, no key anywhere, nothing billed', async ({ run }) => {
    const id = requestId('badkey');
    const res = await run(bad(), id);
    const text = await res.clone().text();
    const err = await expectError(res, { status: 502, code: 'upstream_error', param: null, type: 'api_error' });
    expect(err.message).toContain('401');
    expect(err.message).toContain('Invalid API key');
    expect(text).not.toContain(WRONG_KEY);
    expect(text).not.toContain(API_KEY);
    for (const [name, value] of res.headers) expect(`${name}: ${value}`).not.toContain(WRONG_KEY);
    // The key was the one the upstream's environment variable names.
    expect(peer.received.at(-1)!.headers['xi-api-key']).toBe(WRONG_KEY);
    await notBilled(h, id);
  });

  it('the catalogue import fails as upstream_error, without the key', async () => {
    const error = await listEngineVoices(prisma(), h.runtime.ctx.config.engines, TTS_BAD_KEY).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isServiceError(error)).toBe(true);
    expect((error as { code: string }).code).toBe('upstream_error');
    expect((error as Error).message).toContain('Invalid API key');
    expect((error as Error).message).not.toContain(WRONG_KEY);
  });

  it('an engine message that echoes our key reaches the client with the key cut out', async () => {
    peer.behaviour = { kind: 'error', status: 400, body: { detail: { status: 'voice_not_allowed', message: `The key ${API_KEY} may not use this voice.` } } };
    for (const op of [OPS[0]!, OPS[3]!]) {
      const res = await op.run(main(), requestId('echo'));
      const text = await res.clone().text();
      const err = await expectError(res, { status: 400, code: 'invalid_request', param: null });
      expect(err.message).toBe('The key [redacted] may not use this voice.');
      expect(text).not.toContain(API_KEY);
    }
  });
});

describe('engine errors', () => {
  const cases: [string, ElevenLabsBehaviour, { status: number; code: string; message: string }][] = [
    [
      '400',
      { kind: 'error', status: 400, body: { detail: { status: 'voice_not_found', message: 'A voice with the voice_id was not found.' } } },
      { status: 400, code: 'invalid_request', message: 'A voice with the voice_id was not found.' },
    ],
    [
      '422 (a validation list)',
      { kind: 'error', status: 422, body: { detail: [{ loc: ['body', 'text'], msg: 'field required', type: 'value_error.missing' }] } },
      { status: 400, code: 'invalid_request', message: 'field required' },
    ],
    [
      '500',
      { kind: 'error', status: 500, body: { detail: { status: 'internal_error', message: 'Something went wrong on our side.' } } },
      { status: 502, code: 'upstream_error', message: 'The model upstream returned 500: Something went wrong on our side.' },
    ],
    [
      '503',
      { kind: 'error', status: 503, body: { detail: { status: 'system_busy', message: 'The system is experiencing heavy traffic.' } } },
      { status: 502, code: 'upstream_error', message: 'The model upstream returned 503: The system is experiencing heavy traffic.' },
    ],
  ];

  describe.each(OPS)('$name', ({ run }) => {
    it.each(cases)('engine %s -> the client\u2019s error with the engine\u2019s message, nothing billed, no voice made', async (_name, behaviour, expected) => {
      peer.behaviour = behaviour;
      const id = requestId('engine-error');
      const voicesBefore = await prisma().voice.count({ where: { orgId: h.orgId } });
      const err = await expectError(await run(main(), id), { status: expected.status, code: expected.code, param: null });
      expect(err.message).toBe(expected.message);
      expect(peer.received).toHaveLength(1);
      await notBilled(h, id);
      expect(await prisma().voice.count({ where: { orgId: h.orgId } })).toBe(voicesBefore);
    });
  });

  it('a clone the engine refused leaves no stored clip behind', async () => {
    peer.behaviour = cases[3]![1];
    const before = await prisma().blob.count({ where: { orgId: h.orgId, deletedAt: null } });
    const res = await clone(h, { name: 'Refused', model_id: TTS });
    expect(res.status).toBe(502);
    await res.arrayBuffer();
    expect(await prisma().blob.count({ where: { orgId: h.orgId, deletedAt: null } })).toBe(before);
  });
});

describe('the engine dying mid-stream', () => {
  // 2,400 samples and one byte: a sample straddles the cut.
  const AFTER = 4801;

  it('/tts/sse: the audio sent, then an error event 502 upstream_error instead of done; billed once, at the first audio', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: AFTER, then: 'die' };
    const id = requestId('sse-die');
    const res = await post(h, '/tts/sse', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.george }, output_format: RAW_ENGINE_RATE }), {
      requestId: id,
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 502, error_code: 'upstream_error', request_id: id });
    expect(events.filter((e) => e.type === 'done')).toHaveLength(0);
    expect(events.slice(0, -1).every((e) => e.type === 'chunk')).toBe(true);
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.data as string, 'base64')));
    // Every whole sample the engine sent, and nothing else.
    expect(audio.equals(peer.received[0]!.sent.subarray(0, AFTER - 1))).toBe(true);
    // Streams are debited when the first audio is ready (gateway/tts/synthesize.ts chargeSynthesis).
    const cost = costOf(codePoints(FOX), TTS_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toHaveLength(1);
  });

  it('/tts/bytes streamed: the response is cut after the audio sent', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: AFTER, then: 'die' };
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.george }, stream: true, output_format: RAW_ENGINE_RATE }));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const got: Buffer[] = [];
    const ended = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return 'end';
        got.push(Buffer.from(value));
      }
    })().catch(() => 'cut');
    expect(ended).toBe('cut');
    expect(Buffer.concat(got).equals(peer.received[0]!.sent.subarray(0, AFTER - 1))).toBe(true);
  });

  it('/tts/bytes whole file: 502 upstream_error, nothing billed', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: AFTER, then: 'die' };
    const id = requestId('bytes-die');
    await expectError(await post(h, '/tts/bytes', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.george } }), { requestId: id }), {
      status: 502,
      code: 'upstream_error',
      param: null,
    });
    await notBilled(h, id);
  });

  it('Scribe dropping its answer half-way: 502 upstream_error, nothing billed', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 11, then: 'die' };
    const id = requestId('scribe-die');
    await expectError(await transcribe(h, SPEECH_WAV, { model: STT }, { requestId: id }), { status: 502, code: 'upstream_error', param: null });
    expect(peer.received[0]!.sent.length).toBe(11);
    await notBilled(h, id);
  });
});

describe('a slow engine (1 s deadline)', () => {
  it.each(OPS)('$name, never answered -> 504 upstream_timeout, nothing billed', async ({ run }) => {
    peer.behaviour = { kind: 'hang' };
    const id = requestId('hang');
    await expectError(await run(slow(), id), { status: 504, code: 'upstream_timeout', param: null, type: 'api_error' });
    expect(peer.received).toHaveLength(1);
    await notBilled(hd, id);
  });

  it('/tts/sse stalling after its first audio: an error event 504 upstream_timeout', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 4801, then: 'hang' };
    const res = await post(hd, '/tts/sse', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.slow }, output_format: RAW_ENGINE_RATE }));
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 504, error_code: 'upstream_timeout' });
    expect(events.slice(0, -1).length).toBeGreaterThan(0);
    expect(events.slice(0, -1).every((e) => e.type === 'chunk')).toBe(true);
    expect(await peer.received[0]!.closed).toBe(true);
  });
});

describe('the client leaving', () => {
  it('mid-stream on /tts/sse: the engine\u2019s connection is closed', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 4801, then: 'hang' };
    const controller = new AbortController();
    const res = await post(h, '/tts/sse', ttsBody({ model_id: TTS, voice: { mode: 'id', id: voices.george }, output_format: RAW_ENGINE_RATE }), {
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const first = await sseReader(res).next();
    expect(JSON.parse(first!)).toMatchObject({ type: 'chunk' });
    controller.abort();
    expect(await peer.received[0]!.closed).toBe(true);
  });

  it('while Scribe works: the engine\u2019s connection is closed, nothing billed', async () => {
    peer.behaviour = { kind: 'hang' };
    const controller = new AbortController();
    const id = requestId('scribe-gone');
    const form = new FormData();
    form.append('model', STT);
    form.append('file', new Blob([new Uint8Array(SPEECH_WAV)]), 'audio.wav');
    const pending = fetch(`${h.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id },
      body: form,
      signal: controller.signal,
    });
    await peer.requestsArrived(1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect(await peer.received[0]!.closed).toBe(true);
    await notBilled(h, id);
  });

  it('while ElevenLabs clones: the engine\u2019s connection is closed, no voice made', async () => {
    peer.behaviour = { kind: 'hang' };
    const controller = new AbortController();
    const voicesBefore = await prisma().voice.count({ where: { orgId: h.orgId } });
    const pending = clone(h, { name: 'Gone', model_id: TTS }, controller.signal);
    await peer.requestsArrived(1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect(await peer.received[0]!.closed).toBe(true);
    expect(await prisma().voice.count({ where: { orgId: h.orgId } })).toBe(voicesBefore);
  });
});

describe('failover at open', () => {
  const DEAD = 'http://127.0.0.1:9';

  /** A model with the dead upstream and the peer; Math.random set so the dead one is tried first. */
  async function twoUpstreams(id: string, modality: 'tts' | 'stt') {
    const prices = modality === 'tts' ? { picoPerChar: TTS_PRICE } : { picoPerSecond: STT_PRICE };
    const upstreamModel = modality === 'tts' ? 'eleven_flash_v2_5' : 'scribe_v2';
    for (const url of [DEAD, peer.url])
      await upsertModel(prisma(), checkProtocol, {
        id,
        modality,
        prices,
        upstream: { url, protocol: 'elevenlabs', upstreamModel, apiKeyEnv: KEY_ENV, weight: 1 },
      });
    await h.runtime.ctx.registry.refresh();
    const ups = upstreamsOf(h, id);
    expect(ups).toHaveLength(2);
    const dead = ups.find((u) => u.url === DEAD)!;
    const live = ups.find((u) => u.url === peer.url)!;
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('unknown');
    // ModelRegistry.upstreamOrder: a weighted draw over the healthy upstreams in registry order picks the first.
    vi.spyOn(Math, 'random').mockReturnValue(ups.indexOf(dead) === 0 ? 0 : 0.999);
    expect(h.runtime.ctx.registry.upstreamOrder(h.runtime.ctx.registry.all().find((m) => m.id === id)!)[0]!.id).toBe(dead.id);
    return { dead, live };
  }

  it('speech: the unreachable upstream is skipped and marked down; the engine answers', async () => {
    const { dead, live } = await twoUpstreams('eleven-tts-failover', 'tts');
    const voice = await mappedVoice(h, 'eleven-tts-failover', SARAH);
    const id = requestId('failover-tts');
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: 'eleven-tts-failover', voice: { mode: 'id', id: voice }, output_format: RAW_24K }), {
      requestId: id,
    });
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(peer.received).toHaveLength(1);
    expect(peer.received[0]!.path).toBe(`/v1/text-to-speech/${SARAH}/stream`);
    expect(bytes.equals(peer.received[0]!.sent)).toBe(true);
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('down');
    expect(h.runtime.ctx.registry.healthOf(live.id)).not.toBe('down');
    await expectDebited(h, id, costOf(codePoints(FOX), TTS_PRICE));
  });

  it('transcription: the unreachable upstream is skipped and marked down; Scribe answers', async () => {
    const { dead } = await twoUpstreams('eleven-stt-failover', 'stt');
    const id = requestId('failover-stt');
    const res = await transcribe(h, SPEECH_WAV, { model: 'eleven-stt-failover' }, { requestId: id });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toBe('alpha bravo');
    expect(peer.received).toHaveLength(1);
    expect(h.runtime.ctx.registry.healthOf(dead.id)).toBe('down');
    await expectDebited(h, id, audioCost(SPEECH_MILLIS, STT_PRICE));
  });
});

describe('health checks through the gateway', () => {
  let healthPeer: ScriptedElevenLabs;
  const MODEL = 'eleven-health';
  let upstreamId = '';
  let voice = '';

  beforeAll(async () => {
    healthPeer = await startScriptedElevenLabs({ apiKey: API_KEY });
    await upsertModel(prisma(), checkProtocol, {
      id: MODEL,
      modality: 'tts',
      prices: { picoPerChar: TTS_PRICE },
      upstream: { url: healthPeer.url, protocol: 'elevenlabs', upstreamModel: 'eleven_flash_v2_5', apiKeyEnv: KEY_ENV },
    });
    await h.runtime.ctx.registry.refresh();
    upstreamId = upstreamsOf(h, MODEL)[0]!.id;
    voice = await mappedVoice(h, MODEL, GEORGE);
  });

  afterAll(async () => {
    await healthPeer?.close();
  });

  const listedModels = async () => ((await call(h, 'GET', '/v1/models')).body.data as { id: string }[]).map((m) => m.id);

  it('up with our key accepted; down when the key is refused (the model leaves /v1/models and is offline); up again; down when nothing listens', async () => {
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(upstreamId)).toBe('up');
    const probe = healthPeer.received.at(-1)!;
    expect(`${probe.method} ${probe.path}`).toBe('GET /v1/models');
    expect(probe.headers['xi-api-key']).toBe(API_KEY);
    expect(await listedModels()).toContain(MODEL);
    expect(await listedModels()).toEqual(expect.arrayContaining([TTS, STT]));

    healthPeer.behaviour = { kind: 'auth_refused' };
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(upstreamId)).toBe('down');
    expect(await listedModels()).not.toContain(MODEL);
    const before = healthPeer.received.length;
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: MODEL, voice: { mode: 'id', id: voice }, output_format: RAW_ENGINE_RATE }));
    const text = await res.clone().text();
    const err = await expectError(res, { status: 503, code: 'model_offline', param: null });
    expect(err.message).toContain('Invalid API key');
    expect(text).not.toContain(API_KEY);
    expect(healthPeer.received).toHaveLength(before);
    const row = await prisma().upstream.findUniqueOrThrow({ where: { id: upstreamId } });
    expect(row.health).toBe('down');
    expect(row.lastError ?? '').not.toContain(API_KEY);

    healthPeer.behaviour = { kind: 'ok' };
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(upstreamId)).toBe('up');
    expect(await listedModels()).toContain(MODEL);
    const ok = await post(h, '/tts/bytes', ttsBody({ model_id: MODEL, voice: { mode: 'id', id: voice }, output_format: RAW_24K }));
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(healthPeer.received.at(-1)!.sent)).toBe(true);

    await healthPeer.close();
    await h.runtime.ctx.health.checkAll();
    expect(h.runtime.ctx.registry.healthOf(upstreamId)).toBe('down');
    expect(await listedModels()).not.toContain(MODEL);
  });
});
