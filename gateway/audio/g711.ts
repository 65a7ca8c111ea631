// ITU-T G.711 mu-law and A-law with the decision and reconstruction levels of the ITU's own
// reference coder (G.191 Software Tool Library, g711.c): linear input is truncated to 14 bits
// (mu-law) or 13 bits (A-law) and negative values take their one's complement before
// quantising, so the decision levels are symmetric; decoding returns the middle of each
// step. Decoding is bit-exact with ffmpeg and sox. (Sun's widely copied g711.c negates
// negative mu-law values instead, which shifts them by one 14-bit step; ffmpeg's encoder puts
// its thresholds midway between output levels, which differs at segment edges.)
// The scalar functions define the mapping; encoding and decoding run on tables built from
// them once (64 KiB per law for encoding, indexed by the s16 value).
import { type PcmSamples } from './pcm.ts';

const SEG_UEND = [0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff, 0x1fff];
const SEG_AEND = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];
const BIAS = 0x84;
const CLIP = 8159;

function segment(value: number, ends: number[]): number {
  for (let i = 0; i < ends.length; i++) if (value <= ends[i]!) return i;
  return ends.length;
}

/** One s16 value (-32768..32767) to its mu-law code. */
export function linearToMulaw(pcm: number): number {
  let v = pcm >> 2;
  let mask: number;
  if (v < 0) {
    v = ~v;
    mask = 0x7f;
  } else {
    mask = 0xff;
  }
  if (v > CLIP) v = CLIP;
  v += BIAS >> 2;
  const seg = segment(v, SEG_UEND);
  if (seg >= 8) return 0x7f ^ mask;
  return ((seg << 4) | ((v >> (seg + 1)) & 0xf)) ^ mask;
}

/** One mu-law code (0..255) to s16. */
export function mulawToLinear(code: number): number {
  const u = ~code & 0xff;
  let t = ((u & 0x0f) << 3) + BIAS;
  t <<= (u & 0x70) >> 4;
  return u & 0x80 ? BIAS - t : t - BIAS;
}

/** One s16 value (-32768..32767) to its A-law code. */
export function linearToAlaw(pcm: number): number {
  let v = pcm >> 3;
  let mask: number;
  if (v >= 0) {
    mask = 0xd5;
  } else {
    mask = 0x55;
    v = ~v;
  }
  const seg = segment(v, SEG_AEND);
  if (seg >= 8) return 0x7f ^ mask;
  const aval = (seg << 4) | (seg < 2 ? (v >> 1) & 0xf : (v >> seg) & 0xf);
  return aval ^ mask;
}

/** One A-law code (0..255) to s16. */
export function alawToLinear(code: number): number {
  const a = code ^ 0x55;
  let t = (a & 0x0f) << 4;
  const seg = (a & 0x70) >> 4;
  if (seg === 0) t += 8;
  else if (seg === 1) t += 0x108;
  else t = (t + 0x108) << (seg - 1);
  return a & 0x80 ? t : -t;
}

function encodeTable(fn: (pcm: number) => number): Uint8Array {
  const table = new Uint8Array(65536);
  for (let i = 0; i < 65536; i++) table[i] = fn(i - 32768);
  return table;
}

function decodeTable(fn: (code: number) => number): Int16Array {
  const table = new Int16Array(256);
  for (let i = 0; i < 256; i++) table[i] = fn(i);
  return table;
}

const MULAW_ENC = encodeTable(linearToMulaw);
const ALAW_ENC = encodeTable(linearToAlaw);
const MULAW_DEC = decodeTable(mulawToLinear);
const ALAW_DEC = decodeTable(alawToLinear);

function encode(samples: PcmSamples, table: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length);
  if (samples instanceof Int16Array) {
    for (let i = 0; i < samples.length; i++) out[i] = table[samples[i]! + 32768]!;
  } else {
    // Same rounding and clamping as floatToS16, inlined to skip the intermediate array.
    for (let i = 0; i < samples.length; i++) {
      const v = samples[i]! * 32768;
      const s = v >= 32767 ? 32767 : v <= -32768 ? -32768 : Math.round(v) | 0;
      out[i] = table[s + 32768]!;
    }
  }
  return out;
}

function decode(codes: Uint8Array, table: Int16Array): Int16Array {
  const out = new Int16Array(codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = table[codes[i]!]!;
  return out;
}

/** Samples (float [-1, 1] or s16) to mu-law bytes, one per sample. */
export const encodeMulaw = (samples: PcmSamples): Buffer => encode(samples, MULAW_ENC);
/** Samples (float [-1, 1] or s16) to A-law bytes, one per sample. */
export const encodeAlaw = (samples: PcmSamples): Buffer => encode(samples, ALAW_ENC);
export const decodeMulaw = (codes: Uint8Array): Int16Array => decode(codes, MULAW_DEC);
export const decodeAlaw = (codes: Uint8Array): Int16Array => decode(codes, ALAW_DEC);
