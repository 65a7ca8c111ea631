// Measures a voice clip: how long it speaks, its pitch (F0) distribution, its speaking rate,
// a gender estimate from the pitch, and its level. This is what "cloning" means with the local
// engines (flite, espeak-ng): the measurements pick and tune an engine voice
// (gateway/upstreams/local-tts/derive-local-voice.ts). Nothing here is learned; every step is a classic,
// documented method so that the numbers can be checked by hand:
//
//  1. Analysis signal: the clip resampled to 16 kHz, mean removed, then a one-pole DC blocker
//     (~13 Hz), so that a DC offset or rumble cannot pass for speech energy.
//  2. Energy VAD over 25 ms frames every 10 ms. A frame is active when its level is above
//     max(-60 dBFS, loud level - 35 dB, min(quiet level + 6 dB, loud level - 3 dB)), where the
//     loud and quiet levels are the 95th and 10th percentiles of the frame levels. Gaps up to
//     120 ms inside speech (stop closures) are bridged. A stretch of active frames that holds no
//     voiced frame at all is dropped (noise, breath, clicks): speech here means voiced speech.
//  3. Pitch: YIN (de Cheveigné & Kawahara 2002) on the clip at 8 kHz, 25 ms integration window,
//     60-500 Hz search, absolute threshold 0.15, parabolic interpolation. A frame is voiced when
//     the threshold is met; isolated voiced frames (runs under 30 ms) are dropped as spurious.
//  4. Speaking rate: syllable nuclei as peaks of the 500-2000 Hz (vowel band) level envelope,
//     after de Jong & Wempe 2009: a peak counts when it is voiced, within 25 dB of the band's
//     loud level and separated from the previous nucleus by a dip of at least 2 dB.
//     Rate = nuclei / speech time (an articulation rate: pauses over 120 ms do not count).
//  5. Gender from the median F0: below 150 Hz male, above 180 Hz female. In between (adult
//     speaking pitch ranges overlap there) the vocal tract decides: women's formants sit about
//     15-20% higher than men's (a shorter tract), whatever the pitch. F2 and F3 come from LPC
//     (order 10 at 8 kHz) on voiced frames; √(median F2 · median F3) at or above 2150 Hz is
//     female, at or below 2050 Hz male, in between (or too few frames) unknown.
//
// Cost is linear in the clip: a 60 s clip takes well under a second on one core (the YIN
// difference function runs only on active frames, at 8 kHz). That is too long to hold the
// event loop, so the analysis is written as a generator that pauses after every few
// milliseconds of work (WORK_PER_SLICE): analyzeVoiceInChunks lets other requests run at each
// pause, analyzeVoice runs it straight through. Both compute exactly the same numbers.
// analyzeVoiceInChunks also runs one analysis at a time in the process: ten clones at once would
// otherwise put ten slices in every turn of the event loop (tens of ms before another request is
// read) and hold ten sets of working copies (MBs each).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createResampler } from './resample.ts';
import {
  BLOCK,
  FRAME,
  HOP,
  LOUDNESS_FLOOR_DB,
  PITCH_RATE,
  RATE,
  Slicer,
  countSyllableNuclei,
  db,
  percentile,
  vocalTractHz,
  vowelBandLevels,
  type Steps,
} from './voice-measures.ts';

export interface VoiceAnalysis {
  /** The whole clip. */
  durationMs: number;
  /** Voiced/active speech (energy VAD, see the header). */
  speechMs: number;
  /** Median fundamental frequency over voiced frames; null when there is no voiced speech. */
  medianF0Hz: number | null;
  f0P10Hz: number | null;
  f0P90Hz: number | null;
  /** Syllable nuclei per second of speech; null when there is too little speech to tell. */
  syllablesPerSecond: number | null;
  gender: 'female' | 'male' | 'unknown';
  /**
   * RMS level of the speech frames (of the whole clip when there is no speech), 20·log10(rms):
   * a full-scale sine is -3 dBFS. Floor -100 (digital silence), so never -Infinity.
   */
  loudnessDbfs: number;
}

/** Below this median F0 a voice is estimated male; above FEMALE_MIN_F0_HZ female. */
export const MALE_MAX_F0_HZ = 150;
export const FEMALE_MIN_F0_HZ = 180;
/**
 * In the F0 overlap band: √(median F2 · median F3) at or above this is female, at or below
 * MALE_MAX_TRACT_HZ male. Adult averages over vowels are about 1500/2500 Hz (men) and
 * 1800/2900 Hz (women) (Peterson & Barney 1952; Hillenbrand et al. 1995), i.e. √ ≈ 1940 and
 * 2285 Hz. Measured here: flite slt 2290, espeak-ng en-us+f3 at -p 10/20 2190-2210 (women);
 * flite awb and kal16 pitched to 165 Hz 1975 and 1840, espeak-ng en-us at -p 99 2066 (men).
 */
const FEMALE_MIN_TRACT_HZ = 2150;
const MALE_MAX_TRACT_HZ = 2050;

const HOP_MS = 10;
const MIN_F0 = 60;
const MAX_F0 = 500;
const YIN_WINDOW = 200; // 25 ms at 8 kHz
const YIN_THRESHOLD = 0.15;
const VOICING_THRESHOLD = 0.35;
/** Fewer voiced frames than this (50 ms) and the pitch is not reported. */
const MIN_VOICED_FRAMES = 5;
/** Less speech than this and the speaking rate is not reported. */
const MIN_SPEECH_MS_FOR_RATE = 1000;

function emptyAnalysis(durationMs: number, loudnessDbfs = LOUDNESS_FLOOR_DB): VoiceAnalysis {
  return { durationMs, speechMs: 0, medianF0Hz: null, f0P10Hz: null, f0P90Hz: null, syllablesPerSecond: null, gender: 'unknown', loudnessDbfs };
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/**
 * Gender from the median F0; in the overlap band (150-180 Hz) from the vocal-tract cue
 * (vocalTractHz) instead, and unknown when that is ambiguous too.
 */
function* estimateGender(medianF0Hz: number | null, y: Float32Array, f0: Float64Array, pitchHop: number, slicer: Slicer): Steps<VoiceAnalysis['gender']> {
  if (medianF0Hz === null) return 'unknown';
  if (medianF0Hz < MALE_MAX_F0_HZ) return 'male';
  if (medianF0Hz > FEMALE_MIN_F0_HZ) return 'female';
  const tract = yield* vocalTractHz(y, f0, pitchHop, slicer);
  if (tract === null) return 'unknown';
  if (tract >= FEMALE_MIN_TRACT_HZ) return 'female';
  if (tract <= MALE_MAX_TRACT_HZ) return 'male';
  return 'unknown';
}

/** Resampled like resample() does it in one call, block by block (the output is the same). */
function* resampled(input: Float32Array, inputRate: number, outputRate: number, slicer: Slicer): Steps<Float32Array> {
  const r = createResampler(inputRate, outputRate);
  try {
    const parts: Float32Array[] = [];
    for (let from = 0; from < input.length; from += BLOCK) {
      parts.push(r.push(input.subarray(from, from + BLOCK)));
      // The filter is ~80 taps per output sample.
      if (slicer.spend(BLOCK * 40)) yield;
    }
    parts.push(r.end());
    const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
      if (slicer.spend(p.length)) yield;
    }
    return out;
  } finally {
    r.close();
  }
}

/** Mono float PCM in [-1, 1] at 16 kHz: NaN/Infinity zeroed, clipped, mean and DC removed. */
function* conditioned(samples: Float32Array, sampleRate: number, slicer: Slicer): Steps<Float32Array> {
  const clean = new Float32Array(samples.length);
  for (let from = 0; from < samples.length; from += BLOCK) {
    const to = Math.min(samples.length, from + BLOCK);
    for (let i = from; i < to; i++) {
      const v = samples[i]!;
      clean[i] = Number.isFinite(v) ? (v > 1 ? 1 : v < -1 ? -1 : v) : 0;
    }
    if (slicer.spend(BLOCK * 4)) yield;
  }
  const x = sampleRate === RATE ? clean : yield* resampled(clean, sampleRate, RATE, slicer);
  let mean = 0;
  for (let from = 0; from < x.length; from += BLOCK) {
    const to = Math.min(x.length, from + BLOCK);
    for (let i = from; i < to; i++) mean += x[i]!;
    if (slicer.spend(BLOCK)) yield;
  }
  mean /= Math.max(1, x.length);
  // One-pole DC blocker, y[n] = x[n] - x[n-1] + R·y[n-1]; R = 0.995 puts the corner near 13 Hz,
  // far below any voice F0, and removes drift that the global mean cannot.
  const out = new Float32Array(x.length);
  let prevX = 0;
  let prevY = 0;
  for (let from = 0; from < x.length; from += BLOCK) {
    const to = Math.min(x.length, from + BLOCK);
    for (let i = from; i < to; i++) {
      const v = x[i]! - mean;
      prevY = v - prevX + 0.995 * prevY;
      prevX = v;
      out[i] = prevY;
    }
    if (slicer.spend(BLOCK * 4)) yield;
  }
  return out;
}

/**
 * YIN F0 estimate for the frame starting at `start` in `x` (8 kHz); 0 when unvoiced.
 * `d` and `cmnd` are scratch arrays of length tauMax + 1.
 */
function yinFrame(x: Float32Array, start: number, tauMin: number, tauMax: number, d: Float64Array, cmnd: Float64Array): number {
  // d(tau) = Σ (x_j - x_{j+tau})² = e(0) + e(tau) - 2·r(tau), with the window energies e() from
  // a running sum: half the multiplications of the direct form.
  let e0 = 0;
  for (let j = 0; j < YIN_WINDOW; j++) e0 += x[start + j]! * x[start + j]!;
  if (e0 <= 1e-12) return 0;
  let eTau = e0;
  for (let tau = 1; tau <= tauMax; tau++) {
    const out = x[start + tau - 1]!;
    const inn = x[start + tau + YIN_WINDOW - 1]!;
    eTau += inn * inn - out * out;
    let r = 0;
    const base = start + tau;
    for (let j = 0; j < YIN_WINDOW; j++) r += x[start + j]! * x[base + j]!;
    d[tau] = Math.max(0, e0 + eTau - 2 * r);
  }
  // Cumulative mean normalised difference: d'(tau) = d(tau)·tau / Σ_{1..tau} d.
  let sum = 0;
  cmnd[0] = 1;
  for (let tau = 1; tau <= tauMax; tau++) {
    sum += d[tau]!;
    cmnd[tau] = sum > 0 ? (d[tau]! * tau) / sum : 1;
  }
  // Voicing: the deepest dip must be under VOICING_THRESHOLD. The period is then the FIRST dip
  // under max(YIN_THRESHOLD, deepest + 0.1): YIN's absolute threshold, relaxed for rougher
  // voices (creaky, low-pitched, formant-synthesised), whose dips are shallower; taking the
  // first qualifying dip rather than the deepest avoids octave-down errors.
  let deepest = Infinity;
  for (let tau = tauMin; tau <= tauMax; tau++) deepest = Math.min(deepest, cmnd[tau]!);
  if (!(deepest < VOICING_THRESHOLD)) return 0;
  const threshold = Math.max(YIN_THRESHOLD, deepest + 0.1);
  for (let tau = tauMin; tau <= tauMax; tau++) {
    if (cmnd[tau]! < threshold) {
      // Walk down to the bottom of this dip, then refine it with a parabola through 3 points.
      while (tau + 1 <= tauMax && cmnd[tau + 1]! < cmnd[tau]!) tau++;
      let t = tau;
      if (tau > 1 && tau < tauMax) {
        const a = cmnd[tau - 1]!;
        const b = cmnd[tau]!;
        const c = cmnd[tau + 1]!;
        const denom = a - 2 * b + c;
        if (denom > 0) t = tau + (0.5 * (a - c)) / denom;
      }
      return PITCH_RATE / t;
    }
  }
  return 0;
}

export function analyzeVoice(samples: Float32Array, sampleRate: number): VoiceAnalysis {
  const steps = measure(samples, sampleRate, new Slicer());
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** The analyses waiting for the one running (analyzeVoiceInChunks), in order of arrival. */
const waiting: (() => void)[] = [];
let analysing = false;

/** Resolves when no other analysis runs (first come, first served); an aborted `signal` leaves the line. */
function takeTurn(signal: AbortSignal | undefined): Promise<void> {
  signal?.throwIfAborted();
  if (!analysing) {
    analysing = true;
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      const at = waiting.indexOf(go);
      // Already handed the turn (it starts at the next turn of the loop): it sees the abort then.
      if (at === -1) return;
      waiting.splice(at, 1);
      reject(signal!.reason);
    };
    const go = () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    waiting.push(go);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The next in line starts at the next turn of the event loop, not in the one that ended this analysis. */
function passTurn(): void {
  const next = waiting.shift();
  if (next) setImmediate(next);
  else analysing = false;
}

/**
 * analyzeVoice with a pause (a turn of the event loop) after every few milliseconds of work,
 * so that measuring minutes of audio never holds the gateway's other requests for longer, and
 * one analysis at a time in the process (the others wait their turn, in order): whatever the
 * number of clips being measured, a turn of the event loop carries one slice of it. `samples`
 * may be given as a function, called when the analysis's turn comes (a clip decoded only then).
 * `onSlice` is called at each pause; an aborted `signal` stops the work at the next one (or
 * takes the analysis out of the line).
 */
export async function analyzeVoiceInChunks(
  samples: Float32Array | (() => Float32Array),
  sampleRate: number,
  options: { signal?: AbortSignal; onSlice?: () => void } = {},
): Promise<VoiceAnalysis> {
  await takeTurn(options.signal);
  try {
    options.signal?.throwIfAborted();
    const steps = measure(typeof samples === 'function' ? samples() : samples, sampleRate, new Slicer());
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
      options.onSlice?.();
      await nextTurn();
      if (options.signal?.aborted) {
        steps.return(emptyAnalysis(0)); // runs the generators' `finally` (frees the resampler)
        options.signal.throwIfAborted();
      }
    }
  } finally {
    passTurn();
  }
}

function* measure(samples: Float32Array, sampleRate: number, slicer: Slicer): Steps<VoiceAnalysis> {
  const validRate = Number.isFinite(sampleRate) && sampleRate >= 1000 && sampleRate <= 768000;
  const durationMs = validRate ? Math.round((samples.length / sampleRate) * 1000) : 0;
  // Under one frame there is nothing to measure.
  if (!validRate || samples.length / sampleRate < FRAME / RATE) return emptyAnalysis(durationMs);

  const x = yield* conditioned(samples, sampleRate, slicer);
  const frames = Math.max(0, Math.floor((x.length - FRAME) / HOP) + 1);
  if (frames === 0) return emptyAnalysis(durationMs);

  // Frame levels (mean square and dB).
  const meanSquare = new Float64Array(frames);
  const level = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let s = 0;
    const start = f * HOP;
    for (let j = 0; j < FRAME; j++) s += x[start + j]! * x[start + j]!;
    meanSquare[f] = s / FRAME;
    level[f] = db(meanSquare[f]!);
    if (slicer.spend(FRAME)) yield;
  }
  const sortedLevels = Float64Array.from(level).sort();
  const loud = percentile(sortedLevels, 0.95);
  const quiet = percentile(sortedLevels, 0.1);
  // Relative to the clip's own loud and quiet levels, so the VAD works at any recording level.
  // The min() keeps a clip with no quiet part (a sustained vowel, steady noise) analysable: the
  // voicing rule below then decides whether it is speech.
  const threshold = Math.max(-60, loud - 35, Math.min(quiet + 6, loud - 3));
  const active = new Uint8Array(frames);
  for (let f = 0; f < frames; f++) active[f] = level[f]! > threshold ? 1 : 0;
  // Bridge short gaps (stop closures inside words) so they count as speech time.
  const maxGap = 12;
  for (let f = 0, lastActive = -1; f < frames; f++) {
    if (!active[f]) continue;
    if (lastActive >= 0 && f - lastActive > 1 && f - lastActive - 1 <= maxGap) active.fill(1, lastActive + 1, f);
    lastActive = f;
  }

  // Pitch on active frames only. Frame f covers the same 25 ms at 8 kHz (start f·80).
  const y = yield* resampled(x, RATE, PITCH_RATE, slicer);
  const pitchHop = HOP / 2;
  const tauMin = Math.floor(PITCH_RATE / MAX_F0);
  const tauMax = Math.ceil(PITCH_RATE / MIN_F0);
  const d = new Float64Array(tauMax + 1);
  const cmnd = new Float64Array(tauMax + 1);
  const f0 = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    const start = f * pitchHop;
    if (!active[f] || start + tauMax + YIN_WINDOW > y.length) continue;
    f0[f] = yinFrame(y, start, tauMin, tauMax, d, cmnd);
    if (slicer.spend(tauMax * YIN_WINDOW)) yield;
  }
  // Drop voiced runs shorter than 3 frames (30 ms): a real vowel lasts longer; noise makes
  // single-frame false detections.
  for (let f = 0; f < frames;) {
    if (!f0[f]) {
      f++;
      continue;
    }
    let end = f;
    while (end < frames && f0[end]) end++;
    if (end - f < 3) f0.fill(0, f, end);
    f = end;
  }
  // Speech = active stretches that hold at least one voiced frame.
  for (let f = 0; f < frames;) {
    if (!active[f]) {
      f++;
      continue;
    }
    let end = f;
    let voiced = false;
    for (; end < frames && active[end]; end++) voiced ||= f0[end]! > 0;
    if (!voiced) active.fill(0, f, end);
    f = end;
  }

  let speechFrames = 0;
  let speechEnergy = 0;
  const voiced = new Float64Array(frames);
  let voicedFrames = 0;
  for (let f = 0; f < frames; f++) {
    if (!active[f]) continue;
    speechFrames++;
    speechEnergy += meanSquare[f]!;
    if (f0[f]! > 0) voiced[voicedFrames++] = f0[f]!;
  }
  if (speechFrames === 0) {
    let total = 0;
    for (let f = 0; f < frames; f++) total += meanSquare[f]!;
    return emptyAnalysis(durationMs, round1(db(total / frames)));
  }
  // Frames overlap (25 ms every 10 ms): speech time is frames × hop, capped at the clip.
  const speechMs = Math.min(durationMs, speechFrames * HOP_MS);
  const loudnessDbfs = round1(db(speechEnergy / speechFrames));

  // A typed array sorts numerically in native code: minutes of frames in a few milliseconds.
  const voicedF0 = voiced.subarray(0, voicedFrames).sort();
  const hasPitch = voicedF0.length >= MIN_VOICED_FRAMES;
  const medianF0Hz = hasPitch ? round1(percentile(voicedF0, 0.5)) : null;
  const f0P10Hz = hasPitch ? round1(percentile(voicedF0, 0.1)) : null;
  const f0P90Hz = hasPitch ? round1(percentile(voicedF0, 0.9)) : null;

  let syllablesPerSecond: number | null = null;
  if (hasPitch && speechMs >= MIN_SPEECH_MS_FOR_RATE) {
    const nuclei = countSyllableNuclei(yield* vowelBandLevels(x, frames, slicer), active, f0);
    syllablesPerSecond = Math.round((nuclei / (speechMs / 1000)) * 100) / 100;
  }

  const gender = yield* estimateGender(medianF0Hz, y, f0, pitchHop, slicer);
  return { durationMs, speechMs, medianF0Hz, f0P10Hz, f0P90Hz, syllablesPerSecond, gender, loudnessDbfs };
}
