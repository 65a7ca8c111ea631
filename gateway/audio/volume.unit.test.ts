import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { floatToS16 } from './pcm.ts';
import { tone } from './test-signals.ts';
import { applyVolume, softLimit } from './volume.ts';

describe('volume', () => {
  it('property: output never exceeds full scale, for any gain in [0.5, 2] and any input', () => {
    fc.assert(
      fc.property(fc.float32Array({ maxLength: 200 }), fc.double({ min: 0.5, max: 2, noNaN: true }), (x, gain) => {
        const y = applyVolume(x, gain);
        for (let i = 0; i < y.length; i++) if (!(Math.abs(y[i]!) <= 1)) throw new Error(`${x[i]} x ${gain} -> ${y[i]}`);
      }),
    );
  });

  it('property: exact gain below the knee (|x * gain| <= 0.9)', () => {
    fc.assert(
      fc.property(fc.float({ min: -1, max: 1, noNaN: true }), fc.double({ min: 0.5, max: 2, noNaN: true }), (x, gain) => {
        fc.pre(Math.abs(x * gain) <= 0.9);
        expect(applyVolume(Float32Array.of(x), gain)[0]).toBe(Math.fround(Math.fround(x) * gain));
      }),
    );
  });

  it('property: the limiter is odd and monotonic', () => {
    fc.assert(
      fc.property(fc.double({ min: -50, max: 50, noNaN: true }), fc.double({ min: -50, max: 50, noNaN: true }), (a, b) => {
        expect(softLimit(-a)).toBe(-softLimit(a));
        if (a <= b) expect(softLimit(a)).toBeLessThanOrEqual(softLimit(b));
      }),
    );
  });

  it('no corner at the knee: continuous with slope 1, then flattening toward 1', () => {
    const e = 1e-6;
    expect((softLimit(0.9 + e) - softLimit(0.9)) / e).toBeCloseTo(1, 4);
    expect(softLimit(1)).toBeCloseTo(0.9 + 0.1 * Math.tanh(1), 12);
    expect(softLimit(1.2)).toBeLessThan(1);
    expect(softLimit(1e9)).toBe(1);
    expect(softLimit(Number.NaN)).toBe(0);
    expect(softLimit(-Infinity)).toBe(-1);
  });

  it('a 0.6 tone at gain 2 (peaks at 1.2) is bent below full scale, where hard clipping would flatten 37 % of it', () => {
    const y = applyVolume(tone(440, 48000, 0.1, 0.6), 2);
    const s = floatToS16(y);
    let fullScale = 0;
    for (const v of s) if (v === 32767 || v === -32768) fullScale++;
    expect(fullScale).toBe(0);
    const peak = Math.max(...Array.from(y, Math.abs));
    expect(peak).toBeGreaterThan(0.99);
    expect(peak).toBeLessThan(1);
  });

  it('gain 0.5 halves, gain 1 leaves quiet audio untouched', () => {
    const x = tone(440, 16000, 0.01, 0.6);
    expect(applyVolume(x, 1)).toEqual(x);
    const half = applyVolume(x, 0.5);
    for (let i = 0; i < x.length; i++) expect(half[i]).toBe(Math.fround(x[i]! * 0.5));
  });
});
