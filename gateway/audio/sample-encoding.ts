// The four sample encodings of output_format.encoding, by name: float samples to bytes and back.
import { decodeAlaw, decodeMulaw, encodeAlaw, encodeMulaw } from './g711.ts';
import type { Encoding } from './output-format.ts';
import { f32leBytes, f32leToFloat, floatToS16, s16ToFloat, s16leBytes, s16leToFloat, s16leToS16, type PcmSamples } from './pcm.ts';

export const BYTES_PER_SAMPLE: Record<Encoding, 1 | 2 | 4> = {
  pcm_f32le: 4,
  pcm_s16le: 2,
  pcm_mulaw: 1,
  pcm_alaw: 1,
};

/** Float samples (nominally [-1, 1]) to bytes in `encoding`; integer encodings clamp. */
export function encodeSamples(samples: Float32Array, encoding: Encoding): Buffer {
  switch (encoding) {
    case 'pcm_f32le':
      return f32leBytes(samples);
    case 'pcm_s16le':
      return s16leBytes(floatToS16(samples));
    case 'pcm_mulaw':
      return encodeMulaw(samples);
    case 'pcm_alaw':
      return encodeAlaw(samples);
  }
}

/** Bytes in `encoding` to float samples; a trailing partial sample is ignored. */
export function decodeSamples(bytes: Uint8Array, encoding: Encoding): Float32Array {
  switch (encoding) {
    case 'pcm_f32le':
      return Float32Array.from(f32leToFloat(bytes));
    case 'pcm_s16le':
      return s16leToFloat(bytes);
    case 'pcm_mulaw':
      return s16ToFloat(decodeMulaw(bytes));
    case 'pcm_alaw':
      return s16ToFloat(decodeAlaw(bytes));
  }
}

/**
 * Bytes in `encoding` as samples of the type nearest it, with no float round trip for the
 * integer encodings: s16 for pcm_s16le, pcm_mulaw and pcm_alaw, float for pcm_f32le. The linear
 * encodings may share memory with `bytes` (a view where the alignment allows); a trailing
 * partial sample is ignored.
 */
export function decodePcm(bytes: Uint8Array, encoding: Encoding): PcmSamples {
  switch (encoding) {
    case 'pcm_f32le':
      return f32leToFloat(bytes);
    case 'pcm_s16le':
      return s16leToS16(bytes);
    case 'pcm_mulaw':
      return decodeMulaw(bytes);
    case 'pcm_alaw':
      return decodeAlaw(bytes);
  }
}
