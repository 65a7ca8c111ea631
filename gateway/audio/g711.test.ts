import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { alawToLinear, decodeAlaw, decodeMulaw, encodeAlaw, encodeMulaw, linearToAlaw, linearToMulaw, mulawToLinear } from './g711.ts';

const ALL_S16 = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);

describe('G.711', () => {
  it('mu-law matches the reference coder at known points', () => {
    // Values of the ITU-T G.191 reference coder (g711.c).
    expect(linearToMulaw(0)).toBe(0xff);
    expect(linearToMulaw(-1)).toBe(0x7f);
    expect(linearToMulaw(32767)).toBe(0x80);
    expect(linearToMulaw(-32768)).toBe(0x00);
    expect(linearToMulaw(1000)).toBe(0xce);
    expect(linearToMulaw(-1000)).toBe(0x4e);
    expect(mulawToLinear(0xff)).toBe(0);
    expect(mulawToLinear(0x7f)).toBe(0);
    expect(mulawToLinear(0x80)).toBe(32124);
    expect(mulawToLinear(0x00)).toBe(-32124);
    expect(mulawToLinear(0xce)).toBe(988);
    expect(mulawToLinear(0xfe)).toBe(8);
  });

  it('A-law matches the reference coder at known points (even bits inverted, 0x55)', () => {
    expect(linearToAlaw(-8)).toBe(0x55);
    expect(linearToAlaw(-9)).toBe(0x55);
    expect(linearToAlaw(-17)).toBe(0x54);
    expect(linearToAlaw(0)).toBe(0xd5);
    expect(linearToAlaw(-1)).toBe(0x55);
    expect(linearToAlaw(32767)).toBe(0xaa);
    expect(linearToAlaw(-32768)).toBe(0x2a);
    expect(linearToAlaw(1000)).toBe(0xfa);
    expect(alawToLinear(0xd5)).toBe(8);
    expect(alawToLinear(0x55)).toBe(-8);
    expect(alawToLinear(0xaa)).toBe(32256);
    expect(alawToLinear(0x2a)).toBe(-32256);
    expect(alawToLinear(0xfa)).toBe(1008);
  });

  it('tables agree with the scalar coder for every s16 value and every code', () => {
    const mu = encodeMulaw(ALL_S16);
    const a = encodeAlaw(ALL_S16);
    for (let i = 0; i < ALL_S16.length; i++) {
      if (mu[i] !== linearToMulaw(ALL_S16[i]!) || a[i] !== linearToAlaw(ALL_S16[i]!)) throw new Error(`table mismatch at ${ALL_S16[i]}`);
    }
    const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(Array.from(decodeMulaw(codes))).toEqual(Array.from(codes, mulawToLinear));
    expect(Array.from(decodeAlaw(codes))).toEqual(Array.from(codes, alawToLinear));
  });

  it('decode then encode gives the same code back (mu-law: except negative zero 0x7f)', () => {
    for (let c = 0; c < 256; c++) {
      expect(linearToAlaw(alawToLinear(c))).toBe(c);
      if (c !== 0x7f) expect(linearToMulaw(mulawToLinear(c))).toBe(c);
    }
  });

  it('encoding is monotonic in the linear value (decoded levels never go down)', () => {
    const mu = decodeMulaw(encodeMulaw(ALL_S16));
    const a = decodeAlaw(encodeAlaw(ALL_S16));
    for (let i = 1; i < ALL_S16.length; i++) {
      if (mu[i]! < mu[i - 1]! || a[i]! < a[i - 1]!) throw new Error(`not monotonic at ${ALL_S16[i]}`);
    }
  });

  // Round-trip error: half a quantisation step plus the truncation to 13/14 bits. Steps double
  // per segment (about 8 bits of relative precision); the top is clipped at the largest level
  // (32124 mu-law, 32256 A-law).
  it('property: round-trip error at most max(8, |x|/16)', () => {
    fc.assert(
      fc.property(fc.integer({ min: -32768, max: 32767 }), (x) => {
        const s = Int16Array.of(x);
        const bound = Math.max(8, Math.abs(x) / 16);
        expect(Math.abs(decodeMulaw(encodeMulaw(s))[0]! - x)).toBeLessThanOrEqual(bound);
        expect(Math.abs(decodeAlaw(encodeAlaw(s))[0]! - x)).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 5000 },
    );
  });

  it('exhaustive: worst round-trip error is 8 below 256 and under 1/22 (mu) and 1/31 (A) relative above', () => {
    const mu = decodeMulaw(encodeMulaw(ALL_S16));
    const a = decodeAlaw(encodeAlaw(ALL_S16));
    let small = 0;
    let muRel = 0;
    let aRel = 0;
    for (let i = 0; i < ALL_S16.length; i++) {
      const x = ALL_S16[i]!;
      if (Math.abs(x) < 256) small = Math.max(small, Math.abs(mu[i]! - x), Math.abs(a[i]! - x));
      else if (Math.abs(x) <= 32000) {
        muRel = Math.max(muRel, Math.abs(mu[i]! - x) / Math.abs(x));
        aRel = Math.max(aRel, Math.abs(a[i]! - x) / Math.abs(x));
      }
    }
    expect(small).toBeLessThanOrEqual(8);
    expect(muRel).toBeLessThan(1 / 22);
    expect(aRel).toBeLessThanOrEqual(1 / 31);
  });

  it('float input is rounded like floatToS16 before encoding', () => {
    expect(Array.from(encodeMulaw(Float32Array.of(0, 1, -1, 2, -2, NaN)))).toEqual([0xff, 0x80, 0x00, 0x80, 0x00, 0xff]);
    expect(Array.from(encodeAlaw(Float32Array.of(0, 1, -1)))).toEqual([0xd5, 0xaa, 0x2a]);
  });

  // Optional cross-checks against ffmpeg (skipped when it is not installed).
  const ffmpeg = (args: string[], input: Buffer) => execFileSync('ffmpeg', ['-v', 'error', ...args], { input, maxBuffer: 1 << 22 });

  it('cross-check: ffmpeg decodes every code to the same s16 value', () => {
    const codes = Buffer.from(Uint8Array.from({ length: 256 }, (_, i) => i));
    for (const [fmt, ours] of [
      ['mulaw', decodeMulaw(codes)],
      ['alaw', decodeAlaw(codes)],
    ] as const) {
      const out = ffmpeg(['-f', fmt, '-ar', '8000', '-ac', '1', '-i', '-', '-f', 's16le', '-'], codes);
      expect(Array.from(new Int16Array(out.buffer, out.byteOffset, 256))).toEqual(Array.from(ours));
    }
  });

  it('cross-check: ffmpeg encodes to the same or the neighbouring level (its thresholds sit midway between levels)', () => {
    for (const [fmt, ours, dec] of [
      ['mulaw', encodeMulaw(ALL_S16), mulawToLinear],
      ['alaw', encodeAlaw(ALL_S16), alawToLinear],
    ] as const) {
      const theirs = ffmpeg(['-f', 's16le', '-ar', '8000', '-ac', '1', '-i', '-', '-f', fmt, '-'], Buffer.from(ALL_S16.buffer));
      const levels = [...new Set(Array.from({ length: 256 }, (_, c) => dec(c)))].sort((x, y) => x - y);
      let differing = 0;
      for (let i = 0; i < ALL_S16.length; i++) {
        if (ours[i] === theirs[i]) continue;
        differing++;
        const gap = Math.abs(levels.indexOf(dec(ours[i]!)) - levels.indexOf(dec(theirs[i]!)));
        if (gap !== 1) throw new Error(`${fmt}: ${ALL_S16[i]} coded ${ours[i]} here, ${theirs[i]} by ffmpeg`);
      }
      expect(differing / ALL_S16.length).toBeLessThan(0.02);
    }
  });
});
