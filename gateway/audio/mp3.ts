// MP3 encoding (mono, constant bit rate) with LAME, as compiled to WebAssembly by
// wasm-media-encoders.
//
// We drive the package's mp3.wasm directly instead of through its JS wrapper: the wrapper
// only instantiates asynchronously and gives every encoder its own wasm instance (16 MiB of
// memory each), while LAME keeps all its state behind the handle enc_init returns. Here one
// instance, compiled and started synchronously on first use, hosts every encoder, so a
// converter can be created synchronously. The exports and the parameter block layout are
// those of wasm-media-encoders 0.7.0 (checked against the module's version string at load).
//
// Bit rates: MPEG-1 (32, 44.1, 48 kHz) allows 32-320 kb/s; MPEG-2 (16, 22.05, 24 kHz) stops at
// 160 kb/s, and LAME caps MPEG-2.5 (8 kHz) at 64 kb/s. A request above the ceiling is encoded
// at the ceiling (what LAME itself does; rejecting it would make most of the spec's bit rates
// unusable at the low sample rates); mp3BitRate() tells the caller the rate it gets.
// The stream starts with LAME's usual encoder delay (1105 samples of near-silence: 23 ms at
// 48 kHz, 138 ms at 8 kHz); without a seekable output there is no LAME tag to tell players
// to trim it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const ABI_VERSION = 'wasm-media-encoders-0.7.0';
/** Samples handed to LAME per call: bounds the PCM buffer it allocates in the wasm heap. */
const CHUNK = 8192;

interface LameExports {
  memory: WebAssembly.Memory;
  _initialize(): void;
  version(): number;
  malloc(bytes: number): number;
  free(ptr: number): void;
  enc_init(paramsPtr: number): number;
  enc_get_pcm(ref: number, samples: number): number;
  enc_encode(ref: number, samples: number): number;
  enc_get_out_buf(ref: number): number;
  enc_flush(ref: number): number;
  enc_free(ref: number): void;
}

let compiled: WebAssembly.Module | null = null;
let lame: LameExports | null = null;

function cString(mem: WebAssembly.Memory, ptr: number): string {
  const bytes = new Uint8Array(mem.buffer, ptr, Math.min(256, mem.buffer.byteLength - ptr));
  const end = bytes.indexOf(0);
  return Buffer.from(bytes.subarray(0, end < 0 ? bytes.length : end)).toString('latin1');
}

function lameInstance(): LameExports {
  if (lame) return lame;
  compiled ??= new WebAssembly.Module(readFileSync(createRequire(import.meta.url).resolve('wasm-media-encoders/wasm/mp3')));
  const instance = new WebAssembly.Instance(compiled, {
    wasi_snapshot_preview1: {
      proc_exit: (code: number) => {
        throw new Error(`LAME exited (${code})`);
      },
    },
    env: { emscripten_notify_memory_growth: () => {} },
  });
  const e = instance.exports as unknown as LameExports;
  e._initialize();
  const version = cString(e.memory, e.version());
  if (version !== ABI_VERSION) throw new Error(`mp3.wasm is ${version}; gateway/audio/mp3.ts was written for ${ABI_VERSION}`);
  lame = e;
  return e;
}

/** The bit rate (b/s) an MP3 at this sample rate is encoded at when `requested` is asked for. */
export function mp3BitRate(sampleRate: number, requested: number): number {
  const ceiling = sampleRate >= 32000 ? 320000 : sampleRate >= 16000 ? 160000 : 64000;
  return Math.min(requested, ceiling);
}

const leaked = new FinalizationRegistry<{ e: LameExports; ref: number }>(({ e, ref }) => e.enc_free(ref));

export interface Mp3Encoder {
  readonly sampleRate: number;
  /** Effective bit rate in b/s (see mp3BitRate). */
  readonly bitRate: number;
  /** Encodes samples in [-1, 1]; returns whatever whole frames are ready (often none yet). */
  encode(samples: Float32Array): Buffer;
  /** Flushes the last frames and frees the encoder. */
  end(): Buffer;
  /** Frees the encoder without flushing (idempotent). */
  close(): void;
}

class LameEncoder implements Mp3Encoder {
  private readonly e: LameExports;
  private ref: number;
  private readonly token = {};
  readonly bitRate: number;

  constructor(
    readonly sampleRate: number,
    requestedBitRate: number,
  ) {
    this.bitRate = mp3BitRate(sampleRate, requestedBitRate);
    const e = (this.e = lameInstance());
    // Parameter block: u32 channels, u32 input rate; i32 kb/s, f32 VBR quality (-1: CBR), i32 output rate.
    const p = e.malloc(20);
    if (!p) throw new Error('LAME: out of wasm memory');
    try {
      const i32 = new Int32Array(e.memory.buffer, p, 5);
      i32[0] = 1;
      i32[1] = sampleRate;
      i32[2] = this.bitRate / 1000;
      new Float32Array(e.memory.buffer, p, 5)[3] = -1;
      // The output rate is set explicitly: left open, LAME picks its own for low bit rates.
      i32[4] = sampleRate;
      this.ref = this.call(() => e.enc_init(p));
    } finally {
      e.free(p);
    }
    if (!this.ref) throw new Error(`LAME rejected ${sampleRate} Hz at ${this.bitRate} b/s`);
    leaked.register(this, { e, ref: this.ref }, this.token);
  }

  /** A trap leaves the shared instance in an unknown state: later encoders get a fresh one. */
  private call<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (lame === this.e) lame = null;
      throw err;
    }
  }

  private output(bytes: number): Buffer {
    if (bytes < 0) throw new Error(`LAME encode error ${bytes}`);
    return Buffer.from(new Uint8Array(this.e.memory.buffer, this.e.enc_get_out_buf(this.ref), bytes));
  }

  encode(samples: Float32Array): Buffer {
    if (!this.ref) throw new Error('mp3 encoder already ended');
    const parts: Buffer[] = [];
    for (let off = 0; off < samples.length; off += CHUNK) {
      const chunk = samples.subarray(off, Math.min(off + CHUNK, samples.length));
      const bytes = this.call(() => {
        const channels = this.e.enc_get_pcm(this.ref, chunk.length);
        if (!channels) throw new Error('LAME: PCM buffer allocation failed');
        const mono = new Int32Array(this.e.memory.buffer, channels, 1)[0]!;
        new Float32Array(this.e.memory.buffer, mono, chunk.length).set(chunk);
        return this.e.enc_encode(this.ref, chunk.length);
      });
      const out = this.output(bytes);
      if (out.length) parts.push(out);
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  end(): Buffer {
    if (!this.ref) throw new Error('mp3 encoder already ended');
    const out = this.output(this.call(() => this.e.enc_flush(this.ref)));
    this.close();
    return out;
  }

  close(): void {
    if (!this.ref) return;
    this.e.enc_free(this.ref);
    leaked.unregister(this.token);
    this.ref = 0;
  }
}

export function createMp3Encoder(options: { sampleRate: number; bitRate: number }): Mp3Encoder {
  return new LameEncoder(options.sampleRate, options.bitRate);
}

/** One-shot: samples at `sampleRate` to a complete MP3 stream. */
export function encodeMp3(samples: Float32Array, sampleRate: number, bitRate: number): Buffer {
  const enc = createMp3Encoder({ sampleRate, bitRate });
  try {
    const head = enc.encode(samples);
    return Buffer.concat([head, enc.end()]);
  } finally {
    enc.close();
  }
}
