import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AudioFormatError, type AudioFormatErrorReason } from './audio-format-error.ts';
import { ENCODINGS, SAMPLE_RATES, type Encoding } from './output-format.ts';
import { encodeSamples } from './sample-encoding.ts';
import { tone, zeroCrossingFrequency } from './test-signals.ts';
import { encodeWav, parseWav, readWavInfo, wavBlob, wavHeader, type WavSampleFormat } from './wav.ts';

// --- building WAV files by hand --------------------------------------------------------------

function chunk(id: string, body: Uint8Array, declaredSize = body.length): Buffer {
  const h = Buffer.alloc(8);
  h.write(id, 0, 'latin1');
  h.writeUInt32LE(declaredSize, 4);
  return Buffer.concat([h, body, body.length % 2 ? Buffer.alloc(1) : Buffer.alloc(0)]);
}

function riff(chunks: Buffer[], form = 'RIFF', riffSize?: number): Buffer {
  const body = Buffer.concat([Buffer.from('WAVE', 'latin1'), ...chunks]);
  const h = Buffer.alloc(8);
  h.write(form, 0, 'latin1');
  h.writeUInt32LE(riffSize ?? body.length, 4);
  return Buffer.concat([h, body]);
}

function fmt(code: number, channels: number, rate: number, bits: number, extra?: Buffer): Buffer {
  const b = Buffer.alloc(16);
  b.writeUInt16LE(code, 0);
  b.writeUInt16LE(channels, 2);
  b.writeUInt32LE(rate, 4);
  b.writeUInt32LE((rate * channels * bits) / 8, 8);
  b.writeUInt16LE((channels * bits) / 8, 12);
  b.writeUInt16LE(bits, 14);
  return chunk('fmt ', extra ? Buffer.concat([b, extra]) : b);
}

const GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
function extensible(sub: number, channels: number, rate: number, bits: number, validBits = bits): Buffer {
  const ext = Buffer.alloc(24);
  ext.writeUInt16LE(22, 0);
  ext.writeUInt16LE(validBits, 2);
  ext.writeUInt32LE(channels === 1 ? 4 : 3, 4);
  ext.writeUInt16LE(sub, 8);
  Buffer.from(GUID_TAIL).copy(ext, 10);
  return fmt(0xfffe, channels, rate, bits, ext);
}

const s16 = (...v: number[]) => Buffer.from(Int16Array.from(v).buffer);
const list = chunk('LIST', Buffer.from('INFOISFT\x05\x00\x00\x00test\x00\x00', 'latin1'));

function expectError(bytes: Uint8Array, reason: AudioFormatErrorReason): void {
  let caught: unknown;
  try {
    parseWav(bytes);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(AudioFormatError);
  expect((caught as AudioFormatError).reason).toBe(reason);
  expect((caught as AudioFormatError).code).toBe('unreadable_wav');
}

/** Parses, and lets only AudioFormatError through: anything else fails the test. */
function parseOrTypedError(bytes: Uint8Array): void {
  try {
    parseWav(bytes, { channels: 'separate' });
  } catch (err) {
    if (!(err instanceof AudioFormatError)) throw err;
  }
}

// --- writing ---------------------------------------------------------------------------------

describe('wavHeader / encodeWav', () => {
  const expected: Record<Encoding, { code: number; bits: number; size: number }> = {
    pcm_s16le: { code: 1, bits: 16, size: 44 },
    pcm_f32le: { code: 3, bits: 32, size: 58 },
    pcm_mulaw: { code: 7, bits: 8, size: 58 },
    pcm_alaw: { code: 6, bits: 8, size: 58 },
  };

  it.each(ENCODINGS)('%s: header fields with a known length', (encoding) => {
    const e = expected[encoding];
    const dataBytes = 16000 * (e.bits / 8);
    const h = wavHeader({ sampleRate: 16000, encoding, dataByteLength: dataBytes });
    expect(h.length).toBe(e.size);
    expect(h.toString('latin1', 0, 4)).toBe('RIFF');
    expect(h.readUInt32LE(4)).toBe(e.size - 8 + dataBytes);
    expect(h.toString('latin1', 8, 16)).toBe('WAVEfmt ');
    expect(h.readUInt32LE(16)).toBe(e.code === 1 ? 16 : 18);
    expect(h.readUInt16LE(20)).toBe(e.code);
    expect(h.readUInt16LE(22)).toBe(1);
    expect(h.readUInt32LE(24)).toBe(16000);
    expect(h.readUInt32LE(28)).toBe(16000 * (e.bits / 8));
    expect(h.readUInt16LE(32)).toBe(e.bits / 8);
    expect(h.readUInt16LE(34)).toBe(e.bits);
    if (e.code !== 1) {
      expect(h.readUInt16LE(36)).toBe(0);
      expect(h.toString('latin1', 38, 42)).toBe('fact');
      expect(h.readUInt32LE(46)).toBe(16000);
    }
    expect(h.toString('latin1', e.size - 8, e.size - 4)).toBe('data');
    expect(h.readUInt32LE(e.size - 4)).toBe(dataBytes);
  });

  it.each(ENCODINGS)('%s: streaming header has 0xFFFFFFFF sizes and parses as "until the end"', (encoding) => {
    const h = wavHeader({ sampleRate: 24000, encoding });
    expect(h.readUInt32LE(4)).toBe(0xffffffff);
    expect(h.readUInt32LE(h.length - 4)).toBe(0xffffffff);
    const data = encodeSamples(tone(440, 24000, 0.1), encoding);
    const parsed = parseWav(Buffer.concat([h, data]));
    expect(parsed.sizeUnknown).toBe(true);
    expect(parsed.frameCount).toBe(2400);
  });

  it('odd-sized data gets a pad byte, counted in the RIFF size but not in the data size', () => {
    const w = encodeWav(new Float32Array(3), 8000, 'pcm_mulaw');
    expect(w.length).toBe(58 + 3 + 1);
    expect(w.readUInt32LE(4)).toBe(w.length - 8);
    expect(w.readUInt32LE(54)).toBe(3);
    expect(parseWav(w).frameCount).toBe(3);
  });

  it('property: write then parse gives back rate, encoding and samples within the encoding precision', () => {
    fc.assert(
      fc.property(
        fc.float32Array({ min: -1, max: 1, noNaN: true, maxLength: 400 }),
        fc.constantFrom(...ENCODINGS),
        fc.constantFrom(...SAMPLE_RATES),
        (samples, encoding, rate) => {
          const parsed = parseWav(encodeWav(samples, rate, encoding));
          expect(parsed.sampleRate).toBe(rate);
          expect(parsed.channels).toBe(1);
          expect(parsed.format).toBe(encoding);
          expect(parsed.frameCount).toBe(samples.length);
          expect(parsed.truncated).toBe(false);
          expect(parsed.sizeUnknown).toBe(samples.length === 0); // data size 0 reads as 'until the end'
          for (let i = 0; i < samples.length; i++) {
            const x = samples[i]!;
            const err = Math.abs(parsed.samples[i]! - x);
            const tol =
              encoding === 'pcm_f32le'
                ? 0
                : encoding === 'pcm_s16le'
                  ? 1 / 32768 + 1e-9 /* rounding, or clamping at +1 */
                  : Math.max(8.5, (Math.abs(x) * 32768) / 16 + 1) / 32768;
            if (err > tol) throw new Error(`${encoding} sample ${i}: ${x} came back as ${parsed.samples[i]}`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

// --- reading ---------------------------------------------------------------------------------

describe('wavBlob', () => {
  it('holds exactly the bytes given, from a view inside a larger buffer too, and keeps nothing shared with them', async () => {
    const wav = encodeWav(tone(0.1, 8000, 440), 8000, 'pcm_s16le');
    const pool = Buffer.concat([Buffer.from('before'), wav, Buffer.from('after')]);
    const view = pool.subarray(6, 6 + wav.length);
    const blob = wavBlob(view);
    expect(blob.type).toBe('audio/wav');
    pool.fill(0);
    expect(Buffer.from(await blob.arrayBuffer()).equals(wav)).toBe(true);
    const shared = new Uint8Array(new SharedArrayBuffer(wav.length));
    shared.set(wav);
    expect(Buffer.from(await wavBlob(shared).arrayBuffer()).equals(wav)).toBe(true);
  });
});

describe('parseWav', () => {
  it.each<[string, Buffer, WavSampleFormat, number[]]>([
    ['u8', chunk('data', Buffer.from([128, 255, 0, 192])), 'pcm_u8', [0, 127 / 128, -1, 0.5]],
    ['s16', chunk('data', s16(0, 16384, -32768, 32767)), 'pcm_s16le', [0, 0.5, -1, 32767 / 32768]],
    ['s24', chunk('data', Buffer.from([0, 0, 0x40, 0, 0, 0x80, 0xff, 0xff, 0x7f])), 'pcm_s24le', [0.5, -1, 8388607 / 8388608]],
    ['s32', chunk('data', Buffer.from(Int32Array.of(1 << 30, -(2 ** 31)).buffer)), 'pcm_s32le', [0.5, -1]],
    ['f32', chunk('data', Buffer.from(Float32Array.of(0.25, -0.75).buffer)), 'pcm_f32le', [0.25, -0.75]],
    ['f64', chunk('data', Buffer.from(Float64Array.of(0.125, -1).buffer)), 'pcm_f64le', [0.125, -1]],
    ['mulaw', chunk('data', Buffer.from([0xff, 0x80, 0x00])), 'pcm_mulaw', [0, 32124 / 32768, -32124 / 32768]],
    ['alaw', chunk('data', Buffer.from([0xd5, 0xaa])), 'pcm_alaw', [8 / 32768, 32256 / 32768]],
  ])('%s mono', (_name, data, format, values) => {
    const bits = { pcm_u8: 8, pcm_s16le: 16, pcm_s24le: 24, pcm_s32le: 32, pcm_f32le: 32, pcm_f64le: 64, pcm_mulaw: 8, pcm_alaw: 8 }[format];
    const code = { pcm_f32le: 3, pcm_f64le: 3, pcm_mulaw: 7, pcm_alaw: 6 }[format as string] ?? 1;
    const parsed = parseWav(riff([fmt(code, 1, 16000, bits), data]));
    expect(parsed.format).toBe(format);
    expect(Array.from(parsed.samples)).toEqual(values.map(Math.fround));
  });

  it('stereo: mono mix by default, channels on request', () => {
    const bytes = riff([fmt(1, 2, 44100, 16), chunk('data', s16(16384, 0, -16384, -16384, 32767, 32767))]);
    const mixed = parseWav(bytes);
    expect(mixed.channels).toBe(2);
    expect(mixed.frameCount).toBe(3);
    expect(Array.from(mixed.samples)).toEqual([0.25, -0.5, 32767 / 32768].map(Math.fround));
    expect(mixed.channelData).toBeNull();
    const separate = parseWav(bytes, { channels: 'separate' });
    expect(Array.from(separate.channelData![0]!)).toEqual([0.5, -0.5, 32767 / 32768].map(Math.fround));
    expect(Array.from(separate.channelData![1]!)).toEqual([0, -0.5, 32767 / 32768].map(Math.fround));
  });

  it('WAVE_FORMAT_EXTENSIBLE: PCM and float sub-formats, 6 channels', () => {
    const pcm = parseWav(riff([extensible(1, 1, 16000, 16), chunk('data', s16(8192))]));
    expect(pcm.format).toBe('pcm_s16le');
    expect(pcm.samples[0]).toBe(0.25);
    const six = Buffer.from(Float32Array.of(0.6, 0.6, 0.6, 0, 0, 0).buffer);
    const float = parseWav(riff([extensible(3, 6, 48000, 32), chunk('data', six)]));
    expect(float.format).toBe('pcm_f32le');
    expect(float.channels).toBe(6);
    expect(float.samples[0]).toBeCloseTo(0.3, 6);
    const s24in32 = parseWav(riff([extensible(1, 1, 16000, 32, 24), chunk('data', Buffer.from(Int32Array.of(0x40000000).buffer))]));
    expect(s24in32.samples[0]).toBe(0.5);
  });

  it('skips LIST and odd-sized chunks (with their pad byte) before and after fmt and data', () => {
    const odd = chunk('junk', Buffer.from([1, 2, 3]));
    expect(odd.length).toBe(12);
    const bytes = riff([odd, list, fmt(1, 1, 8000, 16), list, odd, chunk('data', s16(100, 200, 300)), list]);
    const parsed = parseWav(bytes);
    expect(Array.from(parsed.samples, (v) => v * 32768)).toEqual([100, 200, 300]);
    expect(parsed.truncated).toBe(false);
  });

  it('fmt after data is found', () => {
    expect(parseWav(riff([chunk('data', s16(1, 2)), fmt(1, 1, 8000, 16)])).frameCount).toBe(2);
  });

  it.each([0, 0xffffffff])('data size %d means until the end (streaming writers)', (size) => {
    const bytes = riff([fmt(1, 1, 8000, 16), chunk('data', s16(1, 2, 3, 4, 5), size)], 'RIFF', 0xffffffff);
    const parsed = parseWav(bytes);
    expect(parsed.sizeUnknown).toBe(true);
    expect(parsed.frameCount).toBe(5);
  });

  it('data larger than the bytes present: what is there, flagged truncated; a partial frame is dropped', () => {
    const data = chunk('data', s16(1, 2, 3), 1000);
    const parsed = parseWav(Buffer.concat([riff([fmt(1, 1, 8000, 16), data]), Buffer.from([7])]));
    expect(parsed.truncated).toBe(true);
    expect(parsed.frameCount).toBe(3);
    expect(parsed.dataByteLength).toBe(6);
  });

  it('RF64 with a ds64 chunk', () => {
    const ds64 = Buffer.alloc(28);
    ds64.writeUInt32LE(4, 8); // data size low
    const bytes = riff([chunk('ds64', ds64), fmt(1, 1, 8000, 16), chunk('data', s16(1, 2, 3), 0xffffffff)], 'RF64', 0xffffffff);
    const parsed = parseWav(bytes);
    expect(parsed.frameCount).toBe(2);
    expect(parsed.sizeUnknown).toBe(false);
  });

  it('readWavInfo reports where the samples are', () => {
    const w = encodeWav(new Float32Array(10), 16000, 'pcm_s16le');
    expect(readWavInfo(w)).toMatchObject({ dataOffset: 44, dataByteLength: 20, frameCount: 10, blockAlign: 2 });
  });

  it.each<[string, Uint8Array, AudioFormatErrorReason]>([
    ['empty', new Uint8Array(0), 'truncated'],
    ['short', Buffer.from('RIFF\x00\x00', 'latin1'), 'truncated'],
    ['mp3 bytes', Buffer.from([0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0, 0, 0, 0, 0]), 'not_riff'],
    ['RIFF but AVI', Buffer.from('RIFF\x04\x00\x00\x00AVI ', 'latin1'), 'not_riff'],
    ['big-endian RIFX', Buffer.from('RIFX\x04\x00\x00\x00WAVE', 'latin1'), 'unsupported_encoding'],
    ['no chunks', riff([]), 'missing_fmt'],
    ['no data', riff([fmt(1, 1, 8000, 16)]), 'missing_data'],
    ['no fmt', riff([chunk('data', s16(1))]), 'missing_fmt'],
    ['streaming data before fmt', riff([chunk('data', s16(1), 0xffffffff), fmt(1, 1, 8000, 16)]), 'missing_fmt'],
    ['fmt cut off', riff([fmt(1, 1, 8000, 16)]).subarray(0, 30), 'truncated'],
    ['fmt too small', riff([chunk('fmt ', Buffer.alloc(14)), chunk('data', s16(1))]), 'bad_fmt'],
    ['0 channels', riff([fmt(1, 0, 8000, 16), chunk('data', s16(1))]), 'bad_fmt'],
    ['0 Hz', riff([fmt(1, 1, 0, 16), chunk('data', s16(1))]), 'bad_fmt'],
    ['12-bit PCM', riff([fmt(1, 1, 8000, 12), chunk('data', s16(1))]), 'unsupported_encoding'],
    ['MS ADPCM', riff([fmt(2, 1, 8000, 4), chunk('data', s16(1))]), 'unsupported_encoding'],
    ['MP3 in WAV', riff([fmt(0x55, 1, 8000, 0), chunk('data', s16(1))]), 'unsupported_encoding'],
    [
      'extensible, unknown GUID',
      riff([
        (() => {
          const f = extensible(1, 1, 8000, 16);
          f[8 + 24 + 4] = 0x99;
          return f;
        })(),
        chunk('data', s16(1)),
      ]),
      'unsupported_encoding',
    ],
    ['extensible too short', riff([fmt(0xfffe, 1, 8000, 16), chunk('data', s16(1))]), 'bad_fmt'],
  ])('rejects %s with a typed error', (_name, bytes, reason) => expectError(bytes, reason));

  it('rejects a block align that does not match the format', () => {
    const f = fmt(1, 2, 8000, 16);
    f.writeUInt16LE(2, 8 + 12);
    expectError(riff([f, chunk('data', s16(1, 2))]), 'bad_fmt');
  });
});

// --- fuzzing ---------------------------------------------------------------------------------

describe('parseWav fuzz: only AudioFormatError, never a hang', () => {
  const samples = [
    encodeWav(tone(440, 8000, 0.01), 8000, 'pcm_s16le'),
    encodeWav(tone(440, 8000, 0.01), 8000, 'pcm_mulaw'),
    riff([list, extensible(3, 2, 48000, 32), chunk('junk', Buffer.from([1, 2, 3])), chunk('data', Buffer.alloc(64))]),
    riff([fmt(1, 1, 8000, 24), chunk('data', Buffer.alloc(30), 0xffffffff)]),
  ];

  it('random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), (b) => parseOrTypedError(b)),
      { numRuns: 2000 },
    );
  });

  it('random bytes after a RIFF/WAVE preamble', () => {
    fc.assert(
      fc.property(fc.constantFrom('RIFF', 'RF64'), fc.uint8Array({ maxLength: 256 }), (form, b) =>
        parseOrTypedError(Buffer.concat([Buffer.from(`${form}\xff\xff\xff\xffWAVE`, 'latin1'), b])),
      ),
      { numRuns: 3000 },
    );
  });

  it('random chunk sequences (ids, sizes including huge and odd)', () => {
    const ids = fc.constantFrom('fmt ', 'data', 'LIST', 'fact', 'ds64', 'junk', '\0\0\0\0');
    const sizes = fc.oneof(fc.nat(64), fc.constantFrom(0, 1, 15, 16, 18, 40, 0x7fffffff, 0xfffffff0, 0xffffffff));
    const chunkArb = fc.tuple(ids, sizes, fc.uint8Array({ maxLength: 48 })).map(([id, size, body]) => chunk(id, body, size));
    fc.assert(
      fc.property(fc.array(chunkArb, { maxLength: 8 }), fc.constantFrom('RIFF', 'RF64'), (cs, form) => parseOrTypedError(riff(cs, form))),
      { numRuns: 3000 },
    );
  });

  it('every truncation of valid files', () => {
    for (const file of samples) for (let n = 0; n <= file.length; n++) parseOrTypedError(file.subarray(0, n));
  });

  it('mutated headers: random bytes overwritten in the first 80 bytes', () => {
    fc.assert(
      fc.property(fc.constantFrom(...samples), fc.array(fc.tuple(fc.nat(79), fc.nat(255)), { minLength: 1, maxLength: 6 }), (file, edits) => {
        const b = Buffer.from(file);
        for (const [at, v] of edits) if (at < b.length) b[at] = v;
        parseOrTypedError(b);
      }),
      { numRuns: 3000 },
    );
  });

  it('a file of 100,000 empty chunks parses in well under a second', () => {
    const many = Buffer.alloc(100_000 * 8);
    for (let i = 0; i < 100_000; i++) many.write('junk', i * 8, 'latin1');
    const t = performance.now();
    expectError(riff([fmt(1, 1, 8000, 16), many]), 'missing_data');
    expect(performance.now() - t).toBeLessThan(1000);
  });
});

// --- cross-checks with real writers and players (optional) ---------------------------------

describe('interop with ffmpeg (optional)', () => {
  const run = (args: string[], input?: Buffer) => execFileSync('ffmpeg', ['-v', 'error', ...args], { input, maxBuffer: 1 << 24 });

  it.each([
    ['pcm_u8', []],
    ['pcm_s16le', []],
    ['pcm_s24le', []],
    ['pcm_s32le', []],
    ['pcm_f32le', []],
    ['pcm_f64le', []],
    ['pcm_mulaw', []],
    ['pcm_alaw', []],
    ['pcm_s24le', ['-ac', '6']], // 6 channels: WAVE_FORMAT_EXTENSIBLE
    ['pcm_s16le', ['-rf64', 'always']],
  ])("reads ffmpeg's piped (streaming) %s %j", (codec, extra) => {
    const bytes = run(['-f', 'lavfi', '-i', 'sine=f=440:d=0.5:r=16000', ...extra, '-c:a', codec, '-f', 'wav', '-']);
    const parsed = parseWav(bytes);
    expect(parsed.sampleRate).toBe(16000);
    expect(parsed.frameCount).toBe(8000);
    expect(zeroCrossingFrequency(parsed.samples, 16000)).toBeCloseTo(440, -1);
  });

  it.each(ENCODINGS)('ffmpeg decodes our streaming %s WAV completely', (encoding) => {
    const x = tone(440, 16000, 0.5);
    const bytes = Buffer.concat([wavHeader({ sampleRate: 16000, encoding }), encodeSamples(x, encoding)]);
    const out = run(['-i', '-', '-f', 's16le', '-'], bytes);
    expect(out.length).toBe(x.length * 2);
  });
});

describe('interop with sox (optional)', () => {
  it.each(ENCODINGS)('sox reads our streaming and exact %s WAVs', (encoding) => {
    const x = tone(440, 16000, 0.5);
    for (const bytes of [Buffer.concat([wavHeader({ sampleRate: 16000, encoding }), encodeSamples(x, encoding)]), encodeWav(x, 16000, encoding)]) {
      const out = execFileSync('sox', ['-t', 'wav', '-', '-t', 'raw', '-e', 'signed', '-b', '16', '-'], { input: bytes, stdio: ['pipe', 'pipe', 'ignore'] });
      expect(out.length).toBe(x.length * 2);
    }
  });

  it("reads sox's piped 32-bit WAV (extensible, sizes guessed too large)", () => {
    const bytes = execFileSync('sox', ['-n', '-r', '16000', '-t', 'wav', '-', 'synth', '0.5', 'sine', '440'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const parsed = parseWav(bytes);
    expect(parsed.format).toBe('pcm_s32le');
    expect(parsed.truncated).toBe(true);
    expect(parsed.frameCount).toBe(8000);
    expect(zeroCrossingFrequency(parsed.samples, 16000)).toBeCloseTo(440, -1);
  });
});
