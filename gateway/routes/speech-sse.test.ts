// POST /v1/audio/speech as OpenAI's clients use it, over real HTTP against the real gateway
// runtime (throw-away database) with flite: an honest Content-Type for every response_format it
// serves (and the clear 400 for those it does not), stream_format "sse" with OpenAI's events
// (speech.audio.delta with base64 audio, speech.audio.done with usage) whose audio, read back by
// the local recogniser, says the words; an engine dying mid-stream ends the stream with OpenAI's
// error event.
import { newId } from '../../server/db/ids.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanMpegFrames } from '../audio/mp3-frames.ts';
import { parseWav } from '../audio/wav.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { STT_PRICE, settleRecognizers, transcribe, wavFile, wer } from '../../test/support/stt-routes.ts';
import {
  FLITE_PRICE,
  FOX,
  billingOf,
  bytesOf,
  codePoints,
  costOf,
  decodeRaw,
  expectError,
  expectSpeechLevel,
  expectWithin,
  natural,
  pcmTone,
  post,
  requestId,
  sseData,
  startSpeechServer,
  startTtsGateway,
  usd,
  type SpeechServer,
} from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

/** A sentence the local recogniser hears well from flite (the fox sentence loses a word or three). */
const SAID = 'Please call me tomorrow morning about the meeting.';

let h: GatewayHarness;
let dying: SpeechServer;
let dyingVoice = '';

beforeAll(async () => {
  h = await startTtsGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  // An OpenAI-compatible speech engine that sends part of the audio, then drops the connection.
  dying = await startSpeechServer({ kind: 'pcm', pcm: pcmTone(3), stopAfterBytes: 48_000, then: 'die' });
  await upsertModel(prisma, checkProtocol, {
    id: 'dying-tts',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: dying.baseUrl, protocol: 'openai' },
  });
  dyingVoice = newId('voice');
  await prisma.voice.create({
    data: {
      id: dyingVoice,
      orgId: h.orgId,
      name: 'dying',
      tags: [],
      profiles: { create: { id: newId('vpr'), modelId: 'dying-tts', upstreamId: 'alloy', status: 'ready' } },
    },
  });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await dying?.close();
  await settleRecognizers();
  await h?.close();
});

const speech = (body: object, id?: string) => post(h, '/v1/audio/speech', { model: 'local-flite', input: FOX, voice: 'flite-slt', ...body }, { requestId: id });

/** What the local recogniser hears in 24 kHz mono samples. */
async function heard(samples: Float32Array): Promise<string> {
  const res = await transcribe(h, wavFile([samples], 24000), { model: 'local-stt' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { text: string }).text;
}

describe('Content-Type names what the body is', { timeout: 120_000 }, () => {
  it('mp3: audio/mpeg, 24 kHz MPEG frames', async () => {
    const res = await speech({ response_format: 'mp3' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    const mp3 = scanMpegFrames(await bytesOf(res));
    expect(mp3.frames.length).toBeGreaterThan(10);
    expect(new Set(mp3.frames.map((f) => f.sampleRate))).toEqual(new Set([24000]));
  });

  it('wav: audio/wav, a 24 kHz WAV', async () => {
    const res = await speech({ response_format: 'wav' });
    expect(res.headers.get('content-type')).toBe('audio/wav');
    expect(parseWav(await bytesOf(res)).sampleRate).toBe(24000);
  });

  it('pcm: audio/pcm with its rate and channels (OpenAI pcm is headerless 24 kHz 16-bit mono); the words are in it', async () => {
    const res = await speech({ response_format: 'pcm' });
    expect(res.headers.get('content-type')).toBe('audio/pcm;rate=24000;channels=1');
    const bytes = await bytesOf(res);
    expect(bytes.subarray(0, 4).toString('latin1')).not.toBe('RIFF');
    const samples = decodeRaw(bytes, 'pcm_s16le');
    expectWithin(samples.length / 24000, natural('flite', 'slt', FOX).seconds, 0.2);
    const said = decodeRaw(await bytesOf(await speech({ response_format: 'pcm', input: SAID })), 'pcm_s16le');
    const text = await heard(said);
    expect(wer(SAID, text), text).toBeLessThanOrEqual(0.2);
  });

  it.each(['opus', 'aac', 'flac'])('%s: not served here, 400 naming response_format', async (format) => {
    const err = await expectError(await speech({ response_format: format }), { status: 400, code: 'invalid_request', param: 'response_format' });
    expect(err.message).toContain('mp3, wav or pcm');
  });
});

describe('stream_format "sse"', { timeout: 120_000 }, () => {
  it.each(['pcm', 'wav'] as const)(
    '%s: speech.audio.delta events with base64 audio, then speech.audio.done with usage; the audio says the words',
    async (format) => {
      const id = requestId(`sse-${format}`);
      const res = await speech({ response_format: format, stream_format: 'sse', input: SAID }, id);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const events = sseData(await res.text()).map((d) => JSON.parse(d) as { type: string; audio?: string; usage?: unknown });
      const chars = codePoints(SAID);
      expect(events.at(-1)).toEqual({ type: 'speech.audio.done', usage: { input_tokens: chars, output_tokens: 0, total_tokens: chars } });
      const deltas = events.slice(0, -1);
      expect(deltas.length).toBeGreaterThan(0);
      for (const d of deltas) {
        expect(Object.keys(d).sort()).toEqual(['audio', 'type']);
        expect(d.type).toBe('speech.audio.delta');
        expect(d.audio).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
      }
      const audio = Buffer.concat(deltas.map((d) => Buffer.from(d.audio!, 'base64')));
      const samples = format === 'wav' ? parseWav(audio).samples : decodeRaw(audio, 'pcm_s16le');
      expectSpeechLevel(samples);
      const text = await heard(samples);
      expect(wer(SAID, text), text).toBeLessThanOrEqual(0.2);
      // Billed once, per character, before the audio went out.
      const cost = costOf(chars, FLITE_PRICE);
      expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
      const billed = await billingOf(h, id);
      expect(billed.usage).toEqual([expect.objectContaining({ route: 'audio.speech', characters: chars, costMicros: cost })]);
    },
  );

  it('mp3 is not streamed as events: the clear 400 it has always been', async () => {
    await expectError(await speech({ response_format: 'mp3', stream_format: 'sse' }), { status: 400, code: 'invalid_output_format', param: 'response_format' });
  });

  it('an engine that dies mid-stream: the audio so far, then OpenAI stream error event, and no speech.audio.done', async () => {
    const res = await post(h, '/v1/audio/speech', {
      model: 'dying-tts',
      input: 'a long sentence',
      voice: dyingVoice,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map(
      (d) => JSON.parse(d) as { type?: string; audio?: string; error?: { code: string; type: string; message: string } },
    );
    expect(events.length).toBeGreaterThan(1);
    for (const d of events.slice(0, -1)) expect(d.type).toBe('speech.audio.delta');
    expect(events.at(-1)!.error).toMatchObject({ code: 'upstream_error', type: 'api_error' });
    expect(events.some((e) => e.type === 'speech.audio.done')).toBe(false);
  });
});
