import { describe, expect, it } from 'vitest';
import { encodeMulaw } from '../audio/g711.ts';
import { s16leBytes, floatToS16, s16leToFloat } from '../audio/pcm.ts';
import { tone, zeroCrossingFrequency } from '../audio/test-signals.ts';
import { LineAudio, MULAW_8K } from './line-audio.ts';

const pcm = (samples: Float32Array) => s16leBytes(floatToS16(samples));

describe('LineAudio', () => {
  it('μ-law at 8 kHz passes both ways untouched, the session in g711_ulaw', () => {
    const line = new LineAudio(MULAW_8K);
    expect(line.sessionFormat).toBe('g711_ulaw');
    const frame = Buffer.alloc(160, 0x55);
    expect(line.toSession(frame)).toBe(frame);
    expect(line.toLine('item_a', frame)).toBe(frame);
    expect(line.endLine('item_a').length).toBe(0);
    expect(line.framing(20, false)).toEqual({ bytesPerMs: 8, frameMs: 20, padByte: null });
  });

  it('16-bit PCM at 8 kHz: companded to μ-law both ways, the session in g711_ulaw, a byte a sample', () => {
    const line = new LineAudio({ encoding: 'pcm_s16le', sampleRate: 8000 });
    expect(line.sessionFormat).toBe('g711_ulaw');
    expect(line.framing(100, true)).toEqual({ bytesPerMs: 16, frameMs: 100, padByte: 0 });
    const audio = pcm(tone(300, 8000, 0.02));
    // Cut mid-sample: the odd byte waits for the next piece.
    const ulaw = Buffer.concat([line.toSession(audio.subarray(0, 3)), line.toSession(audio.subarray(3))]);
    expect(ulaw).toEqual(encodeMulaw(tone(300, 8000, 0.02)));
    const back = line.toLine('item_a', ulaw);
    expect(back.length).toBe(audio.length);
    expect(zeroCrossingFrequency(s16leToFloat(back), 8000)).toBeCloseTo(300, -1);
    expect(line.endLine('item_a').length).toBe(0);
    line.close();
  });

  it("16-bit PCM at 16 or 24 kHz: the caller's audio comes out as pcm16 at 24 kHz, each frame whole at once (however the bytes are cut)", () => {
    for (const rate of [16000, 24000] as const) {
      const line = new LineAudio({ encoding: 'pcm_s16le', sampleRate: rate });
      expect(line.sessionFormat).toBe('pcm16');
      const audio = pcm(tone(300, rate, 0.2));
      const frame = (rate / 50) * 2;
      let out = 0;
      for (let at = 0; at < audio.length; at += frame) {
        const a = line.toSession(audio.subarray(at, at + 3));
        const b = line.toSession(audio.subarray(at + 3, at + frame));
        expect(a.length + b.length, `${rate}`).toBe(960);
        out += a.length + b.length;
      }
      // Exactly 200 ms of pcm16 at 24 kHz: what the session counts (and bills) is what the carrier sent.
      expect(out).toBe(0.2 * 24_000 * 2);
      line.close();
    }
  });

  it("an answer's audio comes out at the line's rate, its tail at its end; the same tone", () => {
    const line = new LineAudio({ encoding: 'pcm_s16le', sampleRate: 16000 });
    const answer = pcm(tone(500, 24_000, 0.3));
    const parts = [line.toLine('item_a', answer.subarray(0, 4801)), line.toLine('item_a', answer.subarray(4801)), line.endLine('item_a')];
    const out = Buffer.concat(parts);
    expect(out.length).toBe(0.3 * 16000 * 2);
    expect(zeroCrossingFrequency(s16leToFloat(out), 16000)).toBeCloseTo(500, -1);
    // Cut (barge-in): nothing of it is held.
    line.toLine('item_b', answer.subarray(0, 960));
    line.dropLine();
    expect(line.endLine('item_b').length).toBe(0);
    line.close();
  });
});
