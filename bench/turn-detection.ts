// Turn detection: how fast each preset finds the end of a turn, how often it cuts a speaker off
// mid-sentence, and whether noise starts turns -- the gateway's detector (Silero VAD + evidence,
// gateway/stt/turn-detector.ts) against the energy detector it replaced (bench/lib/), same corpus.
//
// Corpus (test/support/turn-corpus.ts, built here from flite and eSpeak NG): 16 sentences x 6
// voices x {clean, white noise at 20 dB SNR, at 10 dB SNR}; half the sentences have a pause of
// 300-800 ms after a comma or an "um". Noise alone: 10 s of six-voice babble, 10 s of white
// noise (both -30 dBFS), 10 s of clicks.
//
// Each clip is fed in 20 ms chunks, as a client streams it. Times are audio times: the latency of
// an event is the end of the chunk that produced it minus the true end of speech (the corpus
// knows it), so clips run faster than real time; the gateway's own overhead on top is in
// bench/upstream-streaming.ts.
//
// Evidence, three ways (rows of the table):
// - "audio only": no transcript (Silero's speech probability, the background level and pitch);
// - "local STT": the local recognizer's (pocketsphinx) partial after each chunk, computed once
//   per clip in lockstep (as a session gets it; its lag behind real time is a few ms). It does
//   not punctuate and often mishears "um";
// - "punctuating STT": what an engine that punctuates (Deepgram, Whisper, Cartesia) would show,
//   simulated from the corpus text: the words before the pause (ending in their comma) from
//   250 ms after the pause starts, the words so far (no final punctuation) from 250 ms after
//   speech resumes, the whole sentence from 250 ms after it ends.
// `--no-transcript` leaves out the local STT rows (the recognizer makes the run long).
//
// `--timelines FILE` keeps the transcripts in FILE (computed once, reused while tuning the
// detector; they depend only on the corpus and the recognizer). `--explain`: each false cut-off
// of a paused sentence with the transcript at its pause.
//
// `--wall-clock N`: also the end of turn as a client sees it through the gateway, N turns per
// preset streamed at real time into WS /stt/websocket with local-stt (bench/lib/turn-wall-clock.ts),
// beside the audio-time figure of the same preset (Silero, audio only), split in two: the
// detector's audio time on those very clips (their session's audio replayed here) and what the
// gateway adds on top (from sending the frame the turn ended at to receiving turn.end).
//
//   npx tsx bench/turn-detection.ts [--no-transcript] [--presets responsive,balanced,patient] [--timelines FILE] [--explain] [--wall-clock 16]
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { EnergyTurnDetector } from './lib/energy-turn-detector.ts';
import { wallClockTurns } from './lib/turn-wall-clock.ts';
import { TurnDetector, turnSettings, type TurnDetection, type TurnEvent } from '../gateway/stt/turn-detector.ts';
import { floatToS16 } from '../gateway/audio/pcm.ts';
import { createRecognizer, shutdownRecognizers } from '../gateway/upstreams/pocketsphinx/recognizer.ts';
import { babble, clicks, CORPUS_RATE, PAUSED_SENTENCES, turnCorpus, whiteNoise, type Utterance } from '../test/support/turn-corpus.ts';

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log(
    'npx tsx bench/turn-detection.ts [--no-transcript] [--presets responsive,balanced,patient] [--timelines FILE] [--explain] [--wall-clock 16]\n(see the comment at the top of bench/turn-detection.ts)',
  );
  process.exit(0);
}
const useTranscript = !args.includes('--no-transcript');
const presetsArg = args[args.indexOf('--presets') + 1];
const PRESETS: TurnDetection[] = args.includes('--presets') && presetsArg ? (presetsArg.split(',') as TurnDetection[]) : ['responsive', 'balanced', 'patient'];
const timelinesFile = args.includes('--timelines') ? args[args.indexOf('--timelines') + 1] : undefined;
const explain = args.includes('--explain');
const wallClock = args.includes('--wall-clock') ? Number(args[args.indexOf('--wall-clock') + 1] ?? 16) : 0;
const CHUNK = CORPUS_RATE / 50;
const CONCURRENCY = 32;

type Detector = 'audio only' | 'local STT' | 'punctuating STT' | 'energy';
/** How long after words are spoken a punctuating engine shows them (simulated). */
const ENGINE_LAG_SECONDS = 0.25;
interface Timed {
  type: TurnEvent['type'];
  /** End of the chunk that produced it (audio seconds). */
  at: number;
}

async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** The recognizer's partial transcript after each chunk. */
async function transcriptTimeline(samples: Float32Array): Promise<string[]> {
  const recognizer = await createRecognizer({ sampleRate: 16000 });
  try {
    const out: string[] = [];
    for (let at = 0; at < samples.length; at += CHUNK) out.push((await recognizer.push(floatToS16(samples.subarray(at, at + CHUNK)))).text);
    return out;
  } finally {
    recognizer.close();
  }
}

async function detect(samples: Float32Array, detector: Detector, preset: TurnDetection, timeline?: string[]): Promise<Timed[]> {
  const events: Timed[] = [];
  if (detector === 'energy') {
    const d = new EnergyTurnDetector(CORPUS_RATE, preset);
    for (let at = 0; at < samples.length; at += CHUNK)
      for (const e of d.push(samples.subarray(at, at + CHUNK))) events.push({ type: e.type, at: Math.min(at + CHUNK, samples.length) / CORPUS_RATE });
    return events;
  }
  const d = new TurnDetector(CORPUS_RATE, turnSettings(preset));
  // (timeline: one transcript per chunk, from the recognizer or simulated)
  try {
    for (let at = 0, k = 0; at < samples.length; at += CHUNK, k++) {
      if (timeline) d.hint(timeline[k] ?? '');
      for (const e of await d.push(samples.subarray(at, at + CHUNK))) events.push({ type: e.type, at: Math.min(at + CHUNK, samples.length) / CORPUS_RATE });
    }
  } finally {
    d.close();
  }
  return events;
}

const quantile = (values: number[], q: number) => {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const ms = (seconds: number) => (Number.isNaN(seconds) ? '-' : `${Math.round(seconds * 1000)}`);

interface Row {
  detector: Detector;
  preset: TurnDetection;
  endP50: number;
  endP90: number;
  eagerP50: number;
  cutoffsPaused: number;
  cutoffsAll: number;
  missed: number;
  noiseStarts: Record<string, number>;
}

/** What a punctuating engine would have shown after each chunk (see the top). */
function punctuatedTimeline(u: Utterance): string[] {
  const [before] = u.pause ? PAUSED_SENTENCES.find((p) => p.join(' ') === u.text)! : [];
  return Array.from({ length: Math.ceil(u.samples.length / CHUNK) }, (_, k) => {
    const t = ((k + 1) * CHUNK) / CORPUS_RATE;
    if (t >= u.speechEnd + ENGINE_LAG_SECONDS) return u.text;
    // Interim words after the pause: no final punctuation yet.
    if (u.pause && t >= u.pause.end + ENGINE_LAG_SECONDS) return u.text.replace(/[.?!]$/, '');
    if (u.pause && before && t >= u.pause.start + ENGINE_LAG_SECONDS) return before;
    return '';
  });
}

async function evaluate(
  detector: Detector,
  preset: TurnDetection,
  corpus: Utterance[],
  timelines: (string[] | undefined)[],
  noise: Record<string, Float32Array>,
): Promise<Row> {
  const timelineOf = (u: Utterance, i: number) =>
    detector === 'local STT' ? timelines[i] : detector === 'punctuating STT' ? punctuatedTimeline(u) : undefined;
  const results = await pool(corpus, CONCURRENCY, (u, i) => detect(u.samples, detector, preset, timelineOf(u, i)));
  const ends: number[] = [];
  const eagers: number[] = [];
  let cutPaused = 0;
  let cutAll = 0;
  let missed = 0;
  results.forEach((events, i) => {
    const u = corpus[i]!;
    // A turn.end before the speech is over cuts the speaker off (in the pause, or mid-word).
    const cut = events.some((e) => e.type === 'turn.end' && e.at < u.speechEnd);
    if (cut) cutAll++;
    if (cut && u.pause) cutPaused++;
    if (cut && explain && detector !== 'energy') {
      const k = Math.floor((u.pause?.start ?? u.speechEnd) * 50) + 10;
      console.error(
        `cut-off ${preset} ${detector}: ${u.name} pause ${u.pause ? Math.round((u.pause.end - u.pause.start) * 1000) : '-'} ms; heard at the pause: "${timelineOf(u, i)?.[k] ?? ''}"`,
      );
    }
    const end = events.find((e) => e.type === 'turn.end' && e.at >= u.speechEnd);
    if (!end) missed++;
    else ends.push(end.at - u.speechEnd);
    const eager = events.find((e) => e.type === 'turn.eager_end' && e.at >= u.speechEnd);
    if (eager) eagers.push(eager.at - u.speechEnd);
  });
  const noiseStarts: Record<string, number> = {};
  for (const [name, samples] of Object.entries(noise)) {
    const events = await detect(samples, detector, preset);
    noiseStarts[name] = events.filter((e) => e.type === 'turn.start').length / (samples.length / CORPUS_RATE / 60);
  }
  const paused = corpus.filter((u) => u.pause).length;
  return {
    detector,
    preset,
    endP50: quantile(ends, 0.5),
    endP90: quantile(ends, 0.9),
    eagerP50: quantile(eagers, 0.5),
    cutoffsPaused: (100 * cutPaused) / paused,
    cutoffsAll: (100 * cutAll) / corpus.length,
    missed,
    noiseStarts,
  };
}

/** CPU seconds per second of audio for `sessions` real-time sessions run together (Silero batches them). */
async function cpuPerSession(samples: Float32Array, sessions: number): Promise<number> {
  const before = process.cpuUsage();
  await pool(
    Array.from({ length: sessions }, () => samples),
    sessions,
    (s) => detect(s, 'audio only', 'balanced'),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1e6 / ((samples.length / CORPUS_RATE) * sessions);
}

const t0 = performance.now();
const corpus = await turnCorpus();
const noise = {
  babble: await babble(10, -30),
  white: whiteNoise(10, -30, 7),
  clicks: clicks(10),
};
console.error(`corpus: ${corpus.length} utterances (${corpus.filter((u) => u.pause).length} paused), built in ${Math.round(performance.now() - t0)} ms`);
const t1 = performance.now();
const stored = timelinesFile && existsSync(timelinesFile) ? (JSON.parse(readFileSync(timelinesFile, 'utf8')) as Record<string, string[]>) : undefined;
const timelines = useTranscript
  ? stored
    ? corpus.map((u) => stored[u.name])
    : await pool(corpus, Math.max(1, availableParallelism() - 1), (u) => transcriptTimeline(u.samples))
  : corpus.map(() => undefined);
if (useTranscript && timelinesFile && !stored) writeFileSync(timelinesFile, JSON.stringify(Object.fromEntries(corpus.map((u, i) => [u.name, timelines[i]]))));
if (useTranscript) console.error(`transcripts: ${Math.round(performance.now() - t1)} ms`);
await shutdownRecognizers();

const rows: Row[] = [];
const detectors: Detector[] = useTranscript ? ['audio only', 'local STT', 'punctuating STT', 'energy'] : ['audio only', 'punctuating STT', 'energy'];
for (const preset of PRESETS) for (const detector of detectors) rows.push(await evaluate(detector, preset, corpus, timelines, noise));

const clip = corpus[0]!.samples;
const cpu1 = await cpuPerSession(clip, 1);
const cpu32 = await cpuPerSession(clip, 32);

console.log(`\nTurn detection, ${new Date().toISOString().slice(0, 10)}, \`npx tsx bench/turn-detection.ts${args.length ? ' ' + args.join(' ') : ''}\``);
console.log(
  `${corpus.length} utterances (${corpus.filter((u) => u.pause).length} with a 300-800 ms pause), transcript evidence ${useTranscript ? 'on' : 'off'}; ms after the end of speech\n`,
);
console.log(
  '| preset | detector | end of turn p50 | p90 | eager end p50 | false cut-offs, paused sentences | all | no end | false starts/min: babble, white, clicks |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const fs = `${r.noiseStarts.babble!.toFixed(1)}, ${r.noiseStarts.white!.toFixed(1)}, ${r.noiseStarts.clicks!.toFixed(1)}`;
  console.log(
    `| ${r.preset} | ${r.detector === 'energy' ? 'energy VAD (before)' : `Silero VAD, ${r.detector}`} | ${ms(r.endP50)} | ${ms(r.endP90)} | ${ms(r.eagerP50)} | ${r.cutoffsPaused.toFixed(1)} % | ${r.cutoffsAll.toFixed(1)} % | ${r.missed} | ${fs} |`,
  );
}
console.log(
  `\nCPU per real-time session (Silero, balanced): ${(cpu1 * 100).toFixed(2)} % of a core alone, ${(cpu32 * 100).toFixed(2)} % each with 32 sessions batched`,
);

if (wallClock > 0) {
  const wall = await wallClockTurns(PRESETS, wallClock, 2);
  console.log(
    `\nEnd of turn through the gateway, wall clock: WS /stt/websocket, local-stt, ${wallClock} flite turns per preset at real time in 20 ms frames (after 2 warm-up); ms after the last voiced frame was sent\n`,
  );
  console.log(
    '| preset | detector, audio time p50 (Silero, audio only) | turn.end p50 | p90 | turn.end − audio time p50 | the same clips, audio time p50 | gateway-added p50 | p90 | turn.finalized (final transcript in) p50 | p90 | cut-offs |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of wall) {
    const audio = rows.find((r) => r.preset === w.preset && r.detector === 'audio only')!.endP50 * 1000;
    const r0 = (x: number) => Math.round(x);
    console.log(
      `| ${w.preset} | ${r0(audio)} | ${r0(w.endP50)} | ${r0(w.endP90)} | ${r0(w.endP50 - audio)} | ${r0(w.audioP50)} | ${w.gatewayP50.toFixed(1)} | ${w.gatewayP90.toFixed(1)} | ${r0(w.finalP50)} | ${r0(w.finalP90)} | ${w.cutOffs} |`,
    );
  }
  const unmatched = wall.reduce((n, w) => n + w.unmatched, 0);
  if (unmatched > 0) console.log(`\n${unmatched} turn(s) ended elsewhere when replayed: left out of the two split columns.`);
}
