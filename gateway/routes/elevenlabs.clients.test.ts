// ElevenLabs' HTTP API as ElevenLabs' own client sees it (@elevenlabs/elevenlabs-js, unmodified but
// for its base URL and key), over real HTTP against the real gateway runtime and the local engines:
// text-to-speech (convert, stream, with timestamps) in ElevenLabs' output formats, billed as
// /tts/bytes is; the voices lists v1 and v2; speech-to-text; ElevenLabs' error shape.
import { ElevenLabsClient, ElevenLabsError } from '@elevenlabs/elevenlabs-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { scanMpegFrames } from '../audio/mp3-frames.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { STT_PRICE, audioCost, settleRecognizers, speech, wer } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, decodeRaw, expectSpeechLevel, expectWithin, natural, startTtsGateway } from '../../test/support/tts-routes.ts';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startTtsGateway();
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
});

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

const client = (apiKey = h.key) => new ElevenLabsClient({ baseUrl: h.url, apiKey, maxRetries: 0 });

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

/** The samples flite makes for FOX at `rate`. */
const foxSamplesAt = (voice: string, rate: number) => Math.round((natural('flite', voice, FOX).samples.length * rate) / 16000);

describe('text-to-speech', () => {
  it('convert, pcm_16000: flite\u2019s speech sample for sample, as audio/pcm; billed per character at the model\u2019s price, as /tts/bytes', async () => {
    const before = await h.balanceMicros();
    const { data, rawResponse } = await client()
      .textToSpeech.convert('flite-slt', { text: FOX, modelId: 'local-flite', outputFormat: 'pcm_16000' })
      .withRawResponse();
    // ElevenLabs' type for raw PCM (LiveKit's plugin refuses an answer that is not audio/*).
    expect(rawResponse.headers.get('content-type')).toBe('audio/pcm');
    const audio = await bytesOf(data);
    expect(audio.length / 2).toBe(foxSamplesAt('slt', 16000));
    expectSpeechLevel(decodeRaw(audio, 'pcm_s16le'));
    expect(before - (await h.balanceMicros())).toBe(costOf(codePoints(FOX), FLITE_PRICE));
  });

  it('convert with the client\u2019s defaults (mp3_44100_128) and ElevenLabs\u2019 model name: MPEG frames at 44.1 kHz from the default model', async () => {
    const audio = await bytesOf(await client().textToSpeech.convert('flite-rms', { text: FOX, modelId: 'eleven_multilingual_v2' }));
    const mp3 = scanMpegFrames(audio);
    expect(new Set(mp3.frames.map((f) => f.sampleRate))).toEqual(new Set([44100]));
    expectWithin(mp3.durationSeconds, natural('flite', 'rms', FOX).seconds, 0.2);
  });

  it('stream, ulaw_8000: 8-bit \u00b5-law at 8 kHz, one byte a sample, as audio/basic', async () => {
    const { data, rawResponse } = await client()
      .textToSpeech.stream('flite-slt', { text: FOX, modelId: 'local-flite', outputFormat: 'ulaw_8000' })
      .withRawResponse();
    expect(rawResponse.headers.get('content-type')).toBe('audio/basic');
    const audio = await bytesOf(data);
    expect(audio.length).toBe(foxSamplesAt('slt', 8000));
    expectSpeechLevel(decodeRaw(audio, 'pcm_mulaw'));
  });

  it('convertWithTimestamps and streamWithTimestamps: the audio in base64 (no alignment: the local engines give no word times)', async () => {
    const whole = await client().textToSpeech.convertWithTimestamps('flite-slt', { text: FOX, modelId: 'local-flite', outputFormat: 'pcm_24000' });
    expect(Buffer.from(whole.audioBase64, 'base64').length / 2).toBe(foxSamplesAt('slt', 24000));
    expect(whole.alignment ?? null).toBeNull();
    const chunks: Buffer[] = [];
    const stream = await client().textToSpeech.streamWithTimestamps('flite-slt', { text: FOX, modelId: 'local-flite', outputFormat: 'pcm_24000' });
    for await (const chunk of stream) chunks.push(Buffer.from(chunk.audioBase64 ?? '', 'base64'));
    expect(Buffer.concat(chunks).length / 2).toBe(foxSamplesAt('slt', 24000));
  });

  it('errors: ElevenLabsError with the status and ElevenLabs\u2019 detail {status, message}; xi-api-key is the key', async () => {
    const unknown = await client()
      .textToSpeech.convert('no-such-voice', { text: FOX, modelId: 'local-flite' })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ElevenLabsError);
    expect(unknown).toMatchObject({ statusCode: 404, body: { detail: { status: 'voice_not_found', message: expect.any(String) } } });
    const opus = await client()
      .textToSpeech.convert('flite-slt', { text: FOX, modelId: 'local-flite', outputFormat: 'opus_48000_64' })
      .catch((e: unknown) => e);
    expect(opus).toMatchObject({ statusCode: 400, body: { detail: { status: 'invalid_output_format' } } });
    const badKey = await client('sk_svc_not_a_key')
      .voices.getAll()
      .catch((e: unknown) => e);
    expect(badKey).toMatchObject({ statusCode: 401, body: { detail: { status: 'invalid_api_key' } } });
  });

  it('errors answered before any route is reached carry detail too: an id longer than the router takes, a path that does not decode, a method the path does not have', async () => {
    // Through the client: a voice id over the router's 100 characters.
    const long = await client()
      .textToSpeech.convert('v'.repeat(101), { text: FOX, modelId: 'local-flite' })
      .catch((e: unknown) => e);
    expect(long).toBeInstanceOf(ElevenLabsError);
    expect(long).toMatchObject({ statusCode: 404, body: { detail: { status: 'not_found', message: expect.stringContaining('at most 100 characters') } } });
    const cases: [method: string, path: string, status: number, code: string][] = [
      ['POST', '/v1/text-to-speech/%zz', 400, 'invalid_request'],
      ['POST', '/v1/text-to-speech/%zz/stream', 400, 'invalid_request'],
      ['GET', '/v1/voices/%zz', 400, 'invalid_request'],
      ['PUT', '/v1/voices', 405, 'method_not_allowed'],
      ['GET', '/v2/voices/x?page_size=1', 404, 'not_found'],
      ['GET', '/v1/speech-to-text', 405, 'method_not_allowed'],
      ['GET', '/v1/text-to-speech/flite-slt', 404, 'not_found'],
      // A body on a path without that method: read (and refused) before the not-found answer.
      ['PUT', '/v1/voices', 400, 'invalid_json'],
    ];
    for (const [method, path, status, code] of cases) {
      const json = { 'xi-api-key': h.key, 'content-type': 'application/json' };
      const post =
        method === 'POST' ? { headers: json, body: '{}' } : code === 'invalid_json' ? { headers: json, body: '{' } : { headers: { 'xi-api-key': h.key } };
      const res = await fetch(`${h.url}${path}`, { method, ...post });
      const body = (await res.json()) as { detail: unknown; error: { code: string; message: string } };
      expect({ status: res.status, code: body.error.code }, `${method} ${path}`).toEqual({ status, code });
      expect(body.detail, `${method} ${path}`).toEqual({ status: code, message: body.error.message });
    }
    // Other paths keep the plain envelope.
    const other = (await (await fetch(`${h.url}/v1/audio/speech/%zz`, { method: 'POST' })).json()) as Record<string, unknown>;
    expect(Object.keys(other)).toEqual(['error']);
  });
});

describe('voices', () => {
  it('getAll (v1) lists every voice; search (v2) pages them with next_page_token, total_count counting all', async () => {
    const native = (await (await fetch(`${h.url}/voices?limit=200`, { headers: h.headers })).json()) as { voices: { id: string; name: string }[] };
    const v1 = await client().voices.getAll();
    expect(v1.voices.map((v) => [v.voiceId, v.name])).toEqual(native.voices.map((v) => [v.id, v.name]));
    expect(v1.voices[0]).toMatchObject({ category: 'premade', isOwner: false });
    const paged: string[] = [];
    let token: string | undefined;
    do {
      const page = await client().voices.search({ pageSize: 4, nextPageToken: token });
      expect(page.totalCount).toBe(native.voices.length);
      paged.push(...page.voices.map((v) => v.voiceId));
      token = page.hasMore ? (page.nextPageToken ?? undefined) : undefined;
    } while (token);
    expect(paged).toEqual(native.voices.map((v) => v.id));
  });
});

describe('speech-to-text', () => {
  it('convert with ElevenLabs\u2019 model name: the words, timed, with spacing between; billed per millisecond of audio', async () => {
    const s = await speech(FOX);
    const before = await h.balanceMicros();
    const result = (await client().speechToText.convert({
      file: new Blob([new Uint8Array(s.wav)], { type: 'audio/wav' }),
      modelId: 'scribe_v1',
      languageCode: 'en',
    })) as { text: string; languageCode: string; words: { text: string; type: string; start?: number; end?: number }[] };
    expect(wer(FOX, result.text)).toBeLessThanOrEqual(0.25);
    expect(result.languageCode).toBe('en');
    const words = result.words.filter((w) => w.type === 'word');
    expect(words.map((w) => w.text).join(' ')).toBe(result.text);
    expect(result.words.filter((w) => w.type === 'spacing')).toHaveLength(words.length - 1);
    expect(before - (await h.balanceMicros())).toBe(audioCost(Math.round((s.samples.length * 1000) / 16000)));
  });
});
