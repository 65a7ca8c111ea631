import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SAMPLE_RATES } from './output-format.ts';
import { createResampler, resample } from './resample.ts';
import { rms, tone, zeroCrossingFrequency } from './test-signals.ts';

const RATES = [...SAMPLE_RATES];
const PAIRS = RATES.flatMap((a) => RATES.filter((b) => b !== a).map((b) => [a, b] as const));

function chunked(input: Float32Array, inRate: number, outRate: number, cuts: number[]): Float32Array {
  const r = createResampler(inRate, outRate);
  const parts: Float32Array[] = [];
  let prev = 0;
  for (const c of [...cuts, input.length]) {
    parts.push(r.push(input.subarray(prev, c)));
    prev = c;
  }
  parts.push(r.end());
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const sortedCuts = (cuts: number[], n: number) => cuts.map((c) => c % (n + 1)).sort((a, b) => a - b);

describe('resample', () => {
  it('property: one-shot length is round(n * out / in)', () => {
    fc.assert(
      fc.property(fc.nat(6000), fc.constantFrom(...RATES, 11025, 32000), fc.constantFrom(...RATES), (n, inRate, outRate) => {
        expect(resample(new Float32Array(n), inRate, outRate).length).toBe(Math.round((n * outRate) / inRate));
      }),
      { numRuns: 300 },
    );
  });

  it('property: chunked output equals one-shot output for any chunking (same samples, same length)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...PAIRS), fc.integer({ min: 0, max: 4000 }), fc.array(fc.nat(4000), { maxLength: 12 }), ([inRate, outRate], n, cuts) => {
        const input = tone(330, inRate, n / inRate, 0.8);
        const whole = resample(input, inRate, outRate);
        const parts = chunked(input, inRate, outRate, sortedCuts(cuts, n));
        expect(parts.length).toBe(whole.length);
        for (let i = 0; i < whole.length; i++) {
          if (Math.abs(parts[i]! - whole[i]!) > 1e-6) throw new Error(`sample ${i}: ${parts[i]} vs ${whole[i]}`);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('property: after each push the output so far is within the filter delay of round(consumed * ratio), never ahead', () => {
    fc.assert(
      fc.property(fc.constantFrom(...PAIRS), fc.array(fc.integer({ min: 0, max: 3000 }), { minLength: 1, maxLength: 10 }), ([inRate, outRate], sizes) => {
        const r = createResampler(inRate, outRate);
        const ratio = outRate / inRate;
        let consumed = 0;
        let produced = 0;
        for (const size of sizes) {
          produced += r.push(new Float32Array(size).fill(0.1)).length;
          consumed += size;
          const ideal = Math.round(consumed * ratio);
          expect(produced).toBeLessThanOrEqual(ideal);
          // Held back: the filter's half-length, 40 input samples at quality 5, stretched by the
          // downsampling factor (Speex widens the filter to cut lower).
          expect(produced).toBeGreaterThanOrEqual(ideal - Math.ceil((40 * Math.max(1, inRate / outRate) + 2) * ratio) - 1);
        }
        produced += r.end().length;
        expect(produced).toBe(Math.round(consumed * ratio));
      }),
      { numRuns: 200 },
    );
  });

  it.each(PAIRS)('%i -> %i Hz keeps a 440 Hz tone: frequency, level, and time alignment', (inRate, outRate) => {
    const out = resample(tone(440, inRate, 1), inRate, outRate);
    expect(out.length).toBe(outRate);
    expect(zeroCrossingFrequency(out, outRate)).toBeCloseTo(440, 0);
    expect(rms(out)).toBeCloseTo(0.5 / Math.SQRT2, 2);
    // No delay: away from the edges the output is the same tone sampled at the new rate.
    const ideal = tone(440, outRate, 1);
    let worst = 0;
    for (let i = Math.round(outRate * 0.01); i < outRate * 0.99; i++) worst = Math.max(worst, Math.abs(out[i]! - ideal[i]!));
    expect(worst).toBeLessThan(0.01);
  });

  it('removes what the lower rate cannot carry (6 kHz tone, 22050 -> 8000 Hz: no alias at 2 kHz)', () => {
    const out = resample(tone(6000, 22050, 1), 22050, 8000);
    expect(rms(out.subarray(200, 7800))).toBeLessThan(0.005); // < -43 dB re the 0.35 RMS input
  });

  it('chunked 20 ms frames of a tone: no clicks at frame edges (sample-to-sample step stays a sine step)', () => {
    const input = tone(440, 22050, 1, 0.9);
    const cuts = Array.from({ length: 49 }, (_, i) => (i + 1) * 441);
    const out = chunked(input, 22050, 48000, cuts);
    let maxStep = 0;
    // (The first and last 5 ms hold the filter's ringing at the signal's own hard start and end.)
    for (let i = 240; i < out.length - 240; i++) maxStep = Math.max(maxStep, Math.abs(out[i]! - out[i - 1]!));
    expect(maxStep).toBeLessThan(0.9 * 2 * Math.sin((Math.PI * 440) / 48000) * 1.05);
  });

  it('keepDelay: each 20 ms frame comes out whole at once, the same tone as aligned output, only later', () => {
    for (const [inRate, outRate] of [
      [8000, 24000],
      [16000, 24000],
      [24000, 8000],
      [24000, 16000],
    ] as const) {
      const input = tone(440, inRate, 0.5, 0.5);
      const frame = inRate / 50;
      const r = createResampler(inRate, outRate, { keepDelay: true });
      const parts: Float32Array[] = [];
      for (let at = 0; at < input.length; at += frame) {
        const part = r.push(input.subarray(at, at + frame));
        expect(part.length, `${inRate} -> ${outRate}`).toBe(outRate / 50);
        parts.push(part);
      }
      expect(r.end().length).toBe(0);
      const out = Float32Array.from(parts.flatMap((p) => [...p]));
      const aligned = resample(input, inRate, outRate);
      expect(out.length).toBe(aligned.length);
      // A lag of a few ms (the filter's leading silence), then the same signal.
      const lead = out.findIndex((v) => Math.abs(v) > 0.05);
      expect(lead).toBeGreaterThan(aligned.findIndex((v) => Math.abs(v) > 0.05));
      expect(lead).toBeLessThan(outRate / 100);
      expect(zeroCrossingFrequency(out.subarray(lead), outRate)).toBeCloseTo(440, -1);
    }
  });

  it('same rate passes samples through; a new array one-shot', () => {
    const x = Float32Array.of(0.1, 0.2, 0.3);
    expect(resample(x, 16000, 16000)).toEqual(x);
    expect(resample(x, 16000, 16000)).not.toBe(x);
    const r = createResampler(16000, 16000);
    expect(r.push(x)).toEqual(x);
    expect(r.end().length).toBe(0);
  });

  it('end() frees the state: a second end or push throws, close() is idempotent', () => {
    const r = createResampler(22050, 16000);
    r.push(new Float32Array(100));
    r.end();
    expect(() => r.end()).toThrow();
    expect(() => r.push(new Float32Array(1))).toThrow();
    r.close();
    const s = createResampler(22050, 16000);
    s.close();
    s.close();
  });

  it('rejects non-integer or non-positive rates', () => {
    expect(() => createResampler(0, 16000)).toThrow(TypeError);
    expect(() => createResampler(22050.5, 16000)).toThrow(TypeError);
  });

  it('3,000 resamplers created and closed reuse the wasm heap (no leak per resampler)', () => {
    for (let i = 0; i < 3000; i++) createResampler(22050, 48000).close();
    const before = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < 3000; i++) createResampler(22050, 48000).close();
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(1 << 20);
  });
});
