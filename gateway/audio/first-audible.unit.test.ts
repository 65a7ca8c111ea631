import { describe, expect, it } from 'vitest';
import { linearToMulaw } from './g711.ts';
import { AUDIBLE_THRESHOLD, firstAudibleMs, firstAudibleSample } from './first-audible.ts';
import { floatToS16, s16leBytes } from './pcm.ts';

const tone = (lead: number, length: number, amplitude: number) => {
  const x = new Float32Array(lead + length);
  for (let i = 0; i < length; i++) x[lead + i] = amplitude * Math.sin((2 * Math.PI * 440 * i) / 24_000 + Math.PI / 2);
  return x;
};

describe('firstAudibleSample', () => {
  it('finds the first sample at or above the threshold, past a silent lead-in', () => {
    expect(firstAudibleSample(tone(480, 240, 0.5))).toBe(480);
    expect(firstAudibleSample(new Float32Array(100))).toBe(-1);
    // Dither below -50 dBFS is silence.
    expect(firstAudibleSample(Float32Array.from({ length: 100 }, () => AUDIBLE_THRESHOLD / 2))).toBe(-1);
  });

  it('pcm16 at 24 kHz: 20 ms of silence then a tone is audible at 20 ms; all silence is undefined', () => {
    expect(firstAudibleMs(s16leBytes(floatToS16(tone(480, 240, 0.5))), 'pcm_s16le', 24_000)).toBe(20);
    expect(firstAudibleMs(s16leBytes(floatToS16(new Float32Array(480))), 'pcm_s16le', 24_000)).toBeUndefined();
  });

  it('G.711 mu-law at 8 kHz: decoded before it is measured', () => {
    const pcm = new Int16Array(160 + 80).fill(16_000, 160);
    expect(firstAudibleMs(Uint8Array.from(pcm, linearToMulaw), 'pcm_mulaw', 8000)).toBe(20);
  });
});
