import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameAligner, f32leBytes, f32leToFloat, floatToS16, s16ToFloat, s16leBytes, s16leToFloat, s16leToS16, s16leView } from './pcm.ts';
import { decodePcm, decodeSamples } from './sample-encoding.ts';

describe('pcm', () => {
  it('s16 -> float -> s16 is exact for every s16 value', () => {
    const all = new Int16Array(65536);
    for (let i = 0; i < all.length; i++) all[i] = i - 32768;
    expect(floatToS16(s16ToFloat(all))).toEqual(all);
  });

  it('property: s16 samples survive s16 -> bytes -> s16 and -> float -> s16', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 500 }), (values) => {
        const s = Int16Array.from(values);
        expect(s16leToS16(s16leBytes(s))).toEqual(s);
        expect(floatToS16(s16leToFloat(s16leBytes(s)))).toEqual(s);
      }),
    );
  });

  it('decodePcm: the integer encodings as s16 (no float round trip), the same samples as decodeSamples; linear ones share the bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        for (const encoding of ['pcm_s16le', 'pcm_mulaw', 'pcm_alaw'] as const) {
          const s16 = decodePcm(bytes, encoding);
          expect(s16).toBeInstanceOf(Int16Array);
          expect(s16ToFloat(s16 as Int16Array)).toEqual(decodeSamples(bytes, encoding));
        }
        const f32 = decodePcm(bytes, 'pcm_f32le');
        expect(f32).toBeInstanceOf(Float32Array);
        expect([...f32]).toEqual([...decodeSamples(bytes, 'pcm_f32le')]);
      }),
    );
    const aligned = s16leBytes(Int16Array.of(1, -2, 3));
    const view = decodePcm(aligned, 'pcm_s16le');
    expect(view.buffer).toBe(aligned.buffer);
  });

  it("s16leView: the same bytes as s16leBytes, sharing the samples' memory", () => {
    const samples = Int16Array.of(0, 1, -1, 32767, -32768).subarray(1);
    const view = s16leView(samples);
    expect(view).toEqual(s16leBytes(samples));
    expect(view.buffer).toBe(samples.buffer);
    expect(view.byteOffset).toBe(samples.byteOffset);
  });

  it('property: float -> s16 rounds to nearest within range and clamps outside', () => {
    fc.assert(
      fc.property(fc.float({ min: -4, max: 4, noNaN: true }), (x) => {
        const f = Math.fround(x);
        const s = floatToS16(Float32Array.of(f))[0]!;
        const ideal = f * 32768;
        if (ideal >= 32767) expect(s).toBe(32767);
        else if (ideal <= -32768) expect(s).toBe(-32768);
        else expect(Math.abs(s - ideal)).toBeLessThanOrEqual(0.5);
      }),
    );
  });

  it('clamps full scale and beyond, and maps NaN to 0', () => {
    expect(Array.from(floatToS16(Float32Array.of(1, -1, 1.5, -1.5, Infinity, -Infinity, NaN, 0.5)))).toEqual([
      32767, -32768, 32767, -32768, 32767, -32768, 0, 16384,
    ]);
  });

  it('f32le bytes round trip, also from an unaligned buffer', () => {
    const x = Float32Array.of(0, 0.25, -1, 1e-7, 3.5);
    const bytes = f32leBytes(x);
    expect(bytes.length).toBe(20);
    expect(bytes.readFloatLE(4)).toBe(0.25);
    expect(f32leToFloat(bytes)).toEqual(x);
    const unaligned = Buffer.alloc(21);
    bytes.copy(unaligned, 1);
    expect(f32leToFloat(unaligned.subarray(1))).toEqual(x);
  });

  it('odd-length and truncated byte input decodes whole samples only', () => {
    const bytes = Buffer.from([0x01, 0x00, 0xff, 0x7f, 0x00]);
    expect(Array.from(s16leToS16(bytes))).toEqual([1, 32767]);
    expect(Array.from(s16leToS16(bytes.subarray(1)))).toEqual([-256, 127]); // unaligned view, copied
    expect(s16leToS16(new Uint8Array(1)).length).toBe(0);
    expect(f32leToFloat(new Uint8Array(7)).length).toBe(1);
  });

  it('property: FrameAligner output is the whole frames of the concatenated input, for any chunking', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(300), { maxLength: 20 }), fc.constantFrom(1, 2, 3, 4, 8), (data, cuts, frame) => {
        const aligner = new FrameAligner(frame);
        const points = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        const outs: Uint8Array[] = [];
        let prev = 0;
        for (const p of [...points, data.length]) {
          const out = aligner.push(data.subarray(prev, p));
          expect(out.length % frame).toBe(0);
          outs.push(out);
          prev = p;
        }
        const joined = Buffer.concat(outs);
        const whole = data.length - (data.length % frame);
        expect(joined).toEqual(Buffer.from(data.subarray(0, whole)));
        expect(aligner.pending).toBe(data.length - whole);
      }),
    );
  });
});
