import { describe, expect, it } from 'vitest';
import { linearToMulaw } from './g711.ts';
import { AUDIBLE_THRESHOLD, AudibleWatch, firstAudibleMs, firstAudibleSample } from './first-audible.ts';
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

  it('PCM s16: the threshold is of 16-bit full scale (-50 dBFS is about 104)', () => {
    const quiet = new Int16Array(200).fill(100);
    expect(firstAudibleSample(quiet)).toBe(-1);
    quiet[150] = -110;
    expect(firstAudibleSample(quiet)).toBe(150);
    expect(firstAudibleSample(floatToS16(tone(480, 240, 0.5)))).toBe(480);
    // A threshold of its own: -20 dBFS (3277) ignores a sample at 3000.
    expect(firstAudibleSample(Int16Array.from([0, 3000, 4000]), 0.1)).toBe(2);
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

describe('AudibleWatch', () => {
  const silent = (ms: number) => new Int16Array((24_000 * ms) / 1000);

  it('chunks sent in time: heard at the first send plus the audio before the sound', () => {
    const w = new AudibleWatch();
    // 100 ms of silence at t=1000, then 50 ms of silence and the tone at t=1010 (sent ahead of its playback).
    expect(w.sent(silent(100), 24_000, 1000)).toBeUndefined();
    const second = floatToS16(tone(1200, 240, 0.5));
    expect(w.sent(second, 24_000, 1010)).toBe(1000 + 100 + 50);
    expect(w.heardAt).toBe(1150);
    // Found once: later chunks change nothing.
    expect(w.sent(floatToS16(tone(0, 240, 0.5)), 24_000, 1020)).toBeUndefined();
    expect(w.heardAt).toBe(1150);
  });

  it('a chunk sent after its place in the playback is heard from when it was sent (the listener waited)', () => {
    const w = new AudibleWatch();
    w.sent(silent(100), 24_000, 1000);
    // Due to play at 1100, sent at 1300: its sound, 10 ms in, is heard at 1310.
    expect(w.sentBytes(s16leBytes(floatToS16(tone(240, 240, 0.5))), 'pcm_s16le', 24_000, 1300)).toBe(1310);
  });

  it('empty chunks start nothing; all-silent audio is never heard', () => {
    const w = new AudibleWatch();
    expect(w.sent(new Int16Array(0), 24_000, 500)).toBeUndefined();
    expect(w.sent(silent(20), 24_000, 1000)).toBeUndefined();
    expect(w.sent(floatToS16(tone(0, 24, 0.5)), 24_000, 1001)).toBe(1020);
    expect(new AudibleWatch().sent(silent(1000), 24_000, 0)).toBeUndefined();
  });
});
