// Route tests of POST /tts/bytes, POST /tts/sse and POST /v1/audio/speech, happy paths, over
// real HTTP: the real gateway runtime (test/support/gateway-harness.ts) on a throw-away
// database (SQLite, or PostgreSQL with TEST_DB=postgresql) with the local engines flite and
// espeak-ng as the models local-flite and local-espeak. Every audio answer is decoded and
// compared with what the engine itself makes of the same text.
// Errors: tts.errors.test.ts. Official clients, intelligibility, concurrency: tts.clients.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanMpegFrames } from '../audio/mp3-frames.ts';
import { parseWav, type ParsedWav } from '../audio/wav.ts';
import { newId } from '../../server/db/ids.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  BYTES_PER_SAMPLE,
  ESPEAK_PRICE,
  FLITE_PRICE,
  FOX,
  billingOf,
  bytesOf,
  checkTtsEvents,
  codePoints,
  costOf,
  decodeRaw,
  expectSpeechLevel,
  expectWithin,
  natural,
  post,
  requestId,
  rms,
  sseData,
  startTtsGateway,
  ttsBody,
  usd,
  type Encoding,
} from '../../test/support/tts-routes.ts';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startTtsGateway();
});

afterAll(async () => {
  await h?.close();
});

const ENCODINGS: Encoding[] = ['pcm_s16le', 'pcm_f32le', 'pcm_mulaw', 'pcm_alaw'];
const WAV_FORMAT_CODE: Record<Encoding, number> = { pcm_s16le: 1, pcm_f32le: 3, pcm_mulaw: 7, pcm_alaw: 6 };
const prisma = () => h.testDb.db.prisma;

/** Signal-to-noise ratio of `x` against the reference `ref`, in dB, over their common length. */
function snrDb(ref: Float32Array, x: Float32Array): number {
  const n = Math.min(ref.length, x.length);
  let s = 0;
  let e = 0;
  for (let i = 0; i < n; i++) {
    s += ref[i]! * ref[i]!;
    e += (ref[i]! - x[i]!) ** 2;
  }
  return e === 0 ? Infinity : 10 * Math.log10(s / e);
}

/** The lowest SNR a correct encoding of speech keeps against 16-bit PCM. */
const MIN_SNR: Record<Encoding, number> = { pcm_s16le: 90, pcm_f32le: 80, pcm_mulaw: 25, pcm_alaw: 25 };

/** The audio bytes of a WAV file (its data chunk, without a pad byte). */
const wavData = (bytes: Buffer, w: ParsedWav) => bytes.subarray(w.dataOffset, w.dataOffset + w.dataByteLength);

/** A whole-file WAV from the batch route: exact sizes in the header, mono, the asked format. */
function checkBatchWav(bytes: Buffer, rate: number, encoding: Encoding): ParsedWav {
  const w = parseWav(bytes);
  expect({ sampleRate: w.sampleRate, format: w.format, channels: w.channels, sizeUnknown: w.sizeUnknown, truncated: w.truncated }).toEqual({
    sampleRate: rate,
    format: encoding,
    channels: 1,
    sizeUnknown: false,
    truncated: false,
  });
  expect(bytes.toString('latin1', 0, 4)).toBe('RIFF');
  expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8);
  expect(bytes.readUInt16LE(20)).toBe(WAV_FORMAT_CODE[encoding]);
  expect(bytes.readUInt32LE(28)).toBe(rate * BYTES_PER_SAMPLE[encoding]);
  // The data chunk's declared size is exactly the sample bytes, plus a pad byte when odd.
  expect(bytes.readUInt32LE(w.dataOffset - 4)).toBe(w.dataByteLength);
  expect(bytes.length).toBe(w.dataOffset + w.dataByteLength + (w.dataByteLength % 2));
  return w;
}

/** MP3 bit rates the MPEG versions can carry: MPEG-2.5 (8 kHz) stops at 64 kb/s in LAME, MPEG-2 at 160. */
const mp3Ceiling = (rate: number) => (rate >= 32000 ? 320000 : rate >= 16000 ? 160000 : 64000);

describe('POST /tts/bytes: batch output in every container and encoding', () => {
  const fox = () => natural('flite', 'slt', FOX);

  it('wav pcm_s16le at the engine rate (16 kHz) is the engine audio, sample for sample', async () => {
    const res = await post(h, '/tts/bytes', ttsBody());
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const w = checkBatchWav(await bytesOf(res), 16000, 'pcm_s16le');
    const ref = fox();
    expect(w.frameCount).toBe(ref.samples.length);
    let maxDiff = 0;
    for (let i = 0; i < ref.samples.length; i++) maxDiff = Math.max(maxDiff, Math.abs(w.samples[i]! - ref.samples[i]!));
    expect(maxDiff).toBeLessThanOrEqual(1 / 32768);
  });

  describe.each([8000, 22050, 48000])('at %i Hz', (rate) => {
    let reference: Float32Array; // wav pcm_s16le at this rate

    beforeAll(async () => {
      const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'wav', sample_rate: rate, encoding: 'pcm_s16le' } }));
      expect(res.status).toBe(200);
      reference = parseWav(await bytesOf(res)).samples;
    });

    it.each(ENCODINGS)('wav %s: header, duration and samples', async (encoding) => {
      const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'wav', sample_rate: rate, encoding } }));
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/wav');
      const bytes = await bytesOf(res);
      const w = checkBatchWav(bytes, rate, encoding);
      expectWithin(w.frameCount / rate, fox().seconds, 0.2);
      expectSpeechLevel(w.samples);
      // The file's samples, read with an independent decoder, are the same audio as 16-bit PCM.
      const independent = decodeRaw(wavData(bytes, w), encoding);
      expect(independent.length).toBe(w.frameCount);
      expect(snrDb(reference, independent)).toBeGreaterThanOrEqual(MIN_SNR[encoding]);
      expect(Math.abs(independent.length - reference.length)).toBe(0);
    });

    it.each(ENCODINGS)('raw %s: headerless samples, the same as the wav data', async (encoding) => {
      const format = { sample_rate: rate, encoding };
      const [rawRes, wavRes] = await Promise.all([
        post(h, '/tts/bytes', ttsBody({ output_format: { container: 'raw', ...format } })),
        post(h, '/tts/bytes', ttsBody({ output_format: { container: 'wav', ...format } })),
      ]);
      expect([rawRes.status, wavRes.status]).toEqual([200, 200]);
      expect(rawRes.headers.get('content-type')).toBe('application/octet-stream');
      const raw = await bytesOf(rawRes);
      const wavBytes = await bytesOf(wavRes);
      expect(raw.length % BYTES_PER_SAMPLE[encoding]).toBe(0);
      expect(raw.subarray(0, 4).toString('latin1')).not.toBe('RIFF');
      const samples = decodeRaw(raw, encoding);
      expectWithin(samples.length / rate, fox().seconds, 0.2);
      expectSpeechLevel(samples);
      expect(snrDb(reference, samples)).toBeGreaterThanOrEqual(MIN_SNR[encoding]);
      expect(raw.equals(wavData(wavBytes, parseWav(wavBytes)))).toBe(true);
    });
  });

  it.each([
    [8000, 32000],
    [16000, 64000],
    [22050, 96000],
    [24000, 128000],
    [44100, 320000],
    [48000, 192000],
  ])('mp3 at %i Hz, %i b/s: every frame is MPEG layer III mono at that rate and bit rate', async (rate, bitRate) => {
    const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'mp3', sample_rate: rate, bit_rate: bitRate } }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    const mp3 = scanMpegFrames(await bytesOf(res));
    expect(mp3.frames.length).toBeGreaterThan(10);
    expect(mp3.trailingBytes).toBe(0);
    expect(new Set(mp3.frames.map((f) => `${f.layer}/${f.channels}/${f.sampleRate}/${f.bitRate}`))).toEqual(new Set([`3/1/${rate}/${bitRate}`]));
    // The encoder adds up to two frames of delay and padding.
    expectWithin(mp3.durationSeconds, fox().seconds, 0.2);
  });

  it.each([
    [8000, 320000],
    [22050, 320000],
    [48000, 32000],
  ])('mp3 at %i Hz asked at %i b/s is encoded at what MPEG allows at that rate', async (rate, bitRate) => {
    const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'mp3', sample_rate: rate, bit_rate: bitRate } }));
    expect(res.status).toBe(200);
    const mp3 = scanMpegFrames(await bytesOf(res));
    expect(mp3.trailingBytes).toBe(0);
    expect(new Set(mp3.frames.map((f) => f.bitRate))).toEqual(new Set([Math.min(bitRate, mp3Ceiling(rate))]));
    expect(new Set(mp3.frames.map((f) => f.sampleRate))).toEqual(new Set([rate]));
  });

  it('mp3 without bit_rate is 128 kb/s', async () => {
    const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'mp3', sample_rate: 44100 } }));
    expect(res.status).toBe(200);
    const mp3 = scanMpegFrames(await bytesOf(res));
    expect(new Set(mp3.frames.map((f) => f.bitRate))).toEqual(new Set([128000]));
  });

  it('wav without encoding is pcm_s16le', async () => {
    const res = await post(h, '/tts/bytes', ttsBody({ output_format: { container: 'wav', sample_rate: 24000 } }));
    expect(res.status).toBe(200);
    checkBatchWav(await bytesOf(res), 24000, 'pcm_s16le');
  });

  it('espeak-ng (22.05 kHz) to 24 kHz wav and 8 kHz mu-law raw: its natural duration, speech level', async () => {
    const ref = natural('espeak-ng', 'en-us', FOX);
    const body = { model_id: 'local-espeak', voice: { mode: 'id', id: 'espeak-en-us-m' } };
    const wavRes = await post(h, '/tts/bytes', ttsBody({ ...body, output_format: { container: 'wav', sample_rate: 24000, encoding: 'pcm_s16le' } }));
    expect(wavRes.status).toBe(200);
    const w = checkBatchWav(await bytesOf(wavRes), 24000, 'pcm_s16le');
    expectWithin(w.frameCount / 24000, ref.seconds, 0.2);
    expectSpeechLevel(w.samples);
    const rawRes = await post(h, '/tts/bytes', ttsBody({ ...body, output_format: { container: 'raw', sample_rate: 8000, encoding: 'pcm_mulaw' } }));
    expect(rawRes.status).toBe(200);
    const samples = decodeRaw(await bytesOf(rawRes), 'pcm_mulaw');
    expectWithin(samples.length / 8000, ref.seconds, 0.2);
    expectSpeechLevel(samples);
  });

  it('espeak-ng at its own rate (22050 Hz) is the engine audio, sample for sample', async () => {
    const ref = natural('espeak-ng', 'en-us', FOX);
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({
        model_id: 'local-espeak',
        voice: { mode: 'id', id: 'espeak-en-us-m' },
        output_format: { container: 'wav', sample_rate: 22050, encoding: 'pcm_s16le' },
      }),
    );
    expect(res.status).toBe(200);
    const w = checkBatchWav(await bytesOf(res), 22050, 'pcm_s16le');
    expect(w.frameCount).toBe(ref.samples.length);
    expect(snrDb(ref.samples, w.samples)).toBeGreaterThan(90);
  });

  it('a French espeak voice speaks French (language from the voice)', async () => {
    const text = 'Bonjour, je suis une voix française.';
    const ref = natural('espeak-ng', 'fr+f2', text);
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({
        model_id: 'local-espeak',
        transcript: text,
        voice: { mode: 'id', id: 'espeak-fr-f' },
        output_format: { container: 'wav', sample_rate: 22050 },
      }),
    );
    expect(res.status).toBe(200);
    const w = parseWav(await bytesOf(res));
    expect(w.frameCount).toBe(ref.samples.length);
    expect(snrDb(ref.samples, w.samples)).toBeGreaterThan(90);
  });

  it('generation_config on batch: speed 0.6 and 1.5 change the duration, volume 0.5 halves the level', async () => {
    const base = fox();
    const at = async (generation_config: object) => {
      const res = await post(h, '/tts/bytes', ttsBody({ generation_config, output_format: { container: 'wav', sample_rate: 16000 } }));
      expect(res.status).toBe(200);
      return parseWav(await bytesOf(res));
    };
    const slow = await at({ speed: 0.6 });
    const fast = await at({ speed: 1.5 });
    expectWithin(slow.frameCount / 16000, base.seconds / 0.6, 0.2);
    expectWithin(fast.frameCount / 16000, base.seconds / 1.5, 0.2);
    const quiet = await at({ volume: 0.5 });
    expect(quiet.frameCount).toBe(base.samples.length);
    expectWithin(rms(quiet.samples) / rms(base.samples), 0.5, 0.02);
    const loud = await at({ volume: 2, speed: 1 });
    expect(rms(loud.samples) / rms(base.samples)).toBeGreaterThan(1.5);
    expect(loud.samples.every((v) => Math.abs(v) <= 1)).toBe(true);
  });
});

describe('POST /tts/bytes with stream: true', () => {
  const LONG = 'First, a short sentence. Then a second one follows it, somewhat longer than the first. And a third sentence closes the paragraph nicely.';

  it.each([
    ['local-flite', 'flite-slt', 16000, 'pcm_s16le'],
    ['local-flite', 'flite-rms', 44100, 'pcm_f32le'],
    ['local-espeak', 'espeak-en-us-m', 8000, 'pcm_alaw'],
    ['local-espeak', 'espeak-en-us-f', 48000, 'pcm_mulaw'],
  ] as const)('%s (%s) wav at %i Hz %s: streaming header sizes, the same samples as batch', async (model_id, voice, rate, encoding) => {
    const body = ttsBody({ model_id, transcript: LONG, voice: { mode: 'id', id: voice }, output_format: { container: 'wav', sample_rate: rate, encoding } });
    const [streamed, batch] = await Promise.all([post(h, '/tts/bytes', { ...body, stream: true }), post(h, '/tts/bytes', body)]);
    expect([streamed.status, batch.status]).toEqual([200, 200]);
    expect(streamed.headers.get('content-type')).toBe('audio/wav');
    // Progressive bytes: no content-length, the size is not known when the header leaves.
    expect(streamed.headers.get('content-length')).toBeNull();
    const bytes = await bytesOf(streamed);
    expect(bytes.readUInt32LE(4)).toBe(0xffffffff);
    const w = parseWav(bytes);
    expect(bytes.readUInt32LE(w.dataOffset - 4)).toBe(0xffffffff);
    expect({ sampleRate: w.sampleRate, format: w.format, channels: w.channels, sizeUnknown: w.sizeUnknown }).toEqual({
      sampleRate: rate,
      format: encoding,
      channels: 1,
      sizeUnknown: true,
    });
    const batchBytes = await bytesOf(batch);
    const b = checkBatchWav(batchBytes, rate, encoding);
    expect(w.dataByteLength).toBe(b.dataByteLength);
    expect(wavData(bytes, w).equals(wavData(batchBytes, b))).toBe(true);
    expectSpeechLevel(w.samples);
  });

  it('raw: the same bytes as batch', async () => {
    const body = ttsBody({ transcript: LONG, output_format: { container: 'raw', sample_rate: 22050, encoding: 'pcm_s16le' } });
    const [streamed, batch] = await Promise.all([post(h, '/tts/bytes', { ...body, stream: true }), post(h, '/tts/bytes', body)]);
    expect([streamed.status, batch.status]).toEqual([200, 200]);
    const s = await bytesOf(streamed);
    expect(s.equals(await bytesOf(batch))).toBe(true);
    expectWithin(s.length / 2 / 22050, natural('flite', 'slt', LONG).seconds, 0.2);
  });
});

describe('POST /tts/sse', () => {
  it.each([
    ['wav', 16000],
    ['raw', 44100],
  ] as const)('%s at %i Hz in every encoding: chunk events then one done; the audio decodes and equals batch', async (container, rate) => {
    for (const encoding of ENCODINGS) {
      const output_format = { container, sample_rate: rate, encoding };
      const [sse, batch] = await Promise.all([post(h, '/tts/sse', ttsBody({ output_format })), post(h, '/tts/bytes', ttsBody({ output_format }))]);
      expect([sse.status, batch.status]).toEqual([200, 200]);
      expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const { audio, events } = checkTtsEvents(await sse.text());
      for (const e of events.slice(0, -1)) expect(e).toMatchObject({ type: 'chunk', done: false, status_code: 206 });
      const batchBytes = await bytesOf(batch);
      if (container === 'wav') {
        const w = parseWav(audio);
        expect({ sampleRate: w.sampleRate, format: w.format, sizeUnknown: w.sizeUnknown }).toEqual({ sampleRate: rate, format: encoding, sizeUnknown: true });
        expect(wavData(audio, w).equals(wavData(batchBytes, parseWav(batchBytes)))).toBe(true);
        expectWithin(w.frameCount / rate, natural('flite', 'slt', FOX).seconds, 0.2);
        expectSpeechLevel(w.samples);
      } else {
        expect(audio.equals(batchBytes)).toBe(true);
        const samples = decodeRaw(audio, encoding);
        expectWithin(samples.length / rate, natural('flite', 'slt', FOX).seconds, 0.2);
        expectSpeechLevel(samples);
      }
    }
  });

  it('"stream" is ignored: stream false still gives events', async () => {
    const res = await post(h, '/tts/sse', ttsBody({ stream: false, output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' } }));
    expect(res.status).toBe(200);
    const { audio } = checkTtsEvents(await res.text());
    expect(audio.length / 2).toBe(natural('flite', 'slt', FOX).samples.length);
  });

  it('a long multi-sentence transcript streams sentence by sentence: the first chunk is the first sentence alone', async () => {
    const first = 'Good morning.';
    const rest = Array.from({ length: 8 }, (_, i) => `This is sentence number ${i + 2} of a long answer, spoken one after another.`).join(' ');
    const transcript = `${first} ${rest}`;
    const res = await post(h, '/tts/sse', ttsBody({ transcript, output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' } }));
    expect(res.status).toBe(200);
    const { chunks, audio } = checkTtsEvents(await res.text());
    expect(chunks.length).toBeGreaterThan(1);
    // The first audio left when the first sentence was synthesised, before the rest existed:
    // its first 100 ms alone (so the first event is small), then the rest of that sentence.
    const firstSentence = natural('flite', 'slt', `${first} `);
    expect(chunks[0]!.length / 2).toBe(1600);
    expect((chunks[0]!.length + chunks[1]!.length) / 2).toBe(firstSentence.samples.length);
    const whole = natural('flite', 'slt', transcript);
    expectWithin(audio.length / 2 / 16000, whole.seconds, 0.2);
    expect(chunks[0]!.length / audio.length).toBeLessThan(0.2);
  });

  it('espeak-ng streams its output as it is made (several chunks)', async () => {
    const transcript = 'Streaming speech from espeak arrives in pieces while the engine is still speaking. '.repeat(4);
    const res = await post(
      h,
      '/tts/sse',
      ttsBody({
        model_id: 'local-espeak',
        transcript,
        voice: { mode: 'id', id: 'espeak-en-gb-m' },
        output_format: { container: 'raw', sample_rate: 22050, encoding: 'pcm_s16le' },
      }),
    );
    expect(res.status).toBe(200);
    const { chunks, audio } = checkTtsEvents(await res.text());
    expect(chunks.length).toBeGreaterThan(1);
    const ref = natural('espeak-ng', 'en-gb', transcript);
    expect(audio.length / 2).toBe(ref.samples.length);
  });
});

describe('billing: per Unicode code point of the submitted transcript, debited once, in the headers', () => {
  async function billed(path: string, body: object, chars: number, price: bigint, route: string, model: string) {
    const id = requestId('bill');
    const before = await h.balanceMicros();
    const res = await post(h, path, body, { requestId: id });
    expect(res.status).toBe(200);
    const cost = costOf(chars, price);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    await res.arrayBuffer();
    const after = await h.balanceMicros();
    expect(after).toBe(before - cost);
    expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(usd(after));
    const { ledger, usage } = await billingOf(h, id);
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ orgId: h.orgId, kind: 'usage', amountMicros: -cost, balanceAfterMicros: after, apiKeyId: h.keyId, requestId: id });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({
      orgId: h.orgId,
      apiKeyId: h.keyId,
      modelId: model,
      modality: 'tts',
      route,
      characters: chars,
      costMicros: cost,
      inputTokens: 0,
      outputTokens: 0,
    });
    return cost;
  }

  // 'é' precomposed is one code point; 'e\u0301' two; each emoji one code point but two UTF-16 units.
  const transcript = 'Caf\u00e9 cr\u00e8me, re\u0301sume\u0301 \u{1F600} and \u{1F680} \u2014 na\u00efve! Hello \u4e16\u754c.';

  it('the transcript counts code points, not UTF-16 units or bytes', () => {
    expect(codePoints(transcript)).toBe(47);
    expect(transcript.length).toBe(49);
    expect(Buffer.byteLength(transcript)).toBe(64);
  });

  it.each([
    ['/tts/bytes', 'tts.bytes', { output_format: { container: 'wav', sample_rate: 16000 } }],
    ['/tts/bytes', 'tts.bytes', { stream: true, output_format: { container: 'raw', sample_rate: 8000, encoding: 'pcm_mulaw' } }],
    ['/tts/bytes', 'tts.bytes', { output_format: { container: 'mp3', sample_rate: 22050, bit_rate: 64000 } }],
    ['/tts/sse', 'tts.sse', { output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' } }],
  ])('flite %s %j', async (path, route, extra) => {
    await billed(path, ttsBody({ transcript, ...extra }), 47, FLITE_PRICE, route, 'local-flite');
  });

  it('espeak-ng: a per-character price that is not a whole micro-dollar is rounded up once per request', async () => {
    const t = 'One two three \u{1F3B5}';
    const cost = await billed(
      '/tts/bytes',
      ttsBody({ model_id: 'local-espeak', transcript: t, voice: { mode: 'id', id: 'espeak-en-us-f' } }),
      15,
      ESPEAK_PRICE,
      'tts.bytes',
      'local-espeak',
    );
    expect(cost).toBe(16n); // 15 x 1.000001 micro-USD = 15.000015, rounded up
  });

  it('/v1/audio/speech bills the input the same way', async () => {
    await billed(
      '/v1/audio/speech',
      { model: 'local-flite', input: transcript, voice: 'flite-slt', response_format: 'wav' },
      47,
      FLITE_PRICE,
      'audio.speech',
      'local-flite',
    );
  });

  it('a one-character transcript costs one character', async () => {
    await billed('/tts/bytes', ttsBody({ transcript: 'A' }), 1, FLITE_PRICE, 'tts.bytes', 'local-flite');
  });
});

describe('pronunciation dictionaries', () => {
  async function dict(entries: { grapheme: string; alias?: string; phoneme?: string; caseSensitive?: boolean }[], orgId = h.orgId): Promise<string> {
    const id = newId('pdict');
    await prisma().pronunciationDict.create({
      data: {
        id,
        orgId,
        name: `dict ${id}`,
        entries: {
          create: entries.map((e, position) => ({
            id: newId('pent'),
            position,
            grapheme: e.grapheme,
            alias: e.alias ?? null,
            phoneme: e.phoneme ?? null,
            caseSensitive: e.caseSensitive ?? false,
          })),
        },
      },
    });
    return id;
  }

  const NASA = 'NASA launched it.';
  const EXPANDED = 'National Aeronautics and Space Administration launched it.';

  it('an alias entry replaces the word before synthesis: the audio is the expanded text', async () => {
    const dictId = await dict([{ grapheme: 'NASA', alias: 'National Aeronautics and Space Administration' }]);
    const output_format = { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' };
    const [plain, expanded] = await Promise.all([
      post(h, '/tts/bytes', ttsBody({ transcript: NASA, output_format })),
      post(h, '/tts/bytes', ttsBody({ transcript: NASA, output_format, pronunciation_dict_id: dictId })),
    ]);
    expect([plain.status, expanded.status]).toEqual([200, 200]);
    const plainSamples = (await bytesOf(plain)).length / 2;
    const expandedBytes = await bytesOf(expanded);
    expect(plainSamples).toBe(natural('flite', 'slt', NASA).samples.length);
    expect(expandedBytes.length / 2).toBe(natural('flite', 'slt', EXPANDED).samples.length);
    expect(expandedBytes.length / 2 / plainSamples).toBeGreaterThan(2);
  });

  it('billing counts the submitted transcript, not the expanded one', async () => {
    const dictId = await dict([{ grapheme: 'NASA', alias: 'National Aeronautics and Space Administration' }]);
    const id = requestId('dict-bill');
    const res = await post(h, '/tts/bytes', ttsBody({ transcript: NASA, pronunciation_dict_id: dictId }), { requestId: id });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const cost = costOf(codePoints(NASA), FLITE_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const { usage } = await billingOf(h, id);
    expect(usage[0]).toMatchObject({ characters: codePoints(NASA), costMicros: cost });
  });

  it('the dictionary applies on /tts/sse and /v1/audio/speech too', async () => {
    const dictId = await dict([{ grapheme: 'NASA', alias: 'National Aeronautics and Space Administration' }]);
    const sse = await post(
      h,
      '/tts/sse',
      ttsBody({ transcript: NASA, pronunciation_dict_id: dictId, output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' } }),
    );
    expect(sse.status).toBe(200);
    expect(checkTtsEvents(await sse.text()).audio.length / 2).toBe(natural('flite', 'slt', EXPANDED).samples.length);
    const speech = await post(h, '/v1/audio/speech', {
      model: 'local-flite',
      input: NASA,
      voice: 'flite-slt',
      response_format: 'pcm',
      pronunciation_dict_id: dictId,
    });
    expect(speech.status).toBe(200);
    expectWithin((await bytesOf(speech)).length / 2 / 24000, natural('flite', 'slt', EXPANDED).seconds, 0.05);
  });

  it('case-insensitive by default; a case-sensitive entry leaves other spellings alone', async () => {
    const insensitive = await dict([{ grapheme: 'nasa', alias: 'National Aeronautics and Space Administration' }]);
    const sensitive = await dict([{ grapheme: 'nasa', alias: 'National Aeronautics and Space Administration', caseSensitive: true }]);
    const output_format = { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' };
    const a = await post(h, '/tts/bytes', ttsBody({ transcript: NASA, output_format, pronunciation_dict_id: insensitive }));
    const b = await post(h, '/tts/bytes', ttsBody({ transcript: NASA, output_format, pronunciation_dict_id: sensitive }));
    expect((await bytesOf(a)).length / 2).toBe(natural('flite', 'slt', EXPANDED).samples.length);
    expect((await bytesOf(b)).length / 2).toBe(natural('flite', 'slt', NASA).samples.length);
  });

  it('phoneme entries reach espeak-ng as inline phonemes [[...]]', async () => {
    const text = 'I like the WWW format.';
    const dictId = await dict([{ grapheme: 'WWW', phoneme: 'wEb' }]);
    const body = ttsBody({
      model_id: 'local-espeak',
      transcript: text,
      voice: { mode: 'id', id: 'espeak-en-us-m' },
      output_format: { container: 'wav', sample_rate: 22050 },
    });
    const [plain, withDict] = await Promise.all([post(h, '/tts/bytes', body), post(h, '/tts/bytes', { ...body, pronunciation_dict_id: dictId })]);
    expect([plain.status, withDict.status]).toEqual([200, 200]);
    const p = parseWav(await bytesOf(plain));
    const d = parseWav(await bytesOf(withDict));
    // Without the dictionary espeak spells W-W-W; with it, it says the phonemes, like espeak-ng given them inline.
    expect(p.frameCount).toBe(natural('espeak-ng', 'en-us', text).samples.length);
    const inline = natural('espeak-ng', 'en-us', 'I like the [[wEb]] format.');
    expect(d.frameCount).toBe(inline.samples.length);
    expect(snrDb(inline.samples, d.samples)).toBeGreaterThan(90);
    expect(p.frameCount - d.frameCount).toBeGreaterThan(0.3 * 22050);
  });

  it('flite takes no phonemes: a phoneme-only entry leaves the word as written', async () => {
    const dictId = await dict([{ grapheme: 'fox', phoneme: 'dZIf' }]);
    const output_format = { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' };
    const res = await post(h, '/tts/bytes', ttsBody({ output_format, pronunciation_dict_id: dictId }));
    expect(res.status).toBe(200);
    const bytes = await bytesOf(res);
    const ref = natural('flite', 'slt', FOX);
    expect(bytes.length / 2).toBe(ref.samples.length);
    expect(snrDb(ref.samples, decodeRaw(bytes, 'pcm_s16le'))).toBeGreaterThan(90);
  });
});

describe('POST /v1/audio/speech (OpenAI-shaped)', () => {
  const speech = (body: object, headers?: Record<string, string>) =>
    post(h, '/v1/audio/speech', { model: 'local-flite', input: FOX, voice: 'flite-slt', ...body }, { headers });

  it('response_format wav: 24 kHz 16-bit mono WAV', async () => {
    const res = await speech({ response_format: 'wav' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const w = parseWav(await bytesOf(res));
    expect({ sampleRate: w.sampleRate, format: w.format, channels: w.channels }).toEqual({ sampleRate: 24000, format: 'pcm_s16le', channels: 1 });
    expectWithin(w.frameCount / 24000, natural('flite', 'slt', FOX).seconds, 0.2);
    expectSpeechLevel(w.samples);
  });

  it('response_format pcm: raw 24 kHz s16le, no header', async () => {
    const res = await speech({ response_format: 'pcm' });
    expect(res.status).toBe(200);
    const bytes = await bytesOf(res);
    expect(bytes.subarray(0, 4).toString('latin1')).not.toBe('RIFF');
    expect(bytes.length % 2).toBe(0);
    const samples = decodeRaw(bytes, 'pcm_s16le');
    expect(samples.length).toBe(Math.round((natural('flite', 'slt', FOX).samples.length * 24000) / 16000));
    expectSpeechLevel(samples);
  });

  it.each([[{ response_format: 'mp3' }], [{}]])('%j: 24 kHz mono MP3 at 128 kb/s', async (body) => {
    const res = await speech(body);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    const mp3 = scanMpegFrames(await bytesOf(res));
    expect(mp3.frames.length).toBeGreaterThan(10);
    expect(mp3.trailingBytes).toBe(0);
    expect(new Set(mp3.frames.map((f) => `${f.sampleRate}/${f.bitRate}/${f.channels}`))).toEqual(new Set(['24000/128000/1']));
    expectWithin(mp3.durationSeconds, natural('flite', 'slt', FOX).seconds, 0.2);
  });

  it('voice as {id}, an espeak model, speed 1.5: shorter audio', async () => {
    const res = await post(h, '/v1/audio/speech', { model: 'local-espeak', input: FOX, voice: { id: 'espeak-en-us-m' }, response_format: 'pcm', speed: 1.5 });
    expect(res.status).toBe(200);
    const seconds = (await bytesOf(res)).length / 2 / 24000;
    expectWithin(seconds, natural('espeak-ng', 'en-us', FOX).seconds / 1.5, 0.2);
  });

  it.each(['wav', 'pcm'] as const)('stream_format sse with %s: speech.audio.delta events, then speech.audio.done with usage', async (format) => {
    const res = await speech({ response_format: format, stream_format: 'sse' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(costOf(codePoints(FOX), FLITE_PRICE)));
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as { type: string; audio?: string; usage?: unknown });
    const last = events.at(-1)!;
    expect(last).toEqual({ type: 'speech.audio.done', usage: { input_tokens: codePoints(FOX), output_tokens: 0, total_tokens: codePoints(FOX) } });
    const deltas = events.slice(0, -1);
    expect(deltas.length).toBeGreaterThan(0);
    for (const d of deltas) {
      expect(d.type).toBe('speech.audio.delta');
      expect(Buffer.from(d.audio!, 'base64').length).toBeGreaterThan(0);
    }
    const audio = Buffer.concat(deltas.map((d) => Buffer.from(d.audio!, 'base64')));
    const samples = format === 'wav' ? parseWav(audio).samples : decodeRaw(audio, 'pcm_s16le');
    if (format === 'wav') expect(parseWav(audio).sampleRate).toBe(24000);
    expectWithin(samples.length / 24000, natural('flite', 'slt', FOX).seconds, 0.2);
    expectSpeechLevel(samples);
  });
});
