// Clips as the voice operations use them: raw PCM stored as WAV without re-encoding, and
// several clips joined in slices (the event loop runs between them) into the same WAV that
// encoding the whole at once gives.
import { describe, expect, it } from 'vitest';
import { encodeWav, parseWav, wavHeader } from '../audio/wav.ts';
import { decodeUploadedAudio } from '../stt/decode-upload.ts';
import { decodeClip, joinClips, type MeasuredClip } from './voice-clip.ts';
import { countLoopTurns } from '../../test/support/loop-turns.ts';

function tone(seconds: number, rate: number, hz: number): Float32Array {
  return Float32Array.from({ length: Math.round(seconds * rate) }, (_, i) => 0.5 * Math.sin((2 * Math.PI * hz * i) / rate));
}

const clipOf = (samples: Float32Array, rate: number): MeasuredClip => ({
  samples,
  sampleRate: rate,
  durationMs: Math.round((samples.length / rate) * 1000),
  wav: encodeWav(samples, rate, 'pcm_s16le'),
});

describe('decodeClip', () => {
  it('stores raw 16-bit PCM as the WAV file encoding its samples would make', () => {
    const wav = encodeWav(tone(2, 8000, 300), 8000, 'pcm_s16le');
    const raw = Buffer.concat([wav.subarray(44), Buffer.from([7])]); // a trailing odd byte is not a sample
    const clip = decodeClip(raw, 8000);
    expect(clip.durationMs).toBe(2000);
    expect(clip.wav.equals(encodeWav(clip.samples, 8000, 'pcm_s16le'))).toBe(true);
    expect(clip.wav.equals(wav)).toBe(true);
  });
});

describe('decodeClip measures from the header and decodes the samples when first read', () => {
  const stereo24 = (() => {
    const frames = 1600;
    const header = wavHeader({ sampleRate: 16000, encoding: 'pcm_s16le', channels: 2, dataByteLength: frames * 6 });
    // The same header with 24-bit samples: block align 6, 96,000 bytes a second.
    header.writeUInt32LE(16000 * 6, 28);
    header.writeUInt16LE(6, 32);
    header.writeUInt16LE(24, 34);
    return Buffer.concat([header, Buffer.from(Array.from({ length: frames * 6 }, (_, i) => (i * 37) & 0xff))]);
  })();
  it.each([
    { name: 'a 16-bit WAV', bytes: encodeWav(tone(1.5, 24000, 220), 24000, 'pcm_s16le'), rate: undefined },
    { name: 'a float WAV', bytes: encodeWav(tone(0.7, 48000, 440), 48000, 'pcm_f32le'), rate: undefined },
    { name: 'a 24-bit stereo WAV (downmixed)', bytes: stereo24, rate: undefined },
    {
      name: 'raw PCM with a trailing odd byte',
      bytes: Buffer.concat([encodeWav(tone(1, 8000, 300), 8000, 'pcm_s16le').subarray(44), Buffer.from([9])]),
      rate: 8000,
    },
  ])('$name: what decoding it at once gives', ({ bytes, rate }) => {
    const decoded = decodeUploadedAudio(bytes, rate, null);
    const clip = decodeClip(bytes, rate);
    expect(clip.sampleRate).toBe(decoded.sampleRate);
    expect(clip.durationMs).toBe(Math.round(decoded.durationSeconds * 1000));
    expect(clip.samples).toEqual(decoded.samples);
    expect(clip.samples).toBe(clip.samples); // decoded once
  });

  it.each([
    { name: 'empty', bytes: Buffer.alloc(0) },
    { name: 'an MP3', bytes: Buffer.concat([Buffer.from('ID3'), Buffer.alloc(64)]) },
    { name: 'a WAV without samples', bytes: encodeWav(new Float32Array(0), 16000, 'pcm_s16le').subarray(0, 36) },
    { name: 'a WAV at 11025 Hz', bytes: encodeWav(tone(1, 11025, 200), 11025, 'pcm_s16le') },
  ])('$name: refused as decoding refuses it', ({ bytes }) => {
    let refusal: unknown;
    try {
      decodeUploadedAudio(bytes, undefined, null);
    } catch (e) {
      refusal = e;
    }
    expect(refusal).toBeInstanceOf(Error);
    expect(() => decodeClip(bytes, undefined)).toThrow(refusal as Error);
  });

  it('does not decode before the samples are read', () => {
    const bytes = encodeWav(tone(1, 16000, 200), 16000, 'pcm_s16le');
    const clip = decodeClip(bytes, undefined);
    bytes.fill(0, 44); // the upload's buffer, changed after measuring: the samples are read from it later
    expect(clip.samples.every((v) => v === 0)).toBe(true);
  });
});

describe('joinClips', () => {
  it('joins clips into one WAV, byte for byte what encoding them at once gives, in slices', async () => {
    const parts = [tone(20, 16000, 200), tone(7.5, 16000, 330), tone(31, 16000, 120)];
    let slices = 0;
    const loop = countLoopTurns();
    const joined = await joinClips(
      parts.map((p) => clipOf(p, 16000)),
      () => slices++,
    );
    loop.stop();
    const whole = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    parts.reduce((at, p) => (whole.set(p, at), at + p.length), 0);
    expect(joined.samples).toEqual(whole);
    expect(joined.wav.equals(encodeWav(whole, 16000, 'pcm_s16le'))).toBe(true);
    expect(parseWav(joined.wav).sampleRate).toBe(16000);
    expect(joined.durationMs).toBe(58500);
    // A slice converts at most 2^18 samples (16 s at 16 kHz); the event loop ran at each pause.
    expect(slices).toBe(parts.reduce((n, p) => n + Math.ceil(p.length / 2 ** 18), 0));
    expect(loop.turns).toBeGreaterThanOrEqual(slices);
  });

  it('refuses clips of different sample rates', async () => {
    await expect(joinClips([clipOf(tone(1, 16000, 200), 16000), clipOf(tone(1, 8000, 200), 8000)])).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'blob_ids',
    });
  });
});
