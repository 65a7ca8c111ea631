// The page's recordings as the API reads them: the gateway's own WAV parser takes the file, and
// the samples come back as they went in (to 16-bit precision), clipped where they were over.
import { describe, expect, it } from 'vitest';
import { parseWav } from '../../gateway/audio/wav.ts';
import { encodeWav16, levelPercent } from './wav.ts';

describe('encodeWav16', () => {
  it('writes a 16-bit mono WAV the gateway parses, samples kept and clipped', () => {
    const samples = Float32Array.from([0, 0.5, -0.5, 1, -1, 1.7, -3]);
    const wav = parseWav(Buffer.from(encodeWav16(samples, 24000)));
    expect(wav).toMatchObject({ sampleRate: 24000, channels: 1, frameCount: 7 });
    const back = [...wav.samples].map((x) => Math.round(x * 1000) / 1000);
    expect(back).toEqual([0, 0.5, -0.5, 1, -1, 1, -1]);
  });
});

describe('levelPercent', () => {
  it('is 0 for silence, 100 at full scale, and halfway at -30 dBFS', () => {
    expect(levelPercent(new Float32Array(128))).toBe(0);
    expect(levelPercent(new Float32Array(128).fill(1))).toBe(100);
    expect(levelPercent(new Float32Array(128).fill(10 ** (-30 / 20)))).toBe(50);
    expect(levelPercent(new Float32Array(128).fill(1e-5))).toBe(0);
  });
});
