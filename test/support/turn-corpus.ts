// A speech corpus for turn detection, built on the spot from the local speech engines (flite and
// eSpeak NG voices): utterances with and without mid-sentence pauses (after a comma or an "um",
// 300-800 ms), clean or mixed with noise at a given SNR, with the true speech boundaries known;
// and noise alone (babble of six voices, white noise, clicks) where no turn should start.
// Used by bench/turn-detection.ts and the turn-detection tests. Deterministic (seeded).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseWav } from '../../gateway/audio/wav.ts';
import { resample } from '../../gateway/audio/resample.ts';

export const CORPUS_RATE = 16_000;
const run = promisify(execFile);

export type CorpusVoice = 'flite:slt' | 'flite:rms' | 'flite:awb' | 'flite:kal' | 'espeak:en-us' | 'espeak:en-gb';
export const CORPUS_VOICES: CorpusVoice[] = ['flite:slt', 'flite:rms', 'flite:awb', 'flite:kal', 'espeak:en-us', 'espeak:en-gb'];

/** Whole sentences. */
export const PLAIN_SENTENCES = [
  'What time does the store open tomorrow?',
  'I would like to book a table for two people.',
  'Please send the report to my email address.',
  'Can you tell me the weather for the weekend?',
  'My account number is four five six seven.',
  'Thank you, that is all I needed today.',
  'The package arrived this morning but it was damaged.',
  'How much does the premium plan cost per month?',
];

/** Sentences spoken in two parts with a pause between (the first part ends as a clause does, with a comma). */
export const PAUSED_SENTENCES: [string, string][] = [
  ['I would like to order, um,', 'a large pizza with extra cheese.'],
  ['My phone number is, um,', 'five five five, one two three four.'],
  ['I was thinking that,', 'maybe we could meet on Friday.'],
  ['Could you check whether, uh,', 'my order has shipped yet?'],
  ['When I got home yesterday,', 'the front door was open.'],
  ['I need to change the, um,', 'delivery address on my account.'],
  ['We want to go to,', 'the beach this weekend.'],
  ['The problem is that,', 'the app keeps crashing on startup.'],
];

const cache = new Map<string, Promise<Float32Array>>();

/** `text` spoken by `voice`, at 16 kHz, without leading and trailing silence. */
export function say(text: string, voice: CorpusVoice): Promise<Float32Array> {
  const key = `${voice}\0${text}`;
  let p = cache.get(key);
  if (!p) {
    p = (async () => {
      const dir = mkdtempSync(join(tmpdir(), 'turn-corpus-'));
      try {
        const file = join(dir, 'speech.wav');
        const [engine, name] = voice.split(':') as [string, string];
        if (engine === 'flite') await run('flite', ['-voice', name, '-t', text, '-o', file]);
        else await run('espeak-ng', ['-v', name, '-w', file, text]);
        const wav = parseWav(readFileSync(file));
        const samples = wav.sampleRate === CORPUS_RATE ? wav.samples : resample(wav.samples, wav.sampleRate, CORPUS_RATE);
        return trim(samples);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })();
    cache.set(key, p);
  }
  return p;
}

/** Without the near-silence at either end (below -50 dBFS over 10 ms). */
function trim(x: Float32Array): Float32Array {
  const win = CORPUS_RATE / 100;
  const loud = (at: number) => rmsOf(x.subarray(at, at + win)) > 0.00316;
  let first = 0;
  while (first + win < x.length && !loud(first)) first += win;
  let last = x.length - win;
  while (last > first && !loud(last)) last -= win;
  return x.slice(first, last + win);
}

export function rmsOf(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / Math.max(1, x.length));
}

export function dbfs(x: Float32Array): number {
  return 20 * Math.log10(rmsOf(x) + 1e-12);
}

function scaleTo(x: Float32Array, db: number): Float32Array {
  const gain = 10 ** (db / 20) / (rmsOf(x) + 1e-12);
  return x.map((v) => v * gain);
}

function seeded(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 0x100000000;
  };
}

export function whiteNoise(seconds: number, db: number, seed = 1): Float32Array {
  const rnd = seeded(seed);
  return scaleTo(
    Float32Array.from({ length: Math.round(seconds * CORPUS_RATE) }, () => rnd() * 2 - 1),
    db,
  );
}

/** Six voices talking at once, each a different text, at `db` dBFS overall. */
export async function babble(seconds: number, db: number): Promise<Float32Array> {
  const out = new Float32Array(Math.round(seconds * CORPUS_RATE));
  const texts = [...PLAIN_SENTENCES, ...PAUSED_SENTENCES.map((p) => p.join(' '))];
  for (let v = 0; v < CORPUS_VOICES.length; v++) {
    const parts: Float32Array[] = [];
    for (let t = 0; t < 4; t++) parts.push(await say(texts[(v * 3 + t) % texts.length]!, CORPUS_VOICES[v]!));
    const talker = scaleTo(concat(...parts), -20);
    const offset = Math.round((v / CORPUS_VOICES.length) * talker.length);
    for (let i = 0; i < out.length; i++) out[i]! += talker[(i + offset) % talker.length]!;
  }
  return scaleTo(out, db);
}

/** Silence with a 2 ms click every half second (door, keyboard, a tap on the microphone). */
export function clicks(seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(seconds * CORPUS_RATE));
  const click = Math.round(0.002 * CORPUS_RATE);
  for (let at = CORPUS_RATE / 4; at + click < out.length; at += CORPUS_RATE / 2) for (let i = 0; i < click; i++) out[at + i] = amplitude * (i % 2 ? -1 : 1);
  return out;
}

export function concat(...parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export type NoiseCondition = 'clean' | 'white 20 dB' | 'white 10 dB';
export const NOISE_CONDITIONS: NoiseCondition[] = ['clean', 'white 20 dB', 'white 10 dB'];

export interface Utterance {
  name: string;
  text: string;
  voice: CorpusVoice;
  noise: NoiseCondition;
  samples: Float32Array;
  /** Seconds: where the speech starts and ends in `samples`. */
  speechStart: number;
  speechEnd: number;
  /** The mid-sentence pause (seconds), for paused sentences. */
  pause?: { start: number; end: number };
}

const LEAD_SECONDS = 0.6;
const TAIL_SECONDS = 3;
const SPEECH_DB = -20;

/** One utterance: lead-in, the sentence (and its pause), a tail long enough for the most patient end. */
export async function utterance(sentence: string | [string, string], voice: CorpusVoice, noise: NoiseCondition, pauseSeconds = 0.5): Promise<Utterance> {
  const rate = CORPUS_RATE;
  let speech: Float32Array;
  let pause: Utterance['pause'];
  if (typeof sentence === 'string') speech = await say(sentence, voice);
  else {
    const [a, b] = await Promise.all(sentence.map((s) => say(s, voice)));
    speech = concat(a!, new Float32Array(Math.round(pauseSeconds * rate)), b!);
    pause = { start: LEAD_SECONDS + a!.length / rate, end: LEAD_SECONDS + a!.length / rate + pauseSeconds };
  }
  speech = scaleTo(speech, SPEECH_DB);
  const samples = concat(new Float32Array(Math.round(LEAD_SECONDS * rate)), speech, new Float32Array(Math.round(TAIL_SECONDS * rate)));
  if (noise !== 'clean') {
    const snr = noise === 'white 20 dB' ? 20 : 10;
    const n = whiteNoise(samples.length / rate, SPEECH_DB - snr, samples.length);
    for (let i = 0; i < samples.length; i++) samples[i]! += n[i]!;
  }
  const text = typeof sentence === 'string' ? sentence : sentence.join(' ');
  return {
    name: `${voice} ${noise} "${text}"`,
    text,
    voice,
    noise,
    samples,
    speechStart: LEAD_SECONDS,
    speechEnd: LEAD_SECONDS + speech.length / rate,
    pause,
  };
}

/** The whole corpus: every sentence in every voice and noise condition (pauses 300-800 ms, seeded). */
export async function turnCorpus(): Promise<Utterance[]> {
  const rnd = seeded(42);
  const out: Utterance[] = [];
  for (const noise of NOISE_CONDITIONS)
    for (const voice of CORPUS_VOICES) {
      for (const s of PLAIN_SENTENCES) out.push(await utterance(s, voice, noise));
      for (const s of PAUSED_SENTENCES) out.push(await utterance(s, voice, noise, 0.3 + 0.5 * rnd()));
    }
  return out;
}
