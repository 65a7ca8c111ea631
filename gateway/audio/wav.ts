// WAV (RIFF/WAVE) reading and writing.
//
// Reading accepts what real writers produce: PCM 8/16/24/32-bit, IEEE float 32/64, A-law and
// mu-law, any channel count, WAVE_FORMAT_EXTENSIBLE, chunks before or between fmt and data
// (LIST, fact, bext...), odd-sized chunks with their pad byte, RF64, and the data sizes
// streaming writers leave behind: 0 or 0xFFFFFFFF mean "until the end of the bytes", and a
// size larger than the bytes present is read as far as the bytes go (`truncated`).
// Anything else malformed is an AudioFormatError. Every read is bounds-checked and every
// loop advances by at least one chunk header, so no input throws anything else or hangs.
//
// Writing emits the canonical header for the four output encodings: s16 as plain PCM
// (format 1, 44 bytes); f32, A-law and mu-law (formats 3, 6, 7) with the 18-byte fmt and
// the fact chunk the RIFF spec asks of non-PCM formats (58 bytes). Without a known length
// the RIFF and data sizes are 0xFFFFFFFF (fact: 0), the "streaming" convention ffmpeg and
// sox accept (sox warns of a premature EOF and reads every sample).
import { AudioFormatError } from './audio-format-error.ts';
import { decodeAlaw, decodeMulaw } from './g711.ts';
import type { Encoding } from './output-format.ts';
import { f32leToFloat, s16leToS16 } from './pcm.ts';
import { BYTES_PER_SAMPLE, encodeSamples } from './sample-encoding.ts';

export type WavSampleFormat = 'pcm_u8' | 'pcm_s16le' | 'pcm_s24le' | 'pcm_s32le' | 'pcm_f32le' | 'pcm_f64le' | 'pcm_mulaw' | 'pcm_alaw';

export interface WavInfo {
  sampleRate: number;
  channels: number;
  format: WavSampleFormat;
  /** Bytes per sample frame (all channels). */
  blockAlign: number;
  /** Where the sample bytes start, and how many whole frames' worth there are. */
  dataOffset: number;
  dataByteLength: number;
  frameCount: number;
  /** The data size was 0 or 0xFFFFFFFF (a streaming writer's header): read to the end. */
  sizeUnknown: boolean;
  /** The data chunk claimed more bytes than were present. */
  truncated: boolean;
}

export interface ParsedWav extends WavInfo {
  /** Mono samples in [-1, 1]: the mean of all channels. */
  samples: Float32Array;
  /** One array per channel, when asked for with { channels: 'separate' }. */
  channelData: Float32Array[] | null;
}

const STREAMING_SIZE = 0xffffffff;
const MAX_CHANNELS = 64;
const MAX_SAMPLE_RATE = 1_000_000;
// KSDATAFORMAT_SUBTYPE_* GUIDs share everything after their first two bytes.
const EXTENSIBLE_GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];

const FORMATS: Record<number, Partial<Record<number, WavSampleFormat>>> = {
  1: { 8: 'pcm_u8', 16: 'pcm_s16le', 24: 'pcm_s24le', 32: 'pcm_s32le' },
  3: { 32: 'pcm_f32le', 64: 'pcm_f64le' },
  6: { 8: 'pcm_alaw' },
  7: { 8: 'pcm_mulaw' },
};

interface Fmt {
  format: WavSampleFormat;
  channels: number;
  sampleRate: number;
  blockAlign: number;
}

function ascii(b: Uint8Array, at: number): string {
  return String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
}

function readFmt(b: Uint8Array, dv: DataView, at: number, size: number): Fmt {
  if (size < 16) throw new AudioFormatError('bad_fmt', `fmt chunk of ${size} bytes is shorter than 16.`);
  if (at + 16 > b.length) throw new AudioFormatError('truncated', 'the fmt chunk is cut off.');
  let code = dv.getUint16(at, true);
  const channels = dv.getUint16(at + 2, true);
  const sampleRate = dv.getUint32(at + 4, true);
  const blockAlign = dv.getUint16(at + 12, true);
  const bits = dv.getUint16(at + 14, true);
  if (code === 0xfffe) {
    if (size < 40) throw new AudioFormatError('bad_fmt', 'WAVE_FORMAT_EXTENSIBLE fmt chunk is shorter than 40 bytes.');
    if (at + 40 > b.length) throw new AudioFormatError('truncated', 'the fmt chunk is cut off.');
    for (let i = 0; i < EXTENSIBLE_GUID_TAIL.length; i++) {
      if (b[at + 26 + i] !== EXTENSIBLE_GUID_TAIL[i]) throw new AudioFormatError('unsupported_encoding', 'WAVE_FORMAT_EXTENSIBLE with an unknown sub-format.');
    }
    code = dv.getUint16(at + 24, true);
  }
  const format = FORMATS[code]?.[bits];
  if (!format) throw new AudioFormatError('unsupported_encoding', `format code ${code} with ${bits} bits per sample is not supported.`);
  if (channels < 1 || channels > MAX_CHANNELS) throw new AudioFormatError('bad_fmt', `${channels} channels.`);
  if (sampleRate < 1 || sampleRate > MAX_SAMPLE_RATE) throw new AudioFormatError('bad_fmt', `sample rate ${sampleRate}.`);
  if (blockAlign !== channels * (bits / 8)) {
    throw new AudioFormatError('bad_fmt', `block align ${blockAlign} does not match ${channels} channels of ${bits} bits.`);
  }
  return { format, channels, sampleRate, blockAlign };
}

/** Reads the header: format and where the samples are. Does not decode samples. */
export function readWavInfo(bytes: Uint8Array): WavInfo {
  const b = bytes;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (b.length < 12) throw new AudioFormatError('truncated', 'shorter than a RIFF header.');
  const riff = ascii(b, 0);
  if (riff === 'RIFX') throw new AudioFormatError('unsupported_encoding', 'big-endian RIFX is not supported.');
  if ((riff !== 'RIFF' && riff !== 'RF64') || ascii(b, 8) !== 'WAVE') throw new AudioFormatError('not_riff', 'not a RIFF/WAVE file.');

  let fmt: Fmt | null = null;
  let data: { offset: number; declared: number; sizeUnknown: boolean } | null = null;
  let rf64DataSize: number | null = null;
  let at = 12;
  while (at + 8 <= b.length) {
    const id = ascii(b, at);
    const size = dv.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'fmt ') {
      fmt = readFmt(b, dv, body, size);
    } else if (id === 'ds64' && riff === 'RF64' && size >= 16 && body + 16 <= b.length) {
      // 64-bit data size; past 2^53 a JS number is inexact, but such a file cannot be in memory anyway.
      rf64DataSize = dv.getUint32(body + 8, true) + dv.getUint32(body + 12, true) * 2 ** 32;
    } else if (id === 'data' && data === null) {
      const declared = riff === 'RF64' && size === STREAMING_SIZE && rf64DataSize !== null ? rf64DataSize : size;
      const sizeUnknown = declared === 0 || declared === STREAMING_SIZE;
      data = { offset: body, declared, sizeUnknown };
      // The samples run to the end: nothing after them can be read as chunks.
      if (sizeUnknown || fmt !== null) break;
    }
    at = body + size + (size & 1);
  }
  // Scanning stopped short of the end exactly: the last chunk claimed more bytes than exist.
  const cutShort = data === null && at !== b.length;
  if (fmt === null) throw new AudioFormatError(cutShort ? 'truncated' : 'missing_fmt', 'no fmt chunk before the samples.');
  if (data === null) throw new AudioFormatError(cutShort ? 'truncated' : 'missing_data', 'no data chunk.');

  const available = Math.max(0, b.length - data.offset);
  const bytesPresent = data.sizeUnknown ? available : Math.min(data.declared, available);
  const frameCount = Math.floor(bytesPresent / fmt.blockAlign);
  return {
    sampleRate: fmt.sampleRate,
    channels: fmt.channels,
    format: fmt.format,
    blockAlign: fmt.blockAlign,
    dataOffset: data.offset,
    dataByteLength: frameCount * fmt.blockAlign,
    frameCount,
    sizeUnknown: data.sizeUnknown,
    truncated: !data.sizeUnknown && data.declared > available,
  };
}

/** Interleaved samples of all channels as float. */
function decodeInterleaved(data: Uint8Array, format: WavSampleFormat): Float32Array {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  switch (format) {
    case 'pcm_s16le': {
      const s = s16leToS16(data);
      const out = new Float32Array(s.length);
      for (let i = 0; i < s.length; i++) out[i] = s[i]! / 32768;
      return out;
    }
    case 'pcm_f32le':
      return Float32Array.from(f32leToFloat(data));
    case 'pcm_u8': {
      const out = new Float32Array(data.length);
      for (let i = 0; i < data.length; i++) out[i] = (data[i]! - 128) / 128;
      return out;
    }
    case 'pcm_s24le': {
      const out = new Float32Array(Math.floor(data.length / 3));
      for (let i = 0, j = 0; i < out.length; i++, j += 3) {
        out[i] = (((data[j]! | (data[j + 1]! << 8) | (data[j + 2]! << 16)) << 8) >> 8) / 8388608;
      }
      return out;
    }
    case 'pcm_s32le': {
      const out = new Float32Array(Math.floor(data.length / 4));
      for (let i = 0; i < out.length; i++) out[i] = dv.getInt32(i * 4, true) / 2147483648;
      return out;
    }
    case 'pcm_f64le': {
      const out = new Float32Array(Math.floor(data.length / 8));
      for (let i = 0; i < out.length; i++) out[i] = dv.getFloat64(i * 8, true);
      return out;
    }
    case 'pcm_mulaw':
    case 'pcm_alaw': {
      const s = format === 'pcm_mulaw' ? decodeMulaw(data) : decodeAlaw(data);
      const out = new Float32Array(s.length);
      for (let i = 0; i < s.length; i++) out[i] = s[i]! / 32768;
      return out;
    }
  }
}

/**
 * Parses a WAV file into float samples: always a mono mix in `samples`; with
 * { channels: 'separate' } also one array per channel in `channelData`.
 */
export function parseWav(bytes: Uint8Array, options: { channels?: 'mix' | 'separate' } = {}): ParsedWav {
  const info = readWavInfo(bytes);
  const interleaved = decodeInterleaved(bytes.subarray(info.dataOffset, info.dataOffset + info.dataByteLength), info.format);
  const n = info.frameCount;
  const ch = info.channels;
  if (ch === 1) return { ...info, samples: interleaved, channelData: options.channels === 'separate' ? [interleaved] : null };

  const samples = new Float32Array(n);
  const channelData = options.channels === 'separate' ? Array.from({ length: ch }, () => new Float32Array(n)) : null;
  for (let i = 0, k = 0; i < n; i++) {
    let sum = 0;
    for (let c = 0; c < ch; c++, k++) {
      const v = interleaved[k]!;
      sum += v;
      if (channelData) channelData[c]![i] = v;
    }
    samples[i] = sum / ch;
  }
  return { ...info, samples, channelData };
}

const FORMAT_CODE: Record<Encoding, number> = { pcm_s16le: 1, pcm_f32le: 3, pcm_alaw: 6, pcm_mulaw: 7 };

export interface WavHeaderOptions {
  sampleRate: number;
  encoding: Encoding;
  channels?: number;
  /**
   * Byte length of the sample data that follows. Omitted: a streaming header (sizes
   * 0xFFFFFFFF). If odd, the writer must append one pad byte after the data (RIFF rule);
   * the RIFF size here counts it.
   */
  dataByteLength?: number;
}

export function wavHeader(options: WavHeaderOptions): Buffer {
  const channels = options.channels ?? 1;
  const code = FORMAT_CODE[options.encoding];
  const bytesPerSample = BYTES_PER_SAMPLE[options.encoding];
  const pcm = code === 1;
  const fmtSize = pcm ? 16 : 18;
  const headerSize = 12 + 8 + fmtSize + (pcm ? 0 : 12) + 8;
  const known = options.dataByteLength !== undefined;
  const dataLen = options.dataByteLength ?? 0;
  const clamp32 = (v: number) => Math.min(v, STREAMING_SIZE);

  const h = Buffer.alloc(headerSize);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(known ? clamp32(headerSize - 8 + dataLen + (dataLen % 2)) : STREAMING_SIZE, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(fmtSize, 16);
  h.writeUInt16LE(code, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(options.sampleRate, 24);
  h.writeUInt32LE(options.sampleRate * channels * bytesPerSample, 28);
  h.writeUInt16LE(channels * bytesPerSample, 32);
  h.writeUInt16LE(bytesPerSample * 8, 34);
  let at = 36;
  if (!pcm) {
    h.writeUInt16LE(0, at); // cbSize: no extension
    h.write('fact', at + 2, 'latin1');
    h.writeUInt32LE(4, at + 6);
    // Streaming: 0, not 0xFFFFFFFF: ffmpeg takes a non-zero fact count as the duration.
    h.writeUInt32LE(known ? clamp32(Math.floor(dataLen / (channels * bytesPerSample))) : 0, at + 10);
    at += 14;
  }
  h.write('data', at, 'latin1');
  h.writeUInt32LE(known ? clamp32(dataLen) : STREAMING_SIZE, at + 4);
  return h;
}

/**
 * WAV bytes as an `audio/wav` Blob for a multipart form to an engine: the Blob's own copy only
 * (`new Blob([new Uint8Array(buf)])` copied the file twice). Bytes over a SharedArrayBuffer,
 * which a Blob does not take, are copied first.
 */
export function wavBlob(bytes: Uint8Array): Blob {
  const view = bytes.buffer instanceof ArrayBuffer ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  return new Blob([view], { type: 'audio/wav' });
}

/** A complete mono WAV file with exact sizes (and the pad byte when the data is odd-sized). */
export function encodeWav(samples: Float32Array, sampleRate: number, encoding: Encoding): Buffer {
  const data = encodeSamples(samples, encoding);
  const parts = [wavHeader({ sampleRate, encoding, dataByteLength: data.length }), data];
  if (data.length % 2) parts.push(Buffer.alloc(1));
  return Buffer.concat(parts);
}
