// Linear PCM sample conversions: float [-1, 1] <-> signed 16-bit, and little-endian bytes.
// Scale is 32768 both ways (as ffmpeg does), so every s16 value survives s16 -> float -> s16
// exactly; +1.0 maps to 32767 by clamping. Byte input that ends mid-sample is cut to whole
// samples; a stream of such chunks goes through FrameAligner, which carries the partial
// sample over to the next chunk.
import { endianness } from 'node:os';

const LE = endianness() === 'LE';
const S16_SCALE = 32768;

export type PcmSamples = Float32Array | Int16Array;

/** Float samples to s16: scaled by 32768, rounded to nearest, clamped; NaN becomes 0. */
export function floatToS16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]! * S16_SCALE;
    // Clamp before the store: Int16Array stores wrap around (ToInt16), they do not saturate.
    out[i] = v >= 32767 ? 32767 : v <= -32768 ? -32768 : Math.round(v);
  }
  return out;
}

export function s16ToFloat(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i]! / S16_SCALE;
  return out;
}

/** Either sample type as float; a Float32Array is returned as is (not copied). */
export function toFloat32(samples: PcmSamples): Float32Array {
  return samples instanceof Float32Array ? samples : s16ToFloat(samples);
}

/** s16 samples as little-endian bytes (a copy). */
export function s16leBytes(samples: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length * 2);
  if (LE) {
    out.set(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  } else {
    for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i]!, i * 2);
  }
  return out;
}

/**
 * s16 samples as little-endian bytes without a copy where the platform is little-endian (a view
 * of the same memory; a copy elsewhere): for a consumer that copies what it keeps, such as a
 * masked WebSocket send.
 */
export function s16leView(samples: Int16Array): Buffer {
  return LE ? Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength) : s16leBytes(samples);
}

/** float samples as IEEE float32 little-endian bytes (a copy). */
export function f32leBytes(samples: Float32Array): Buffer {
  const out = Buffer.allocUnsafe(samples.length * 4);
  if (LE) {
    out.set(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  } else {
    for (let i = 0; i < samples.length; i++) out.writeFloatLE(samples[i]!, i * 4);
  }
  return out;
}

/**
 * A typed view of little-endian bytes when the platform and the alignment allow it, else a
 * copy. Only whole samples: a trailing partial sample is ignored.
 */
function leView<T extends Int16Array | Float32Array | Int32Array>(
  bytes: Uint8Array,
  size: 2 | 4,
  make: (buf: ArrayBufferLike, offset: number, length: number) => T,
  read: (dv: DataView, offset: number) => number,
): T {
  const n = Math.floor(bytes.byteLength / size);
  if (LE) {
    if (bytes.byteOffset % size === 0) return make(bytes.buffer, bytes.byteOffset, n);
    const copy = new Uint8Array(n * size);
    copy.set(bytes.subarray(0, n * size));
    return make(copy.buffer, 0, n);
  }
  const out = make(new ArrayBuffer(n * size), 0, n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = read(dv, i * size);
  return out;
}

/** s16le bytes to samples (whole samples only; may share memory with `bytes`). */
export function s16leToS16(bytes: Uint8Array): Int16Array {
  return leView(
    bytes,
    2,
    (b, o, n) => new Int16Array(b, o, n),
    (dv, o) => dv.getInt16(o, true),
  );
}

/** f32le bytes to samples (whole samples only; may share memory with `bytes`). */
export function f32leToFloat(bytes: Uint8Array): Float32Array {
  return leView(
    bytes,
    4,
    (b, o, n) => new Float32Array(b, o, n),
    (dv, o) => dv.getFloat32(o, true),
  );
}

/** s16le bytes straight to float (whole samples only). */
export function s16leToFloat(bytes: Uint8Array): Float32Array {
  return s16ToFloat(s16leToS16(bytes));
}

/**
 * Cuts a byte stream into whole frames (frameBytes = bytes per sample x channels): push()
 * returns the whole frames available so far and keeps the remainder for the next push.
 */
export class FrameAligner {
  private carry: Uint8Array = new Uint8Array(0);

  constructor(readonly frameBytes: number) {
    if (!Number.isInteger(frameBytes) || frameBytes < 1) throw new TypeError('frameBytes must be a positive integer');
  }

  push(chunk: Uint8Array): Uint8Array {
    let bytes = chunk;
    if (this.carry.length > 0) {
      bytes = new Uint8Array(this.carry.length + chunk.length);
      bytes.set(this.carry);
      bytes.set(chunk, this.carry.length);
    }
    const whole = bytes.length - (bytes.length % this.frameBytes);
    this.carry = bytes.slice(whole);
    return bytes.subarray(0, whole);
  }

  /** Bytes held back because they do not make a whole frame yet. */
  get pending(): number {
    return this.carry.length;
  }
}
