// The local speech-to-text engine against real pocketsphinx, on speech flite makes here.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../../test/support/poll.ts';
import { modelPaths, NOT_INSTALLED } from './ffi.ts';
import { createRecognizer, recognizerStats, shutdownRecognizers, transcribeAll, type Hypothesis } from './recognizer.ts';
import { Upsampler2x } from './resample.ts';
import { normalizeWords, transcriptWord } from './words.ts';

const SENTENCES = [
  'the quick brown fox jumps over the lazy dog',
  'please call me tomorrow morning about the meeting',
  'i would like to book a table for two people tonight',
  'the weather today is sunny with a light breeze',
  'can you tell me how to get to the train station',
  'my phone number has changed since last year',
  'we need to order more paper for the office printer',
  'she bought three apples and a loaf of bread',
  'the meeting has been moved to friday afternoon',
  'turn off the lights when you leave the room',
];
const VOICES = ['slt', 'rms', 'awb'] as const;
type Voice = (typeof VOICES)[number];

let dir: string;
const audio = new Map<string, Int16Array>();
const speech = (i: number, voice: Voice) => audio.get(`${i}-${voice}`)!;

/** The samples of a 16-bit mono WAV file. */
function readWav(file: string): Int16Array {
  const b = readFileSync(file);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('latin1', off, off + 4);
    const size = b.readUInt32LE(off + 4);
    if (id === 'fmt ') expect(b.readUInt32LE(off + 12)).toBe(16000);
    if (id === 'data') {
      const data = b.subarray(off + 8, off + 8 + Math.min(size, b.length - off - 8));
      return new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + (data.length & ~1)));
    }
    off += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

function wordErrors(ref: string[], hyp: string[]): number {
  let prev = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const cur = [i];
    for (let j = 1; j <= hyp.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[hyp.length]!;
}

function expectSaneTimes(h: Hypothesis, duration: number, from = 0): void {
  expect(h.text).toBe(h.words.map((w) => w.word).join(' '));
  let last = from;
  for (const w of h.words) {
    expect(w.start).toBeGreaterThanOrEqual(last);
    expect(w.end).toBeGreaterThanOrEqual(w.start);
    expect(w.end).toBeLessThanOrEqual(duration + 1e-9);
    expect(transcriptWord(w.word)).toBe(w.word); // no <s>, <sil>, [NOISE], word(2)
    last = w.start;
  }
}

/** 16 kHz -> 8 kHz: windowed-sinc low-pass at 3.6 kHz, then every other sample. */
function downsample(x: Int16Array): Int16Array {
  const half = 32;
  const taps = Array.from({ length: 2 * half + 1 }, (_, k) => {
    const n = k - half;
    const fc = 3600 / 16000;
    const sinc = n === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * n) / (Math.PI * n);
    return sinc * (0.54 + 0.46 * Math.cos((Math.PI * n) / half));
  });
  const out = new Int16Array(Math.floor(x.length / 2));
  for (let i = 0; i < out.length; i++) {
    let acc = 0;
    for (let k = 0; k < taps.length; k++) acc += (x[2 * i + k - half] ?? 0) * taps[k]!;
    out[i] = Math.max(-32768, Math.min(32767, Math.round(acc)));
  }
  return out;
}

async function stream(samples: Int16Array, options: Parameters<typeof createRecognizer>[0], chunk = 1600) {
  const r = await createRecognizer(options);
  const partials: Hypothesis[] = [];
  for (let i = 0; i < samples.length; i += chunk) partials.push(await r.push(samples.subarray(i, i + chunk)));
  const final = await r.finalize();
  r.close();
  return { partials, final };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-stt-test-'));
  const jobs = SENTENCES.flatMap((text, i) => VOICES.map((voice) => ({ text, i, voice })));
  const run = promisify(execFile);
  for (let k = 0; k < jobs.length; k += 6) {
    await Promise.all(
      jobs.slice(k, k + 6).map(async ({ text, i, voice }) => {
        const file = join(dir, `${i}-${voice}.wav`);
        await run('flite', ['-voice', voice, '-t', text, '-o', file]);
        audio.set(`${i}-${voice}`, readWav(file));
      }),
    );
  }
}, 120_000);

afterAll(async () => {
  await shutdownRecognizers();
  rmSync(dir, { recursive: true, force: true });
});

describe('pocketsphinx recognizer', () => {
  it('transcribes flite speech (slt, rms, awb) with at most 15 % word error rate, words timed within the audio', async () => {
    let errors = 0;
    let words = 0;
    const misses: string[] = [];
    for (const voice of VOICES) {
      for (const [i, sentence] of SENTENCES.entries()) {
        const pcm = speech(i, voice);
        const h = await transcribeAll(pcm, { sampleRate: 16000 });
        expectSaneTimes(h, pcm.length / 16000);
        const ref = sentence.split(' ');
        const e = wordErrors(ref, h.text.split(' ').filter(Boolean));
        if (e) misses.push(`${voice}: "${h.text}"`);
        errors += e;
        words += ref.length;
      }
    }
    const wer = errors / words;
    console.log(`16 kHz WER ${(100 * wer).toFixed(1)} % over ${words} words; misses:\n  ${misses.join('\n  ')}`);
    expect(wer).toBeLessThanOrEqual(0.15);
  }, 300_000);

  it('with a grammar of the sentences, gets each one exactly', async () => {
    for (const [i, sentence] of SENTENCES.entries()) {
      const voice = VOICES[i % VOICES.length]!;
      const h = await transcribeAll(speech(i, voice), { sampleRate: 16000, grammar: SENTENCES });
      expect(h.text).toBe(sentence);
      expectSaneTimes(h, speech(i, voice).length / 16000);
    }
  }, 120_000);

  it('streams 100 ms chunks: partials grow, the final equals the batch result', async () => {
    for (const i of [0, 4]) {
      const pcm = speech(i, 'rms');
      const { partials, final } = await stream(pcm, { sampleRate: 16000 });
      const batch = await transcribeAll(pcm, { sampleRate: 16000 });
      expect(final).toEqual(batch);
      const texts = partials.map((p) => p.text).filter(Boolean);
      expect(new Set(texts).size).toBeGreaterThanOrEqual(3);
      const counts = partials.map((p) => p.words.length);
      // Words appear as the audio comes in: more of them by the end than a second in.
      expect(counts.at(-1)!).toBeGreaterThan(counts[10]!);
      expect(counts.at(-1)!).toBeGreaterThanOrEqual(final.words.length - 2);
      for (const p of partials) expectSaneTimes(p, pcm.length / 16000);
    }
  }, 120_000);

  it('takes a new utterance after finalize, its times continuing from the audio already consumed', async () => {
    const a = speech(1, 'slt');
    const b = speech(9, 'awb');
    const r = await createRecognizer({ sampleRate: 16000 });
    await r.push(a);
    const first = await r.finalize();
    expect(await r.finalize()).toEqual({ text: '', words: [] }); // nothing new since
    await r.push(new Int16Array(8000)); // half a second of silence
    await r.push(b);
    const second = await r.finalize();
    r.close();
    expectSaneTimes(first, a.length / 16000);
    expectSaneTimes(second, (a.length + 8000 + b.length) / 16000, (a.length + 8000) / 16000);
    expect(wordErrors(SENTENCES[9]!.split(' '), second.text.split(' '))).toBeLessThanOrEqual(2);
  }, 60_000);

  it('keeps concurrent recognizers apart', async () => {
    const a = speech(2, 'slt');
    const b = speech(7, 'rms');
    const [ra, rb] = await Promise.all([createRecognizer({ sampleRate: 16000 }), createRecognizer({ sampleRate: 16000 })]);
    const chunk = 1600;
    const pushes: Promise<Hypothesis>[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i += chunk) {
      if (i < a.length) pushes.push(ra.push(a.subarray(i, i + chunk)));
      if (i < b.length) pushes.push(rb.push(b.subarray(i, i + chunk)));
    }
    await Promise.all(pushes);
    const [fa, fb] = await Promise.all([ra.finalize(), rb.finalize()]);
    ra.close();
    rb.close();
    expect(fa).toEqual(await transcribeAll(a, { sampleRate: 16000 }));
    expect(fb).toEqual(await transcribeAll(b, { sampleRate: 16000 }));
    expect(fa.text).not.toBe(fb.text);
  }, 120_000);

  it('frees the decoder on close, mid-utterance too: 50 recognizers leave no decoder or memory behind', async () => {
    const pcm = speech(5, 'slt').subarray(0, 8000);
    const cycle = async () => {
      const r = await createRecognizer({ sampleRate: 16000 });
      await r.push(pcm);
      r.close();
      r.close(); // idempotent
      await expect(r.push(pcm)).rejects.toThrow(/closed/);
    };
    /** Stats once the workers have loaded their spare decoder (in the background, after a session opens). */
    const settled = () =>
      until('the spare decoders to load', async () => {
        const stats = await recognizerStats();
        return stats.every((s) => !s.loadingSpare) && stats;
      });
    for (let k = 0; k < 5; k++) await cycle();
    const before = await settled();
    for (let k = 0; k < 50; k++) await cycle();
    const after = await settled();
    console.log('worker stats before/after 50 recognizers:', JSON.stringify(before), JSON.stringify(after));
    expect(after.reduce((n, s) => n + s.sessions, 0)).toBe(0);
    for (const s of after) expect(s.decoders).toBe(s.spares); // no session's decoder left
    expect(after.reduce((n, s) => n + s.decoders, 0)).toBe(before.reduce((n, s) => n + s.decoders, 0));
    const rss = (stats: typeof before) => stats.reduce((n, s) => Math.max(n, s.rssBytes), 0);
    // One decoder is ~100 MB: 50 leaked ones would be 5 GB.
    expect(rss(after) - rss(before)).toBeLessThan(150e6);
  }, 180_000);

  it('never crashes on garbage: noise, silence, odd and empty chunks, full-scale samples', async () => {
    let seed = 1;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
    const noise = Int16Array.from({ length: 32000 }, () => Math.round(random() * 20000));
    const square = Int16Array.from({ length: 16001 }, (_, i) => (i % 40 < 20 ? 32767 : -32768));
    for (const sampleRate of [16000, 8000] as const) {
      const r = await createRecognizer({ sampleRate });
      for (const chunk of [new Int16Array(0), new Int16Array(1), noise.subarray(0, 3), noise, new Int16Array(16001), square, noise.subarray(5, 1606)]) {
        const h = await r.push(chunk);
        expect(typeof h.text).toBe('string');
      }
      const h = await r.finalize();
      expectSaneTimes(h, (1 + 3 + 32000 + 16001 + 16001 + 1601) / sampleRate + 0.01);
      await r.push(new Int16Array(7)); // a new, tiny utterance
      await r.finalize();
      await expect(r.push([1, 2, 3] as unknown as Int16Array)).rejects.toThrow(TypeError);
      r.close();
    }
    expect((await transcribeAll(new Int16Array(0), { sampleRate: 16000 })).text).toBe('');
    expect((await transcribeAll(new Int16Array(16000), { sampleRate: 16000 })).words).toEqual([]);
    await expect(createRecognizer({ sampleRate: 44100 as 16000 })).rejects.toThrow(/16000 or 8000/);
  }, 120_000);

  it('keyterms favour their words, add missing ones, and take anything', async () => {
    // Without help every flite voice hears "sunday"; "sunny" is in the dictionary: n-best bias.
    const weather = speech(3, 'slt');
    expect((await transcribeAll(weather, { sampleRate: 16000 })).text).toContain('sunday');
    const biased = (await transcribeAll(weather, { sampleRate: 16000, keyterms: ['sunny'] })).text;
    expect(biased).toContain('sunny');
    expect(biased).not.toContain('sunday');
    // A keyterm that is not in the sentence does not get put in.
    const call = await transcribeAll(speech(1, 'slt'), { sampleRate: 16000, keyterms: ['sunny', 'lazy dog'] });
    expect(call.text).not.toMatch(/sunny|lazy/);

    // "kubernetes" is not in the dictionary: added with an espeak-ng pronunciation.
    const file = join(dir, 'k8s.wav');
    await promisify(execFile)('flite', ['-voice', 'slt', '-t', 'we deploy the service on kubernetes every friday', '-o', file]);
    const k8s = readWav(file);
    expect((await transcribeAll(k8s, { sampleRate: 16000 })).text).not.toContain('kubernetes');
    const h = await transcribeAll(k8s, { sampleRate: 16000, keyterms: ['Kubernetes'] });
    expect(h.text).toContain('kubernetes');
    expectSaneTimes(h, k8s.length / 16000);

    const odd = [
      '',
      '   ',
      '!!!',
      'Zürich',
      '2024',
      "rock 'n' roll",
      'x'.repeat(500),
      'a b c d e f g h i j k',
      ...Array.from({ length: 150 }, (_, i) => `term${i}`),
    ];
    const r = await createRecognizer({ sampleRate: 16000, keyterms: odd });
    await r.push(speech(0, 'awb'));
    expect((await r.finalize()).text.length).toBeGreaterThan(0);
    r.close();
  }, 120_000);

  it('takes 8 kHz audio (upsampled to the 16 kHz model, at a cost in accuracy)', async () => {
    let errors = 0;
    let words = 0;
    for (const [i, sentence] of SENTENCES.entries()) {
      const pcm = downsample(speech(i, VOICES[i % VOICES.length]!));
      const h = await transcribeAll(pcm, { sampleRate: 8000 });
      expectSaneTimes(h, pcm.length / 8000);
      errors += wordErrors(sentence.split(' '), h.text.split(' ').filter(Boolean));
      words += sentence.split(' ').length;
    }
    console.log(`8 kHz WER ${((100 * errors) / words).toFixed(1)} % over ${words} words`);
    expect(errors / words).toBeLessThanOrEqual(0.4);
    // Streaming 8 kHz gives the batch result too.
    const pcm = downsample(speech(6, 'slt'));
    const { final } = await stream(pcm, { sampleRate: 8000 }, 800);
    expect(final).toEqual(await transcribeAll(pcm, { sampleRate: 8000 }));
  }, 180_000);
});

describe('pocketsphinx helpers', () => {
  it('maps decoder tokens to transcript words', () => {
    expect(['<s>', '</s>', '<sil>', '[NOISE]', '[SPEECH]', '++GARBAGE++', 'NULL'].map(transcriptWord)).toEqual([null, null, null, null, null, null, null]);
    expect(transcriptWord('read(2)')).toBe('read');
    expect(transcriptWord("don't")).toBe("don't");
    expect(normalizeWords("Hello, World! It's 2024 — ‘OK’")).toEqual(['hello', 'world', "it's", '2024', 'ok']);
  });

  it('upsamples 8 kHz to 16 kHz in chunks, seamlessly and aligned', () => {
    const x = Int16Array.from({ length: 8000 }, (_, i) => Math.round(10000 * Math.sin((2 * Math.PI * 1000 * i) / 8000 + 0.3)));
    const u = new Upsampler2x();
    const parts: Int16Array[] = [];
    for (let i = 0; i < x.length; i += 333) parts.push(u.process(x.subarray(i, i + 333)));
    parts.push(u.flush());
    const y = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
    parts.reduce((o, p) => (y.set(p, o), o + p.length), 0);
    expect(y.length).toBe(16000);
    for (let i = 100; i < y.length - 100; i++) {
      expect(Math.abs(y[i]! - 10000 * Math.sin((2 * Math.PI * 1000 * i) / 16000 + 0.3))).toBeLessThan(10);
    }
  });

  it('says how to install pocketsphinx when its model is missing', () => {
    expect(() => modelPaths('/nonexistent')).toThrow(NOT_INSTALLED);
  });
});
