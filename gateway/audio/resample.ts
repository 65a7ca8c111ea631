// Sample-rate conversion with SpeexDSP's resampler (WebAssembly build, SIMD), quality 5
// ("desktop": ~80-tap windowed sinc, well over 60 dB of alias rejection for speech).
//
// Output is time-aligned with the input (the filter's leading delay is skipped) and its
// length is exactly round(n * outRate / inRate) for n input samples in total, however the
// input is chunked: the resampler keeps its filter state between push() calls, and end()
// feeds the filter's tail with zeros and cuts the output at that length. Chunked output is
// therefore the same samples as one-shot output, with nothing dropped or doubled at the
// chunk boundaries.
//
// With `keepDelay` the filter's leading delay is kept instead: the output lags the input by
// the filter's latency (a few ms of silence first) and each push returns the whole ratio of
// its input at once (n * outRate / inRate samples, when that is whole). A live stream whose
// every chunk is counted as it arrives (a phone line's audio, billed by the second) takes
// that; end() then has nothing left to add.
//
// The wasm module loads once, when this file is first imported (top-level await, ~10 ms),
// so that everything above it can stay synchronous. All resamplers share it and one pair of
// scratch buffers in its heap (calls never interleave: they are synchronous).
import createSpeexModule from '@echogarden/speex-resampler-wasm/simd';

const speex = await createSpeexModule();

export const RESAMPLER_QUALITY = 5;
/** Input samples copied into the wasm heap per call. */
const BLOCK = 8192;

const scratch = {
  lens: speex._malloc(8), // [in_len, out_len] as uint32, in and out
  err: speex._malloc(4),
  input: speex._malloc(BLOCK * 4),
  output: 0,
  outputCapacity: 0,
};

function outputScratch(capacity: number): number {
  if (capacity > scratch.outputCapacity) {
    if (scratch.output) speex._free(scratch.output);
    scratch.output = speex._malloc(capacity * 4);
    if (!scratch.output) throw new Error('speex resampler: out of wasm memory');
    scratch.outputCapacity = capacity;
  }
  return scratch.output;
}

// A resampler dropped without end()/close() (say, a client went away mid-stream) still frees
// its state in the wasm heap once garbage-collected.
const leaked = new FinalizationRegistry<number>((state) => speex._speex_resampler_destroy(state));

export interface Resampler {
  readonly inputRate: number;
  readonly outputRate: number;
  /** Resamples the next chunk; may return fewer samples than the ratio suggests (filter delay). */
  push(input: Float32Array): Float32Array;
  /** Returns the rest, so the total is round(inputTotal * outputRate / inputRate), and frees the state. */
  end(): Float32Array;
  /** Frees the state without flushing (idempotent). */
  close(): void;
}

/** Appends float chunks into one array, growing it when the estimate was short. */
class FloatCollector {
  private buf: Float32Array;
  length = 0;
  constructor(capacity: number) {
    this.buf = new Float32Array(Math.max(16, capacity));
  }
  append(chunk: Float32Array): void {
    if (this.length + chunk.length > this.buf.length) {
      const bigger = new Float32Array(Math.max(this.buf.length * 2, this.length + chunk.length));
      bigger.set(this.buf.subarray(0, this.length));
      this.buf = bigger;
    }
    this.buf.set(chunk, this.length);
    this.length += chunk.length;
  }
  take(max = Infinity): Float32Array {
    return this.buf.slice(0, Math.min(this.length, max));
  }
}

function checkRate(rate: number, name: string): void {
  if (!Number.isInteger(rate) || rate < 1 || rate > 1_000_000) throw new TypeError(`${name} must be an integer sample rate, got ${rate}`);
}

class SpeexResampler implements Resampler {
  private state: number;
  private readonly ratio: number;
  private readonly latency: number;
  private consumed = 0;
  private produced = 0;
  private readonly token = {};

  constructor(
    readonly inputRate: number,
    readonly outputRate: number,
    quality: number,
    keepDelay: boolean,
  ) {
    this.ratio = outputRate / inputRate;
    this.state = speex._speex_resampler_init(1, inputRate, outputRate, quality, scratch.err);
    if (!this.state) throw new Error(`speex resampler init failed (${speex.HEAP32[scratch.err >> 2]})`);
    if (!keepDelay) speex._speex_resampler_skip_zeros(this.state);
    this.latency = speex._speex_resampler_get_input_latency(this.state);
    leaked.register(this, this.state, this.token);
  }

  private run(input: Float32Array, into: FloatCollector): void {
    const outCapacity = Math.ceil(BLOCK * this.ratio) + 16;
    const outPtr = outputScratch(outCapacity);
    const lens = scratch.lens >> 2;
    for (let off = 0; off < input.length;) {
      const n = Math.min(BLOCK, input.length - off);
      speex.HEAPF32.set(input.subarray(off, off + n), scratch.input >> 2);
      speex.HEAPU32[lens] = n;
      speex.HEAPU32[lens + 1] = outCapacity;
      const err = speex._speex_resampler_process_float(this.state, 0, scratch.input, scratch.lens, outPtr, scratch.lens + 4);
      if (err !== 0) throw new Error(`speex resampler error ${err}`);
      const used = speex.HEAPU32[lens]!;
      const made = speex.HEAPU32[lens + 1]!;
      into.append(speex.HEAPF32.subarray(outPtr >> 2, (outPtr >> 2) + made));
      if (used === 0 && made === 0) throw new Error('speex resampler made no progress');
      off += used;
    }
  }

  push(input: Float32Array): Float32Array {
    if (!this.state) throw new Error('resampler already ended');
    const out = new FloatCollector(Math.ceil(input.length * this.ratio) + 2);
    this.run(input, out);
    this.consumed += input.length;
    this.produced += out.length;
    return out.take();
  }

  end(): Float32Array {
    if (!this.state) throw new Error('resampler already ended');
    const missing = Math.round(this.consumed * this.ratio) - this.produced;
    const out = new FloatCollector(Math.max(0, missing) + 16);
    // The last outputs need `latency` samples of input after them: feed silence until they
    // are out (one round in practice; the bound only guards against a filter surprise).
    const tail = new Float32Array(this.latency + Math.ceil(1 / this.ratio) + 2);
    for (let round = 0; out.length < missing && round < 8; round++) this.run(tail, out);
    this.close();
    const rest = out.take(Math.max(0, missing));
    this.produced += rest.length;
    return rest;
  }

  close(): void {
    if (!this.state) return;
    speex._speex_resampler_destroy(this.state);
    leaked.unregister(this.token);
    this.state = 0;
  }
}

/** Same rate in and out: samples pass through unchanged. */
class IdentityResampler implements Resampler {
  constructor(
    readonly inputRate: number,
    readonly outputRate: number,
  ) {}
  push(input: Float32Array): Float32Array {
    return input;
  }
  end(): Float32Array {
    return new Float32Array(0);
  }
  close(): void {}
}

export interface ResamplerOptions {
  quality?: number;
  /** Keep the filter's delay: every push returns its whole share of output at once, lagging the input (see the header). */
  keepDelay?: boolean;
}

/** A streaming resampler (mono). Same rates give a pass-through that returns its input. */
export function createResampler(inputRate: number, outputRate: number, options: ResamplerOptions = {}): Resampler {
  checkRate(inputRate, 'inputRate');
  checkRate(outputRate, 'outputRate');
  if (inputRate === outputRate) return new IdentityResampler(inputRate, outputRate);
  return new SpeexResampler(inputRate, outputRate, options.quality ?? RESAMPLER_QUALITY, options.keepDelay ?? false);
}

/** One-shot resampling: round(input.length * outputRate / inputRate) samples, in a new array. */
export function resample(input: Float32Array, inputRate: number, outputRate: number, options: { quality?: number } = {}): Float32Array {
  const r = createResampler(inputRate, outputRate, options);
  if (r instanceof IdentityResampler) return input.slice();
  try {
    const head = r.push(input);
    const tail = r.end();
    const out = new Float32Array(head.length + tail.length);
    out.set(head);
    out.set(tail, head.length);
    return out;
  } finally {
    r.close();
  }
}
