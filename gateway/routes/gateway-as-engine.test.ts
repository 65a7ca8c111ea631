// One gateway serving as another's engine, both real (in this process, each on its own
// throw-away database and loopback port). Gateway A runs the local engines: `local-flite` (flite,
// with the platform voices) and `local-stt` (pocketsphinx). Gateway B registers A twice, with A's
// API key in an environment variable: a TTS model over protocol `cartesia` at A's base URL (A's
// POST /tts/bytes is Cartesia-shaped), and an STT model over protocol `openai` at `${A}/v1` (A's
// POST /v1/audio/transcriptions is OpenAI-shaped; B streams it itself, cutting utterances with its
// turn detector). What B's clients get is made by A's engines; each gateway bills its own org at
// its own price.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseWav } from '../audio/wav.ts';
import { newId } from '../../server/db/ids.ts';
import { getModel, upsertModel } from '../../server/services/models/upsert-model.ts';
import { mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { listEngineVoices } from '../voices/engine-catalogue.ts';
import {
  STT_PRICE as A_STT_PRICE,
  audioCost,
  concat,
  expectDebited,
  expectTimedWords,
  openSession,
  s16le,
  settleRecognizers,
  silence,
  summary,
  transcribe,
  wer,
} from '../../test/support/stt-routes.ts';
import { FLITE_PRICE as A_TTS_PRICE, costOf, expectSpeechLevel, expectWithin, natural, post, usd } from '../../test/support/tts-routes.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const A_KEY_ENV = 'GATEWAY_A_ROUTE_TEST_KEY';
/** B's prices differ from A's: each ledger shows its own gateway's price. */
const B_TTS_PRICE = 3_000_001n;
const B_STT_PRICE = 234_567_891n;
const FOX = 'The quick brown fox jumps over the lazy dog.';
const FOX_WORDS = 'the quick brown fox jumps over the lazy dog';

let a: GatewayHarness;
let b: GatewayHarness;
/** B's org voice, speaking through A as A's platform voice flite-slt. */
let bVoice = '';

beforeAll(async () => {
  a = await startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  const pa = a.testDb.db.prisma;
  await upsertModel(pa, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: A_TTS_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await upsertModel(pa, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: A_STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await seedPlatformVoices(pa);
  await a.runtime.ctx.registry.refresh();
  await a.runtime.ctx.health.checkAll();

  process.env[A_KEY_ENV] = a.key;
  b = await startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  const pb = b.testDb.db.prisma;
  await upsertModel(pb, checkProtocol, {
    id: 'b-tts',
    modality: 'tts',
    prices: { picoPerChar: B_TTS_PRICE },
    upstream: { url: a.url, protocol: 'cartesia', upstreamModel: 'local-flite', apiKeyEnv: A_KEY_ENV },
  });
  await upsertModel(pb, checkProtocol, {
    id: 'b-stt',
    modality: 'stt',
    prices: { picoPerSecond: B_STT_PRICE },
    upstream: { url: `${a.url}/v1`, protocol: 'openai', upstreamModel: 'local-stt', apiKeyEnv: A_KEY_ENV },
  });
  await b.runtime.ctx.registry.refresh();
  bVoice = newId('voice');
  await pb.voice.create({ data: { id: bVoice, orgId: b.orgId, name: 'through gateway A', tags: [] } });
  await mapVoiceToEngine(pb, { voiceId: bVoice, modelId: 'b-tts', upstreamId: 'flite-slt' });
}, 60_000);

afterAll(async () => {
  await b?.close();
  // The recogniser threads are stopped with A: only once idle (see settleRecognizers).
  await settleRecognizers();
  await a?.close();
  delete process.env[A_KEY_ENV];
});

// ---------------------------------------------------------------------------------------
// Helpers

let rid = 0;
const requestId = (label: string) => `gw-${label}-${++rid}-${Date.now()}`;

/** A's usage rows for its own org (B's key is A's org key) created after `before` rows. */
async function aUsageSince(before: number, count: number): Promise<UsageRow[]> {
  let rows: UsageRow[] = [];
  await vi.waitFor(
    async () => {
      rows = (await usageRows(a.testDb.db.prisma, { orgId: a.orgId })).slice(before);
      expect(rows.length).toBeGreaterThanOrEqual(count);
    },
    { timeout: 10_000, interval: 25 },
  );
  return rows;
}
/** A's usage rows so far, its own requests' included (on SQLite a debit commits just after its answer). */
const aUsageCount = async () => {
  await a.settled();
  return (await usageRows(a.testDb.db.prisma, { orgId: a.orgId })).length;
};

function s16(bytes: Buffer): Int16Array {
  expect(bytes.length % 2).toBe(0);
  return Int16Array.from({ length: bytes.length / 2 }, (_, i) => bytes.readInt16LE(i * 2));
}

const floats = (x: Int16Array) => Float32Array.from(x, (v) => v / 32768);

/** Normalised cross-correlation at lag 0: 1 for the same waveform. */
function correlation(x: Float32Array, y: Float32Array): number {
  const n = Math.min(x.length, y.length);
  let xy = 0;
  let xx = 0;
  let yy = 0;
  for (let i = 0; i < n; i++) {
    xy += x[i]! * y[i]!;
    xx += x[i]! * x[i]!;
    yy += y[i]! * y[i]!;
  }
  return xy / Math.sqrt(xx * yy);
}

const bBody = (output: Record<string, unknown>, over: Record<string, unknown> = {}) => ({
  model_id: 'b-tts',
  transcript: FOX,
  voice: { mode: 'id', id: bVoice },
  output_format: output,
  ...over,
});
const aBody = (output: Record<string, unknown>, over: Record<string, unknown> = {}) => ({
  model_id: 'local-flite',
  transcript: FOX,
  voice: { mode: 'id', id: 'flite-slt' },
  output_format: output,
  ...over,
});
const RAW_24K = { container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 };
const WAV_16K = { container: 'wav', encoding: 'pcm_s16le', sample_rate: 16000 };

/** B's TTS debit: B's price x characters, one usage row on B's org; A's: A's price x the same characters on A's org. */
async function expectBothBilledTts(id: string, aBefore: number, route: string): Promise<void> {
  const characters = [...FOX].length;
  const bCost = costOf(characters, B_TTS_PRICE);
  const billed = await expectDebited(b, id, bCost);
  expect(billed.usage).toEqual([expect.objectContaining({ orgId: b.orgId, modelId: 'b-tts', modality: 'tts', route, characters, costMicros: bCost })]);
  const [aRow, ...more] = await aUsageSince(aBefore, 1);
  expect(more).toEqual([]);
  // A billed its own org, for its model, at its price: the cartesia module calls /tts/bytes.
  expect(aRow).toMatchObject({
    orgId: a.orgId,
    apiKeyId: a.keyId,
    modelId: 'local-flite',
    modality: 'tts',
    route: 'tts.bytes',
    characters,
    costMicros: costOf(characters, A_TTS_PRICE),
  });
}

// ---------------------------------------------------------------------------------------

describe('B\u2019s speech through A (protocol cartesia at A\u2019s base URL)', () => {
  it('B\u2019s upstreams are healthy: A answers the cartesia health check (GET /voices?limit=1) and the openai one (GET /v1/models)', async () => {
    await b.runtime.ctx.health.checkAll();
    for (const modelId of ['b-tts', 'b-stt']) {
      const model = await getModel(b.testDb.db.prisma, modelId);
      const row = await b.testDb.db.prisma.upstream.findUniqueOrThrow({ where: { id: model.upstreams[0]!.id } });
      expect(b.runtime.ctx.registry.healthOf(model.upstreams[0]!.id), `${modelId}: ${row.lastError}`).toBe('up');
    }
  });

  it('/tts/bytes raw 24 kHz: the bytes are A\u2019s own answer to the same request (flite\u2019s speech, its natural length at 24 kHz); B bills B\u2019s org at B\u2019s price, A bills A\u2019s org at A\u2019s', async () => {
    const own = await post(a, '/tts/bytes', aBody(RAW_24K));
    expect(own.status).toBe(200);
    const ownBytes = Buffer.from(await own.arrayBuffer());

    const aBefore = await aUsageCount();
    const id = requestId('raw');
    const res = await post(b, '/tts/bytes', bBody(RAW_24K), { requestId: id });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status, bytes.toString().slice(0, 300)).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const samples = s16(bytes);
    // flite makes 16 kHz; A resampled it to the 24 kHz the cartesia module asks for; B relays it.
    const flite = natural('flite', 'slt', FOX);
    expect(samples.length).toBe(Math.round((flite.samples.length * 24000) / 16000));
    // B relays A's samples as they are (24 kHz asked, 24 kHz given: no conversion on B).
    expect(bytes.equals(ownBytes)).toBe(true);
    expectSpeechLevel(floats(samples));
    // A few seconds for nine words.
    expectWithin(samples.length / 24000, flite.seconds, 0.01);
    expect(flite.seconds).toBeGreaterThan(1.5);
    expect(flite.seconds).toBeLessThan(5);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(costOf([...FOX].length, B_TTS_PRICE)));
    await expectBothBilledTts(id, aBefore, 'tts.bytes');
  });

  it('/tts/bytes WAV 16 kHz: B converts A\u2019s 24 kHz back to flite\u2019s own rate: flite\u2019s sample count, the same waveform', async () => {
    const aBefore = await aUsageCount();
    const id = requestId('wav');
    const res = await post(b, '/tts/bytes', bBody(WAV_16K), { requestId: id });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status, bytes.toString().slice(0, 300)).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const wav = parseWav(bytes);
    expect([wav.sampleRate, wav.channels]).toEqual([16000, 1]);
    const flite = natural('flite', 'slt', FOX);
    expect(wav.samples.length).toBe(flite.samples.length);
    expectSpeechLevel(wav.samples);
    // Twice resampled (16 -> 24 kHz on A, 24 -> 16 kHz on B): still flite's waveform.
    expect(correlation(wav.samples, flite.samples)).toBeGreaterThan(0.99);
    await expectBothBilledTts(id, aBefore, 'tts.bytes');
  });

  it('B imports A\u2019s voices through the cartesia catalogue (Cartesia\u2019s pages of GET /voices): every voice A lists', async () => {
    const native = (await (await fetch(`${a.url}/voices?limit=200`, { headers: a.headers })).json()) as { voices: { id: string; name: string }[] };
    const catalogue = await listEngineVoices(b.testDb.db.prisma, b.runtime.ctx.config.engines, 'b-tts');
    expect(catalogue.map((v) => [v.id, v.name])).toEqual(native.voices.map((v) => [v.id, v.name]));
  });

  it('what the cartesia module adds is accepted by A: a language (ISO 639-1), generation_config.speed, the Cartesia-Version header', async () => {
    const own = await post(a, '/tts/bytes', aBody(WAV_16K, { language: 'en', generation_config: { speed: 1.25 } }));
    expect(own.status).toBe(200);
    const ownSamples = parseWav(Buffer.from(await own.arrayBuffer())).samples.length;
    const aBefore = await aUsageCount();
    const id = requestId('speed');
    // speed 1.25: the module sends generation_config {speed}; A's flite speaks faster.
    const res = await post(b, '/tts/bytes', bBody(WAV_16K, { language: 'en-GB', generation_config: { speed: 1.25 } }), { requestId: id });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status, bytes.toString().slice(0, 300)).toBe(200);
    const wav = parseWav(bytes);
    expect(wav.samples.length).toBe(ownSamples);
    expect(wav.samples.length).toBeLessThan(natural('flite', 'slt', FOX).samples.length * 0.9);
    await expectBothBilledTts(id, aBefore, 'tts.bytes');
  });
});

// ---------------------------------------------------------------------------------------

describe('B\u2019s transcription through A (protocol openai at ${A}/v1, A\u2019s pocketsphinx)', () => {
  /** FOX as A's flite says it, asked of A's /tts/bytes as a 16 kHz WAV. */
  let foxWav: Buffer;
  let foxSamples: Float32Array;

  beforeAll(async () => {
    const res = await post(a, '/tts/bytes', aBody(WAV_16K));
    expect(res.status).toBe(200);
    foxWav = Buffer.from(await res.arrayBuffer());
    foxSamples = parseWav(foxWav).samples;
  });

  const millisOf = (samples: number) => Math.round((samples * 1000) / 16000);

  it('POST /v1/audio/transcriptions on B: A\u2019s pocketsphinx hears the words; B bills the audio at B\u2019s price, A at A\u2019s', async () => {
    const aBefore = await aUsageCount();
    const id = requestId('batch');
    const res = await transcribe(b, foxWav, { model: 'b-stt', language: 'en' }, { requestId: id });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const body = JSON.parse(text) as { text: string; words: { word: string; start: number; end: number }[]; duration_seconds: number };
    expect(wer(FOX_WORDS, body.text), body.text).toBeLessThanOrEqual(0.15);
    const seconds = foxSamples.length / 16000;
    expectTimedWords(body.words, 0, seconds);
    expect(body.words.map((w) => w.word).join(' ')).toBe(body.text);
    const millis = millisOf(foxSamples.length);
    expect(body.duration_seconds).toBe(millis / 1000);
    const bCost = audioCost(millis, B_STT_PRICE);
    const billed = await expectDebited(b, id, bCost);
    expect(billed.usage).toEqual([
      expect.objectContaining({ orgId: b.orgId, modelId: 'b-stt', modality: 'stt', route: 'audio.transcriptions', audioMillis: millis, costMicros: bCost }),
    ]);
    // B sent A the same audio (a 16 kHz WAV): A billed its org for exactly that.
    const [aRow, ...more] = await aUsageSince(aBefore, 1);
    expect(more).toEqual([]);
    expect(aRow).toMatchObject({
      orgId: a.orgId,
      modelId: 'local-stt',
      modality: 'stt',
      route: 'audio.transcriptions',
      audioMillis: millis,
      costMicros: audioCost(millis, A_STT_PRICE),
    });
  });

  it('GET /stt/websocket on B: the speech in 100 ms frames, then silence: B\u2019s detector ends the turn, A transcribes the utterance, the final has the words; B bills exactly the audio sent, A the audio B uploaded', async () => {
    const aBefore = await aUsageCount();
    const audio = concat(foxSamples, silence(1.2));
    const c = await openSession(b, { model: 'b-stt', api_key: b.key, sample_rate: '16000', encoding: 'pcm_s16le' });
    const sent = await c.stream(s16le(audio), { frameBytes: 3200, intervalMs: 0 });
    expect(sent).toBe(audio.length * 2);
    await c.until((e) => e.type === 'turn.finalized', { timeoutMs: 60_000 });
    c.command({ type: 'close' });
    expect(await c.closed).toEqual({ code: 1000, reason: 'client_close' });

    expect(c.ofType('error'), summary(c.events)).toEqual([]);
    const finals = c.ofType('transcript').filter((e) => e.is_final);
    expect(finals, summary(c.events)).toHaveLength(1);
    const final = finals[0]!;
    expect(wer(FOX_WORDS, final.text as string), final.text as string).toBeLessThanOrEqual(0.25);
    const ws = expectTimedWords(final.words, 0, foxSamples.length / 16000);
    expect(final.text).toBe(ws.map((w) => w.word).join(' '));
    expect(c.ofType('turn.start')).toHaveLength(1);
    expect(c.ofType('turn.end')).toHaveLength(1);
    // turn.end at B's detector's decision, then A's final, then turn.finalized with the turn's text.
    const [finalized, ...moreFinalized] = c.ofType('turn.finalized');
    expect(moreFinalized).toEqual([]);
    expect(finalized).toMatchObject({ at: c.ofType('turn.end')[0]!.at, transcript: final.text });
    expect(c.events.indexOf(c.ofType('turn.end')[0]!)).toBeLessThan(c.events.indexOf(final));
    expect(c.events.indexOf(final)).toBeLessThan(c.events.indexOf(finalized!));

    const millis = millisOf(audio.length);
    const cost = audioCost(millis, B_STT_PRICE);
    expect(c.events.at(-1)).toEqual({ type: 'session.closed', reason: 'client_close', audio_seconds: millis / 1000, cost_usd: usd(cost) });
    const billed = await expectDebited(b, c.events[0]!.request_id as string, cost);
    expect(billed.audioMillis).toBe(millis);
    expect(billed.usage.every((u) => u.orgId === b.orgId && u.modelId === 'b-stt' && u.route === 'stt.websocket')).toBe(true);

    // A was called per utterance (and for interims): each call billed on A, to A's org, at A's
    // price for the audio of that call.
    expect(await b.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    // The final calls cover the speech (interim calls, if any completed, come on top; the
    // silence after B's turn end may or may not reach A, depending on when B's detector decided
    // relative to the audio it had queued). A debits each call just after answering it, so the
    // last one may land after B has closed.
    let aRows: UsageRow[] = [];
    await vi.waitFor(
      async () => {
        aRows = await aUsageSince(aBefore, 1);
        expect(aRows.reduce((n, r) => n + r.audioMillis, 0)).toBeGreaterThanOrEqual(millisOf(foxSamples.length));
      },
      { timeout: 10_000, interval: 25 },
    );
    expect(aRows.every((r) => r.modelId === 'local-stt' && r.route === 'audio.transcriptions' && r.costMicros === audioCost(r.audioMillis, A_STT_PRICE))).toBe(
      true,
    );
    expect(aRows.some((r) => r.audioMillis >= millisOf(foxSamples.length))).toBe(true);
    expect(aRows.every((r) => r.apiKeyId === a.keyId)).toBe(true);
  });
});
