import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMp3Encoder, encodeMp3, mp3BitRate } from './mp3.ts';
import { scanMpegFrames } from './mp3-frames.ts';
import { MP3_BIT_RATES, SAMPLE_RATES } from './output-format.ts';
import { s16leToFloat } from './pcm.ts';
import { rms, tone, zeroCrossingFrequency } from './test-signals.ts';

/** LAME's encoder delay (576 + 529 samples) plus up to two frames of flush padding. */
const maxExtraSeconds = (rate: number, samplesPerFrame: number) => (1105 + 2 * samplesPerFrame) / rate;

describe('mp3', () => {
  it('bit rate ceiling: 320 kb/s at 32 kHz and up, 160 kb/s for 16-24 kHz (MPEG-2), 64 kb/s at 8 kHz (MPEG-2.5 in LAME)', () => {
    expect(mp3BitRate(48000, 320000)).toBe(320000);
    expect(mp3BitRate(44100, 32000)).toBe(32000);
    expect(mp3BitRate(24000, 320000)).toBe(160000);
    expect(mp3BitRate(8000, 192000)).toBe(64000);
    expect(mp3BitRate(8000, 32000)).toBe(32000);
    expect(mp3BitRate(16000, 128000)).toBe(128000);
  });

  it.each(SAMPLE_RATES.flatMap((rate) => MP3_BIT_RATES.map((bitRate) => [rate, bitRate] as const)))(
    '%i Hz at %i b/s: well-formed CBR frames of the right duration',
    (rate, bitRate) => {
      const bytes = encodeMp3(tone(440, rate, 1), rate, bitRate);
      const scan = scanMpegFrames(bytes);
      expect(scan.leadingBytes).toBe(0);
      expect(scan.trailingBytes).toBe(0);
      expect(scan.frames.length).toBeGreaterThan(10);
      const effective = mp3BitRate(rate, bitRate);
      for (const f of scan.frames) {
        expect(f).toMatchObject({ layer: 3, sampleRate: rate, bitRate: effective, channels: 1, version: rate >= 32000 ? 1 : rate >= 16000 ? 2 : 2.5 });
      }
      expect(scan.durationSeconds).toBeGreaterThanOrEqual(1);
      expect(scan.durationSeconds).toBeLessThanOrEqual(1 + maxExtraSeconds(rate, scan.frames[0]!.samplesPerFrame));
      // CBR: the byte count follows from the bit rate and the duration.
      expect(bytes.length).toBeCloseTo((effective / 8) * scan.durationSeconds, -2);
    },
  );

  it('property: chunked encoding gives the same bytes as one-shot', () => {
    const input = tone(440, 24000, 0.5);
    const whole = encodeMp3(input, 24000, 64000);
    fc.assert(
      fc.property(fc.array(fc.nat(input.length), { maxLength: 10 }), (cuts) => {
        const enc = createMp3Encoder({ sampleRate: 24000, bitRate: 64000 });
        const parts: Buffer[] = [];
        let prev = 0;
        for (const c of [...cuts.sort((a, b) => a - b), input.length]) {
          parts.push(enc.encode(input.subarray(prev, c)));
          prev = c;
        }
        parts.push(enc.end());
        expect(Buffer.concat(parts).equals(whole)).toBe(true);
      }),
      { numRuns: 25 },
    );
  });

  it('interleaved encoders sharing the wasm instance do not disturb each other', () => {
    const a = tone(440, 16000, 0.5);
    const b = tone(1000, 44100, 0.5);
    const ea = createMp3Encoder({ sampleRate: 16000, bitRate: 32000 });
    const eb = createMp3Encoder({ sampleRate: 44100, bitRate: 128000 });
    const pa: Buffer[] = [];
    const pb: Buffer[] = [];
    for (let i = 0; i < 10; i++) {
      pa.push(ea.encode(a.subarray(i * 800, (i + 1) * 800)));
      pb.push(eb.encode(b.subarray(i * 2205, (i + 1) * 2205)));
    }
    pb.push(eb.end());
    pa.push(ea.end());
    expect(Buffer.concat(pa).equals(encodeMp3(a, 16000, 32000))).toBe(true);
    expect(Buffer.concat(pb).equals(encodeMp3(b, 44100, 128000))).toBe(true);
  });

  it('end() frees the encoder: later calls throw, close() is idempotent', () => {
    const e = createMp3Encoder({ sampleRate: 24000, bitRate: 128000 });
    e.encode(new Float32Array(100));
    e.end();
    expect(() => e.encode(new Float32Array(1))).toThrow();
    e.close();
    e.close();
  });

  it('silence and empty input still make a valid (short) stream', () => {
    expect(scanMpegFrames(encodeMp3(new Float32Array(0), 24000, 128000)).trailingBytes).toBe(0);
    expect(scanMpegFrames(encodeMp3(new Float32Array(24000), 24000, 128000)).frames.length).toBeGreaterThan(10);
  });

  it('ffmpeg decodes it back to the tone (optional cross-check)', () => {
    for (const [rate, bitRate] of [
      [8000, 32000],
      [24000, 128000],
      [44100, 320000],
    ] as const) {
      const pcm = execFileSync('ffmpeg', ['-v', 'error', '-f', 'mp3', '-i', '-', '-f', 's16le', '-'], { input: encodeMp3(tone(440, rate, 1), rate, bitRate) });
      const x = s16leToFloat(pcm);
      expect(x.length / rate).toBeGreaterThanOrEqual(1);
      // From 0.25 s: past LAME's 1105-sample encoder delay (138 ms at 8 kHz).
      const steady = x.subarray(rate * 0.25, rate * 0.9);
      expect(zeroCrossingFrequency(steady, rate)).toBeCloseTo(440, 0);
      expect(rms(steady)).toBeCloseTo(0.5 / Math.SQRT2, 1);
    }
  });
});
