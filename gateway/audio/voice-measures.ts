// The measuring steps of the voice analysis (gateway/audio/voice-analysis.ts, whose header
// documents the method): the frames and rates it works at, its pauses, the band filters and
// syllable nuclei of the speaking rate, and the LPC formants of the vocal-tract cue.

export const RATE = 16000;
export const PITCH_RATE = 8000;
export const HOP = 160; // 10 ms at 16 kHz
export const FRAME = 400; // 25 ms at 16 kHz
/** Samples per block in the per-sample passes (conditioning, resampling, filters). */
export const BLOCK = 1 << 15;
/**
 * Work (roughly multiply-adds) between two pauses of the chunked analysis: about a millisecond
 * on an idle core. What another request waits for when it arrives during a slice: 2,000,000
 * took up to ~30 ms on a loaded 2-core machine (bench/abuse.ts --only clones --profile).
 */
const WORK_PER_SLICE = 500_000;

export const LOUDNESS_FLOOR_DB = -100;

/** A level in dBFS from a mean square, floored at LOUDNESS_FLOOR_DB. */
export function db(meanSquare: number): number {
  return meanSquare > 0 ? Math.max(LOUDNESS_FLOOR_DB, 10 * Math.log10(meanSquare)) : LOUDNESS_FLOOR_DB;
}

/** The analysis as steps: each `yield` is a pause after about WORK_PER_SLICE of work. */
export type Steps<T> = Generator<void, T, void>;

/** Counts the work done since the last pause; true when it is time for the next one. */
export class Slicer {
  private work = 0;
  spend(units: number): boolean {
    this.work += units;
    if (this.work < WORK_PER_SLICE) return false;
    this.work = 0;
    return true;
  }
}

/** Linear-interpolated percentile (p in [0, 1]) of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const pos = (sorted.length - 1) * p;
  const lo = Math.floor(pos);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/** RBJ 2nd-order Butterworth high- or low-pass at 16 kHz, applied in place. */
export function* butterworth(x: Float32Array, kind: 'lowpass' | 'highpass', cornerHz: number, slicer: Slicer): Steps<void> {
  const w = (2 * Math.PI * cornerHz) / RATE;
  const cos = Math.cos(w);
  const alpha = Math.sin(w) / (2 * Math.SQRT1_2);
  const a0 = 1 + alpha;
  const b0 = (kind === 'lowpass' ? (1 - cos) / 2 : (1 + cos) / 2) / a0;
  const b1 = (kind === 'lowpass' ? 1 - cos : -(1 + cos)) / a0;
  const a1 = (-2 * cos) / a0;
  const a2 = (1 - alpha) / a0;
  let x1 = 0;
  let x2 = 0;
  let y1 = 0;
  let y2 = 0;
  for (let from = 0; from < x.length; from += BLOCK) {
    const to = Math.min(x.length, from + BLOCK);
    for (let i = from; i < to; i++) {
      const v = x[i]!;
      const y = b0 * v + b1 * x1 + b0 * x2 - a1 * y1 - a2 * y2;
      x2 = x1;
      x1 = v;
      y2 = y1;
      y1 = y;
      x[i] = y;
    }
    if (slicer.spend(BLOCK * 5)) yield;
  }
}

/**
 * Frame levels (dB) of the 500-2000 Hz band, where vowels (F1/F2) carry their energy and
 * nasals, voicing murmur and fricatives carry little: the dips between syllables are deeper
 * there than in the full band. (The band was chosen by counting nuclei in flite and espeak-ng
 * renderings of a 23-syllable sentence at 5 speaking rates each: 6.5% mean error, against
 * 10.5% for the full-band level.)
 */
export function* vowelBandLevels(x: Float32Array, frames: number, slicer: Slicer): Steps<Float64Array> {
  // Copied in blocks: a fresh array of minutes of audio costs its page faults as it is written.
  const band = new Float32Array(x.length);
  for (let from = 0; from < x.length; from += BLOCK) {
    band.set(x.subarray(from, from + BLOCK), from);
    if (slicer.spend(BLOCK)) yield;
  }
  // Two passes of each: 4th-order slopes.
  yield* butterworth(band, 'highpass', 500, slicer);
  yield* butterworth(band, 'highpass', 500, slicer);
  yield* butterworth(band, 'lowpass', 2000, slicer);
  yield* butterworth(band, 'lowpass', 2000, slicer);
  const out = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let s = 0;
    const start = f * HOP;
    for (let j = 0; j < FRAME; j++) s += band[start + j]! * band[start + j]!;
    out[f] = db(s / FRAME);
    if (slicer.spend(FRAME)) yield;
  }
  return out;
}

/**
 * Syllable nuclei: peaks of the vowel-band level envelope (smoothed over 30 ms) that are voiced,
 * no more than 25 dB below the band's loud level (95th percentile), and separated from the
 * previous nucleus by a dip of at least 2 dB below the lower of the two peaks; two peaks without
 * such a dip are one nucleus (the higher). 2 dB is de Jong & Wempe's value.
 */
export function countSyllableNuclei(level: Float64Array, active: Uint8Array, f0: Float64Array): number {
  const n = level.length;
  const env = new Float64Array(n);
  for (let f = 0; f < n; f++) {
    const lo = Math.max(0, f - 1);
    const hi = Math.min(n - 1, f + 1);
    let s = 0;
    for (let k = lo; k <= hi; k++) s += level[k]!;
    env[f] = s / (hi - lo + 1);
  }
  const floor = percentile(Float64Array.from(level).sort(), 0.95) - 25;
  const minDip = 2;
  let count = 0;
  let lastPeak = -Infinity; // level of the current (last accepted) nucleus
  let dipSince = Infinity; // lowest level since that nucleus
  for (let f = 0; f < n; f++) {
    const v = Math.max(env[f]!, floor);
    // Silence between phrases is an unbounded dip.
    if (!active[f]) {
      dipSince = -Infinity;
      continue;
    }
    dipSince = Math.min(dipSince, v);
    const isPeak = (f === 0 || env[f - 1]! < env[f]!) && (f === n - 1 || env[f + 1]! <= env[f]!);
    if (!isPeak || v <= floor || !f0[f]) continue;
    if (count === 0 || dipSince <= Math.min(lastPeak, v) - minDip) {
      count++;
      lastPeak = v;
      dipSince = v;
    } else if (v > lastPeak) {
      // Same nucleus, higher top: move it here.
      lastPeak = v;
      dipSince = v;
    }
  }
  return count;
}

const LPC_ORDER = 10;
const LPC_WINDOW = 200; // 25 ms at 8 kHz
const LPC_STEP_HZ = 10;
const LPC_BINS = Math.floor(3900 / LPC_STEP_HZ) + 1;
/** cos/sin(ω·k) for the LPC envelope grid (0-3900 Hz every 10 Hz), k = 0..order. */
const LPC_COS = new Float64Array(LPC_BINS * (LPC_ORDER + 1));
const LPC_SIN = new Float64Array(LPC_BINS * (LPC_ORDER + 1));
for (let b = 0; b < LPC_BINS; b++) {
  const omega = (2 * Math.PI * b * LPC_STEP_HZ) / PITCH_RATE;
  for (let k = 0; k <= LPC_ORDER; k++) {
    LPC_COS[b * (LPC_ORDER + 1) + k] = Math.cos(omega * k);
    LPC_SIN[b * (LPC_ORDER + 1) + k] = Math.sin(omega * k);
  }
}
const HAMMING = Float64Array.from({ length: LPC_WINDOW }, (_, j) => 0.54 - 0.46 * Math.cos((2 * Math.PI * j) / (LPC_WINDOW - 1)));

/**
 * The first three peaks above 200 Hz of the LPC envelope of one 25 ms frame (8 kHz, starting at
 * `start`): pre-emphasis 0.97, Hamming window, autocorrelation and Levinson-Durbin. [] when the
 * frame is silent or the recursion is unstable.
 */
function lpcFormants(y: Float32Array, start: number): number[] {
  const w = new Float64Array(LPC_WINDOW);
  for (let j = 0; j < LPC_WINDOW; j++) {
    const i = start + j;
    w[j] = (y[i]! - 0.97 * (i > 0 ? y[i - 1]! : 0)) * HAMMING[j]!;
  }
  const r = new Float64Array(LPC_ORDER + 1);
  for (let k = 0; k <= LPC_ORDER; k++) {
    let s = 0;
    for (let j = k; j < LPC_WINDOW; j++) s += w[j]! * w[j - k]!;
    r[k] = s;
  }
  if (!(r[0]! > 1e-10)) return [];
  r[0] = r[0]! * 1.0001; // a little white-noise correction keeps the recursion well conditioned
  const a = new Float64Array(LPC_ORDER + 1);
  const prev = new Float64Array(LPC_ORDER + 1);
  a[0] = 1;
  let err = r[0]!;
  for (let i = 1; i <= LPC_ORDER; i++) {
    let acc = r[i]!;
    for (let j = 1; j < i; j++) acc += a[j]! * r[i - j]!;
    const k = -acc / err;
    prev.set(a);
    for (let j = 1; j < i; j++) a[j] = prev[j]! + k * prev[i - j]!;
    a[i] = k;
    err *= 1 - k * k;
    if (!(err > 0)) return [];
  }
  const peaks: number[] = [];
  let before = 0;
  let current = 0;
  for (let b = 0; b < LPC_BINS && peaks.length < 3; b++) {
    let re = 0;
    let im = 0;
    const row = b * (LPC_ORDER + 1);
    for (let k = 0; k <= LPC_ORDER; k++) {
      re += a[k]! * LPC_COS[row + k]!;
      im -= a[k]! * LPC_SIN[row + k]!;
    }
    const gain = -Math.log(re * re + im * im + 1e-30);
    if (b >= 2 && current > before && current > gain && (b - 1) * LPC_STEP_HZ >= 200) peaks.push((b - 1) * LPC_STEP_HZ);
    before = current;
    current = gain;
  }
  return peaks;
}

/** √(median F2 · median F3) over voiced frames with three LPC peaks; null under 20 such frames. */
export function* vocalTractHz(y: Float32Array, f0: Float64Array, pitchHop: number, slicer: Slicer): Steps<number | null> {
  const f2: number[] = [];
  const f3: number[] = [];
  for (let f = 0; f < f0.length; f++) {
    if (!f0[f] || f * pitchHop + LPC_WINDOW > y.length) continue;
    const peaks = lpcFormants(y, f * pitchHop);
    // Window, autocorrelation and the envelope on a 10 Hz grid.
    if (slicer.spend(LPC_WINDOW * (LPC_ORDER + 2) + LPC_BINS * (LPC_ORDER + 1) * 2)) yield;
    if (peaks.length < 3) continue;
    f2.push(peaks[1]!);
    f3.push(peaks[2]!);
  }
  if (f2.length < 20) return null;
  f2.sort((p, q) => p - q);
  f3.sort((p, q) => p - q);
  return Math.sqrt(percentile(f2, 0.5) * percentile(f3, 0.5));
}
