// The TTS routes as real clients see them, over real HTTP against the real gateway runtime
// (throw-away SQLite or PostgreSQL database) and the local engines: the official OpenAI and
// Cartesia SDKs, intelligibility of the audio to a speech recogniser (pocketsphinx), ten
// concurrent streams, and clients that go away mid-stream (no engine process left behind).
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Cartesia from '@cartesia/cartesia-js';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { scanMpegFrames } from '../audio/mp3-frames.ts';
import { parseWav } from '../audio/wav.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  ESPEAK_PRICE,
  FLITE_PRICE,
  FOX,
  billingOf,
  bytesOf,
  checkTtsEvents,
  childPids,
  codePoints,
  costOf,
  decodeRaw,
  expectSpeechLevel,
  expectWithin,
  natural,
  post,
  requestId,
  sseData,
  sseReader,
  startTtsGateway,
  ttsBody,
  usd,
} from '../../test/support/tts-routes.ts';

let h: GatewayHarness;
let scratch: string;

beforeAll(async () => {
  h = await startTtsGateway();
  scratch = mkdtempSync(join(tmpdir(), 'tts-clients-test-'));
});

afterAll(async () => {
  await h?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Max absolute difference between two sample arrays of the same length. */
function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe('the official openai client: audio.speech.create', () => {
  const client = () => new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });

  it('response_format wav: a 24 kHz WAV of the engine\u2019s speech', async () => {
    const res = await client().audio.speech.create({ model: 'local-flite', voice: 'flite-slt', input: FOX, response_format: 'wav' });
    expect(res.status).toBe(200);
    const w = parseWav(Buffer.from(await res.arrayBuffer()));
    expect({ sampleRate: w.sampleRate, format: w.format, channels: w.channels }).toEqual({ sampleRate: 24000, format: 'pcm_s16le', channels: 1 });
    expect(w.frameCount).toBe(Math.round((natural('flite', 'slt', FOX).samples.length * 24000) / 16000));
    expectSpeechLevel(w.samples);
  });

  it('response_format pcm, an espeak voice, speed 0.75, instructions (ignored)', async () => {
    const res = await client().audio.speech.create({
      model: 'local-espeak',
      voice: 'espeak-en-gb-m',
      input: FOX,
      response_format: 'pcm',
      speed: 0.75,
      instructions: 'Speak calmly.',
    });
    const samples = decodeRaw(Buffer.from(await res.arrayBuffer()), 'pcm_s16le');
    expectWithin(samples.length / 24000, natural('espeak-ng', 'en-gb', FOX).seconds / 0.75, 0.2);
    expectSpeechLevel(samples);
  });

  it('default response_format (mp3): MPEG frames at 24 kHz', async () => {
    const res = await client().audio.speech.create({ model: 'local-flite', voice: 'flite-rms', input: FOX });
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    const mp3 = scanMpegFrames(Buffer.from(await res.arrayBuffer()));
    expect(mp3.frames.length).toBeGreaterThan(10);
    expect(mp3.trailingBytes).toBe(0);
    expect(new Set(mp3.frames.map((f) => f.sampleRate))).toEqual(new Set([24000]));
    expectWithin(mp3.durationSeconds, natural('flite', 'rms', FOX).seconds, 0.2);
  });

  it('stream_format sse: speech.audio.delta events that decode, then speech.audio.done', async () => {
    const res = await client().audio.speech.create({ model: 'local-flite', voice: 'flite-slt', input: FOX, response_format: 'pcm', stream_format: 'sse' });
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as { type: string; audio?: string });
    expect(events.at(-1)?.type).toBe('speech.audio.done');
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.audio!, 'base64')));
    expect(events.slice(0, -1).every((e) => e.type === 'speech.audio.delta')).toBe(true);
    expect(audio.length / 2).toBe(Math.round((natural('flite', 'slt', FOX).samples.length * 24000) / 16000));
  });

  it('an OpenAI voice name speaks with the model\u2019s default voice; a voice overriding the name by id wins', async () => {
    const { prisma } = h.testDb.db;
    const rms = natural('flite', 'rms', FOX).samples.length; // flite-rms: local-flite's featured voice
    for (const voice of ['alloy', 'marin'] as const) {
      const res = await client().audio.speech.create({ model: 'local-flite', voice, input: FOX, response_format: 'pcm' });
      expect(Buffer.from(await res.arrayBuffer()).length / 2).toBe(Math.round((rms * 24000) / 16000));
    }
    await prisma.voice.create({
      data: { id: 'echo', orgId: h.orgId, kind: 'library', name: 'Echo', language: 'en', description: '', gender: 'male', tags: [] },
    });
    await prisma.voiceProfile.create({ data: { id: 'vpr_echo_slt', voiceId: 'echo', modelId: 'local-flite', upstreamId: 'slt', status: 'ready' } });
    const res = await client().audio.speech.create({ model: 'local-flite', voice: 'echo', input: FOX, response_format: 'pcm' });
    expect(Buffer.from(await res.arrayBuffer()).length / 2).toBe(Math.round((natural('flite', 'slt', FOX).samples.length * 24000) / 16000));
  });

  it('errors surface as the SDK\u2019s typed errors with our code: opus -> 400, an unknown voice -> 404', async () => {
    const opus = await client()
      .audio.speech.create({ model: 'local-flite', voice: 'flite-slt', input: FOX, response_format: 'opus' })
      .catch((e: unknown) => e);
    expect(opus).toBeInstanceOf(OpenAI.BadRequestError);
    expect(opus).toMatchObject({ status: 400, code: 'invalid_request', param: 'response_format' });
    const unknown = await client()
      .audio.speech.create({ model: 'local-flite', voice: 'no-such-voice', input: FOX })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: 'voice_not_found', param: 'voice' });
  });
});

describe('the official @cartesia/cartesia-js client', () => {
  const client = () => new Cartesia({ baseURL: h.url, apiKey: h.key, maxRetries: 0 });

  it('voices.list: Cartesia\u2019s page shape, paged on by the SDK with starting_after through every voice GET /voices lists', async () => {
    const native = (await (await fetch(`${h.url}/voices?limit=200`, { headers: h.headers })).json()) as {
      voices: { id: string; gender: string; is_owner: boolean }[];
    };
    expect(native.voices.length).toBeGreaterThan(3);
    const first = await client().voices.list({ limit: 3 });
    expect(first.data.map((v) => [v.id, v.is_owner, v.access])).toEqual(
      native.voices.slice(0, 3).map((v) => [v.id, v.is_owner, v.is_owner ? 'private' : 'public']),
    );
    expect(first.data[0]).toMatchObject({ language: expect.any(String), created_at: expect.any(String) });
    const all: string[] = [];
    for await (const v of client().voices.list({ limit: 3 })) all.push(v.id);
    expect(all).toEqual(native.voices.map((v) => v.id));
    const feminine: string[] = [];
    for await (const v of client().voices.list({ limit: 100, gender: 'feminine' })) feminine.push(v.id);
    expect(feminine).toEqual(native.voices.filter((v) => v.gender === 'female').map((v) => v.id));
    expect(feminine.length).toBeGreaterThan(0);
  });

  it('tts.generate (POST /tts/bytes): wav, the engine\u2019s audio sample for sample', async () => {
    const res = await client().tts.generate({
      model_id: 'local-flite',
      transcript: FOX,
      voice: { mode: 'id', id: 'flite-slt' },
      language: 'en',
      output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: 16000 },
      generation_config: { speed: 1, volume: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(costOf(codePoints(FOX), FLITE_PRICE)));
    const w = parseWav(Buffer.from(await res.arrayBuffer()));
    expect(w.sampleRate).toBe(16000);
    expect(maxDiff(w.samples, natural('flite', 'slt', FOX).samples)).toBeLessThanOrEqual(1 / 32768);
  });

  it('tts.generate with the voice as a plain id string, raw pcm_f32le and mp3', async () => {
    const raw = await client().tts.generate({
      model_id: 'local-espeak',
      transcript: FOX,
      voice: 'espeak-en-us-f',
      output_format: { container: 'raw', encoding: 'pcm_f32le', sample_rate: 22050 },
    });
    const samples = decodeRaw(Buffer.from(await raw.arrayBuffer()), 'pcm_f32le');
    expect(samples.length).toBe(natural('espeak-ng', 'en-us+f3', FOX).samples.length);
    expectSpeechLevel(samples);
    const mp3 = await client().tts.generate({
      model_id: 'local-flite',
      transcript: FOX,
      voice: 'flite-slt',
      output_format: { container: 'mp3', bit_rate: 64000, sample_rate: 22050 },
    });
    const frames = scanMpegFrames(Buffer.from(await mp3.arrayBuffer()));
    expect(new Set(frames.frames.map((f) => `${f.sampleRate}/${f.bitRate}`))).toEqual(new Set(['22050/64000']));
  });

  it('tts.generateSSE (POST /tts/sse): typed chunk events, then done; the audio decodes', async () => {
    const stream = await client().tts.generateSSE({
      model_id: 'local-flite',
      transcript: `${FOX} ${FOX}`,
      voice: { mode: 'id', id: 'flite-rms' },
      context_id: 'ctx-1',
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
    });
    const events = [];
    for await (const e of stream) events.push(e);
    expect(events.at(-1)).toMatchObject({ type: 'done', done: true });
    const chunks = events.slice(0, -1);
    expect(chunks.length).toBeGreaterThan(1);
    const audio = Buffer.concat(
      chunks.map((e) => {
        expect(e).toMatchObject({ type: 'chunk', done: false, status_code: 206 });
        expect(typeof (e as { step_time?: unknown }).step_time).toBe('number');
        return Buffer.from((e as { data: string }).data, 'base64');
      }),
    );
    const samples = decodeRaw(audio, 'pcm_s16le');
    expectWithin(samples.length / 16000, natural('flite', 'rms', `${FOX} ${FOX}`).seconds, 0.2);
    expectSpeechLevel(samples);
  });

  it('errors arrive as the SDK\u2019s typed errors with our envelope', async () => {
    const notFound = await client()
      .tts.generate({
        model_id: 'local-flite',
        transcript: FOX,
        voice: 'nobody',
        output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: 16000 },
      })
      .catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(Cartesia.NotFoundError);
    expect((notFound as { status: number; error: unknown }).status).toBe(404);
    expect((notFound as { error: unknown }).error).toMatchObject({ error: { code: 'voice_not_found', param: 'voice.id' } });
    const mp3Stream = await client()
      .tts.generateSSE({
        model_id: 'local-flite',
        transcript: FOX,
        voice: 'flite-slt',
        output_format: { container: 'mp3', bit_rate: 128000, sample_rate: 44100 } as never,
      })
      .catch((e: unknown) => e);
    expect(mp3Stream).toBeInstanceOf(Cartesia.BadRequestError);
    expect((mp3Stream as { error: unknown }).error).toMatchObject({ error: { code: 'invalid_output_format', param: 'output_format.container' } });
  });
});

// ---------------------------------------------------------------------------------------

/** Transcribes a 16 kHz mono WAV with the pocketsphinx command line (Debian's, or pocketsphinx 5's). */
function recognise(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('pocketsphinx_continuous', ['-infile', file, '-logfn', '/dev/null'], { timeout: 120_000 }, (err, stdout) => {
      if (!err) return resolve(stdout.trim());
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return reject(err);
      execFile('pocketsphinx', ['single', file], { timeout: 120_000 }, (err2, out2) => {
        if (err2) return reject(err2);
        resolve(
          out2
            .trim()
            .split('\n')
            .map((l) => (JSON.parse(l) as { t: string }).t)
            .join(' '),
        );
      });
    });
  });
}

const words = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);

/** Word-level edit distance. */
function wordErrors(ref: string[], hyp: string[]): number {
  let prev = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const cur = [i];
    for (let j = 1; j <= hyp.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[hyp.length]!;
}

describe('intelligibility: flite audio from /tts/bytes (wav, 16 kHz) read back by pocketsphinx', () => {
  const SENTENCES = [
    'The weather today is sunny and warm.',
    'Please call me back after the meeting.',
    'I would like to order a large pizza.',
    'The train leaves the station at noon.',
    'She opened the door and walked inside.',
    'We need more time to finish the project.',
  ];

  it('gives the words back: word error rate at most 15 %', async () => {
    const files = await Promise.all(
      SENTENCES.map(async (transcript, i) => {
        const res = await post(h, '/tts/bytes', ttsBody({ transcript, output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' } }));
        expect(res.status).toBe(200);
        const file = join(scratch, `sentence-${i}.wav`);
        writeFileSync(file, await bytesOf(res));
        return file;
      }),
    );
    const heard: string[] = [];
    for (let i = 0; i < files.length; i += 2) heard.push(...(await Promise.all(files.slice(i, i + 2).map(recognise))));
    let errors = 0;
    let total = 0;
    for (const [i, s] of SENTENCES.entries()) {
      errors += wordErrors(words(s), words(heard[i]!));
      total += words(s).length;
    }
    expect(errors / total, `heard: ${JSON.stringify(heard)}`).toBeLessThanOrEqual(0.15);
    // The measure tells sentences apart: one sentence's audio against another's words is mostly wrong.
    expect(wordErrors(words(SENTENCES[1]!), words(heard[0]!)) / words(SENTENCES[1]!).length).toBeGreaterThan(0.5);
  }, 180_000);
});

describe('concurrency and disconnects', () => {
  const NUMBERS = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

  it('10 concurrent /tts/sse streams (flite and espeak) all complete, each with its own audio, each debited once', async () => {
    const jobs = NUMBERS.map((n, i) => {
      const transcript = `This is stream number ${n}, and it says ${'hello '.repeat(i + 1)}before it ends.`;
      const flite = i % 2 === 0;
      return {
        transcript,
        flite,
        id: requestId(`conc-${n}`),
        body: ttsBody({
          transcript,
          ...(flite ? {} : { model_id: 'local-espeak', voice: { mode: 'id', id: 'espeak-en-us-m' } }),
          output_format: { container: 'raw', sample_rate: flite ? 16000 : 22050, encoding: 'pcm_s16le' },
        }),
      };
    });
    const before = await h.balanceMicros();
    const results = await Promise.all(
      jobs.map(async (j) => {
        const res = await post(h, '/tts/sse', j.body, { requestId: j.id });
        expect(res.status).toBe(200);
        return checkTtsEvents(await res.text()).audio;
      }),
    );
    let total = 0n;
    for (const [i, j] of jobs.entries()) {
      const ref = j.flite ? natural('flite', 'slt', j.transcript) : natural('espeak-ng', 'en-us', j.transcript);
      expect(maxDiff(decodeRaw(results[i]!, 'pcm_s16le'), ref.samples), j.transcript).toBeLessThanOrEqual(1 / 32768);
      const cost = costOf(codePoints(j.transcript), j.flite ? FLITE_PRICE : ESPEAK_PRICE);
      const { ledger } = await billingOf(h, j.id);
      expect(ledger.map((l) => l.amountMicros)).toEqual([-cost]);
      total += cost;
    }
    expect(await h.balanceMicros()).toBe(before - total);
  }, 120_000);

  it('espeak-ng: a client that leaves mid-stream leaves no espeak-ng process behind', async () => {
    const baseline = await childPids('espeak-ng');
    const controller = new AbortController();
    const id = requestId('leave-espeak');
    const transcript = 'This answer is far too long to listen to until the end, so the client hangs up. '.repeat(60).trim();
    expect(codePoints(transcript)).toBeLessThanOrEqual(5000);
    const res = await post(
      h,
      '/tts/sse',
      ttsBody({
        model_id: 'local-espeak',
        transcript,
        voice: { mode: 'id', id: 'espeak-en-us-m' },
        output_format: { container: 'raw', sample_rate: 22050, encoding: 'pcm_s16le' },
      }),
      { signal: controller.signal, requestId: id },
    );
    expect(res.status).toBe(200);
    const reader = sseReader(res);
    const first = JSON.parse((await reader.next())!) as { type: string };
    expect(first.type).toBe('chunk');
    // The engine is still speaking: it writes minutes of audio that nobody has read yet.
    const running = (await childPids('espeak-ng')).filter((p) => !baseline.includes(p));
    expect(running.length).toBe(1);
    controller.abort();
    await vi.waitFor(async () => expect((await childPids('espeak-ng')).filter((p) => running.includes(p))).toEqual([]), { timeout: 10_000, interval: 50 });
    // Debited once, at the first audio.
    const { ledger } = await billingOf(h, id);
    expect(ledger.map((l) => l.amountMicros)).toEqual([-costOf(codePoints(transcript), ESPEAK_PRICE)]);
    // The gateway goes on serving.
    const after = await post(h, '/tts/bytes', ttsBody({ model_id: 'local-espeak', voice: { mode: 'id', id: 'espeak-en-us-m' } }));
    expect(after.status).toBe(200);
    await after.arrayBuffer();
  }, 60_000);

  it('flite: a client that leaves mid-stream stops the sentence loop and leaves no flite process or temp dir behind', async () => {
    const fliteDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith('svc-flite-'));
    const dirsBefore = new Set(fliteDirs());
    const baseline = await childPids('flite');
    const controller = new AbortController();
    const long = 'and the quick brown fox kept running over the green hills far away';
    // A short first sentence, then long ones flite needs a while for each.
    const transcript = ['Hello.', ...Array.from({ length: 3 }, (_, i) => `Part ${i + 1} ${Array(20).fill(long).join(' ')}.`)].join(' ');
    expect(codePoints(transcript)).toBeLessThanOrEqual(5000);
    const res = await post(h, '/tts/sse', ttsBody({ transcript, output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' } }), {
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = sseReader(res);
    const first = JSON.parse((await reader.next())!) as { type: string; data: string };
    const second = JSON.parse((await reader.next())!) as { type: string; data: string };
    expect([first.type, second.type]).toEqual(['chunk', 'chunk']);
    // The first sentence, as its first 100 ms and then the rest.
    expect(Buffer.from(first.data, 'base64').length / 2).toBe(1600);
    expect((Buffer.from(first.data, 'base64').length + Buffer.from(second.data, 'base64').length) / 2).toBe(natural('flite', 'slt', 'Hello. ').samples.length);
    // The next sentence is being synthesised.
    let running: number[] = [];
    await vi.waitFor(
      async () => {
        running = (await childPids('flite')).filter((p) => !baseline.includes(p));
        expect(running.length).toBe(1);
      },
      { timeout: 10_000, interval: 10 },
    );
    // This request's working directory is among these (other test processes may have theirs).
    const candidates = fliteDirs().filter((d) => !dirsBefore.has(d));
    expect(candidates.length).toBeGreaterThan(0);
    controller.abort();
    const seenAfter = new Set<number>();
    await vi.waitFor(
      async () => {
        const now = (await childPids('flite')).filter((p) => !baseline.includes(p));
        for (const p of now) seenAfter.add(p);
        expect(now).toEqual([]);
      },
      { timeout: 15_000, interval: 20 },
    );
    // No later sentence was started after the client left.
    expect([...seenAfter].filter((p) => !running.includes(p))).toEqual([]);
    await vi.waitFor(() => expect(fliteDirs().filter((d) => candidates.includes(d))).toEqual([]), { timeout: 5_000, interval: 20 });
  }, 60_000);
});
