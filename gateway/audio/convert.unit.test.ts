import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AudioError } from './audio-error.ts';
import { contentTypeFor, convertAll, createAudioConverter, sniffAudioFormat, type OutputFormat } from './convert.ts';
import { mp3BitRate } from './mp3.ts';
import { scanMpegFrames } from './mp3-frames.ts';
import { ENCODINGS, SAMPLE_RATES, type Encoding } from './output-format.ts';
import { BYTES_PER_SAMPLE, decodeSamples } from './sample-encoding.ts';
import { rms, tone, zeroCrossingFrequency } from './test-signals.ts';
import { parseWav, readWavInfo } from './wav.ts';

const INPUT_RATE = 22050;
const TONE = tone(440, INPUT_RATE, 1); // 1 s, 440 Hz, amplitude 0.5 (RMS 0.354)
const TONE_RMS = 0.5 / Math.SQRT2;
const WAV_FORMAT_CODE: Record<Encoding, number> = { pcm_s16le: 1, pcm_f32le: 3, pcm_alaw: 6, pcm_mulaw: 7 };

function checkTone(samples: Float32Array, rate: number): void {
  expect(samples.length).toBe(rate); // exactly 1 s: round(22050 * rate / 22050)
  expect(rms(samples)).toBeGreaterThan(TONE_RMS * 0.97); // not silence, level kept (G.711 within 3 %)
  expect(rms(samples)).toBeLessThan(TONE_RMS * 1.03);
  expect(zeroCrossingFrequency(samples, rate)).toBeCloseTo(440, 0);
}

function streamed(output: OutputFormat, input: Float32Array | Int16Array, cuts: number[], volume = 1): { header: Buffer; body: Buffer } {
  const conv = createAudioConverter({ inputSampleRate: INPUT_RATE, output, volume });
  const parts: Buffer[] = [];
  let prev = 0;
  for (const c of [...cuts, input.length]) {
    parts.push(conv.push(input.subarray(prev, c)));
    prev = c;
  }
  parts.push(conv.end());
  return { header: conv.header(), body: Buffer.concat(parts) };
}

const PCM_MATRIX = (['wav', 'raw'] as const).flatMap((container) =>
  ENCODINGS.flatMap((encoding) => SAMPLE_RATES.map((sampleRate) => [container, encoding, sampleRate] as const)),
);
const MP3_MATRIX = SAMPLE_RATES.flatMap((sampleRate) => [32000, 128000, 320000].map((bitRate) => [sampleRate, bitRate] as const));

describe('convertAll: 1 s of 440 Hz at 22050 Hz to every output format', () => {
  it.each(PCM_MATRIX)('%s %s %i Hz', (container, encoding, sampleRate) => {
    const out = convertAll(TONE, INPUT_RATE, { container, encoding, sampleRate });
    const dataBytes = sampleRate * BYTES_PER_SAMPLE[encoding];
    if (container === 'raw') {
      expect(out.length).toBe(dataBytes);
      expect(sniffAudioFormat(out)).toBe('unknown');
      checkTone(decodeSamples(out, encoding), sampleRate);
      return;
    }
    const info = readWavInfo(out);
    expect(info).toMatchObject({ sampleRate, channels: 1, format: encoding, frameCount: sampleRate, sizeUnknown: false, truncated: false });
    expect(out.readUInt16LE(20)).toBe(WAV_FORMAT_CODE[encoding]);
    expect(out.readUInt32LE(4)).toBe(out.length - 8); // exact RIFF size
    expect(out.readUInt32LE(info.dataOffset - 4)).toBe(dataBytes); // exact data size
    expect(out.length).toBe(info.dataOffset + dataBytes);
    expect(sniffAudioFormat(out)).toBe('wav');
    checkTone(parseWav(out).samples, sampleRate);
  });

  it.each(MP3_MATRIX)('mp3 %i Hz %i b/s', (sampleRate, bitRate) => {
    const out = convertAll(TONE, INPUT_RATE, { container: 'mp3', sampleRate, bitRate });
    expect(sniffAudioFormat(out)).toBe('mp3');
    const scan = scanMpegFrames(out);
    expect(scan.trailingBytes).toBe(0);
    for (const f of scan.frames) expect(f).toMatchObject({ layer: 3, channels: 1, sampleRate, bitRate: mp3BitRate(sampleRate, bitRate) });
    const spf = scan.frames[0]!.samplesPerFrame;
    // 1 s plus LAME's 1105-sample delay, rounded up to whole frames (+1 flush frame at most).
    expect(scan.durationSeconds).toBeGreaterThanOrEqual(1);
    expect(scan.durationSeconds).toBeLessThanOrEqual(1 + (1105 + 2 * spf) / sampleRate);
  });
});

describe('streaming converter', () => {
  it('property: header + pushes + end == convertAll, for every format and any chunking', () => {
    const formats: OutputFormat[] = [
      ...PCM_MATRIX.filter(([, , r]) => r === 8000 || r === 48000 || r === 22050).map(([container, encoding, sampleRate]) => ({
        container,
        encoding,
        sampleRate,
      })),
      { container: 'mp3', sampleRate: 24000, bitRate: 128000 },
      { container: 'mp3', sampleRate: 44100, bitRate: 64000 },
    ];
    const input = TONE.subarray(0, 6000);
    fc.assert(
      fc.property(fc.constantFrom(...formats), fc.array(fc.nat(input.length), { maxLength: 8 }), fc.constantFrom(0.5, 1, 2), (output, cuts, volume) => {
        const whole = convertAll(input, INPUT_RATE, output, volume);
        const { header, body } = streamed(
          output,
          input,
          cuts.sort((a, b) => a - b),
          volume,
        );
        if (output.container === 'wav') {
          const info = readWavInfo(whole);
          expect(body.equals(whole.subarray(info.dataOffset, info.dataOffset + info.dataByteLength))).toBe(true);
          expect(readWavInfo(Buffer.concat([header, body])).sizeUnknown).toBe(true);
        } else {
          expect(header.length).toBe(0);
          expect(body.equals(whole)).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('20 ms chunks in, a playable streaming WAV out: parses to the whole tone', () => {
    const cuts = Array.from({ length: 49 }, (_, i) => (i + 1) * 441);
    const { header, body } = streamed({ container: 'wav', sampleRate: 16000, encoding: 'pcm_s16le' }, TONE, cuts);
    expect(header.readUInt32LE(40)).toBe(0xffffffff);
    checkTone(parseWav(Buffer.concat([header, body])).samples, 16000);
  });

  it('Int16Array input converts like the equivalent float input', () => {
    const s16 = Int16Array.from(TONE, (v) => Math.round(v * 32767));
    const f32 = Float32Array.from(s16, (v) => v / 32768);
    for (const output of [
      { container: 'raw', sampleRate: 16000, encoding: 'pcm_s16le' },
      { container: 'mp3', sampleRate: 24000 },
    ] as OutputFormat[]) {
      expect(convertAll(s16, INPUT_RATE, output).equals(convertAll(f32, INPUT_RATE, output))).toBe(true);
    }
  });

  it('same input and output rate: s16 passes through bit-exact', () => {
    const s16 = Int16Array.from(TONE, (v) => Math.round(v * 32767));
    const out = convertAll(s16, INPUT_RATE, { container: 'raw', sampleRate: 22050, encoding: 'pcm_s16le' });
    expect(out.equals(Buffer.from(s16.buffer))).toBe(true);
  });

  it('s16 at the same rate and volume 1 goes out as it came, full-scale peaks too, without a copy; another volume is applied', () => {
    const loud = Int16Array.from({ length: 2048 }, (_, i) => (i % 2 ? 32767 : -32768));
    const conv = createAudioConverter({ inputSampleRate: 24000, output: { container: 'raw', sampleRate: 24000, encoding: 'pcm_s16le' } });
    const out = conv.push(loud.subarray(2));
    expect(out.equals(Buffer.from(loud.buffer, 4))).toBe(true);
    expect(out.buffer).toBe(loud.buffer);
    expect(conv.end().length).toBe(0);
    const softer = convertAll(loud, 24000, { container: 'raw', sampleRate: 24000, encoding: 'pcm_s16le' }, 0.5);
    expect(Math.max(...new Int16Array(softer.buffer, softer.byteOffset, softer.length / 2))).toBe(16384);
  });

  it('volume scales the level, soft-limited below full scale', () => {
    const level = (volume: number, input = TONE) =>
      rms(decodeSamples(convertAll(input, INPUT_RATE, { container: 'raw', sampleRate: 24000, encoding: 'pcm_f32le' }, volume), 'pcm_f32le'));
    expect(level(0.5)).toBeCloseTo(TONE_RMS / 2, 2);
    expect(level(1.5)).toBeCloseTo(TONE_RMS * 1.5, 2);
    const loud = decodeSamples(
      convertAll(tone(440, INPUT_RATE, 1, 0.9), INPUT_RATE, { container: 'raw', sampleRate: 24000, encoding: 'pcm_f32le' }, 2),
      'pcm_f32le',
    );
    expect(Math.max(...Array.from(loud, Math.abs))).toBeLessThanOrEqual(1);
  });

  it('header(): streaming WAV header for wav, nothing for raw and mp3', () => {
    const wav = createAudioConverter({ inputSampleRate: 16000, output: { container: 'wav', sampleRate: 8000, encoding: 'pcm_mulaw' } });
    expect(readWavInfo(Buffer.concat([wav.header(), Buffer.alloc(8)]))).toMatchObject({
      format: 'pcm_mulaw',
      sampleRate: 8000,
      sizeUnknown: true,
      frameCount: 8,
    });
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'raw', sampleRate: 8000 } }).header().length).toBe(0);
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'mp3', sampleRate: 8000 } }).header().length).toBe(0);
  });

  it('defaults: encoding pcm_s16le, bit rate 128 kb/s; the field that does not apply is ignored', () => {
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'raw', sampleRate: 8000 } }).format).toEqual({
      container: 'raw',
      sampleRate: 8000,
      encoding: 'pcm_s16le',
    });
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'mp3', sampleRate: 44100, encoding: 'pcm_s16le' } }).format).toEqual({
      container: 'mp3',
      sampleRate: 44100,
      bitRate: 128000,
    });
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'wav', sampleRate: 8000, bitRate: 128000 } }).format).toEqual({
      container: 'wav',
      sampleRate: 8000,
      encoding: 'pcm_s16le',
    });
  });

  it('end() and close(): later pushes throw, close is idempotent', () => {
    const conv = createAudioConverter({ inputSampleRate: 22050, output: { container: 'mp3', sampleRate: 24000 } });
    conv.push(TONE.subarray(0, 1000));
    conv.end();
    expect(() => conv.push(TONE)).toThrow();
    expect(() => conv.end()).toThrow();
    conv.close();
    const abandoned = createAudioConverter({ inputSampleRate: 22050, output: { container: 'wav', sampleRate: 48000 } });
    abandoned.push(TONE.subarray(0, 1000));
    abandoned.close();
    abandoned.close();
  });
});

describe('errors and content types', () => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err instanceof AudioError ? err.code : `not an AudioError: ${String(err)}`;
    }
    return 'no error';
  };

  it.each<[string, OutputFormat]>([
    ['container', { container: 'ogg' as 'wav', sampleRate: 16000 }],
    ['sample rate', { container: 'wav', sampleRate: 11025 as 8000 }],
    ['encoding', { container: 'raw', sampleRate: 16000, encoding: 'pcm_s24le' as Encoding }],
    ['mp3 bit rate', { container: 'mp3', sampleRate: 16000, bitRate: 100000 }],
  ])('unsupported %s -> unsupported_output_format', (_name, output) => {
    expect(codeOf(() => createAudioConverter({ inputSampleRate: 16000, output }))).toBe('unsupported_output_format');
  });

  it.each([0.49, 2.01, Number.NaN])('volume %d -> volume_out_of_range', (volume) => {
    expect(codeOf(() => convertAll(TONE, INPUT_RATE, { container: 'raw', sampleRate: 8000 }, volume))).toBe('volume_out_of_range');
  });

  it('a bad input rate is a programming error (TypeError)', () => {
    expect(() => createAudioConverter({ inputSampleRate: 0, output: { container: 'raw', sampleRate: 8000 } })).toThrow(TypeError);
  });

  it('content types', () => {
    expect(contentTypeFor({ container: 'wav' })).toBe('audio/wav');
    expect(contentTypeFor({ container: 'mp3' })).toBe('audio/mpeg');
    expect(contentTypeFor({ container: 'raw' })).toBe('application/octet-stream');
    expect(createAudioConverter({ inputSampleRate: 16000, output: { container: 'mp3', sampleRate: 16000 } }).contentType).toBe('audio/mpeg');
  });
});
