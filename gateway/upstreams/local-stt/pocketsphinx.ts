// The local speech recogniser (pocketsphinx, Debian's en-us model) as a transcription adapter:
// batch and streaming. Audio at any of the six rates is resampled to the model's 16 kHz here.
import { floatToS16 } from '../../audio/pcm.js';
import { resample } from '../../audio/resample.js';
import { createRecognizer } from '../pocketsphinx/recognizer.js';
import { modelPaths, pocketsphinx } from '../pocketsphinx/ffi.js';
import type { HealthResult } from '../types.js';
import type { TranscriptionAdapter } from '../transcription-types.js';

const ENGINE_RATE = 16000;
// Batch audio goes to the recognizer a second at a time, so a client that leaves stops it.
const BATCH_CHUNK = ENGINE_RATE;

export const pocketsphinxAdapter: TranscriptionAdapter = {
  async transcribe(_upstream, req) {
    const samples = req.sampleRate === ENGINE_RATE ? req.samples : resample(req.samples, req.sampleRate, ENGINE_RATE);
    const recognizer = await createRecognizer({ sampleRate: ENGINE_RATE, keyterms: req.keyterms });
    try {
      const pcm = floatToS16(samples);
      for (let at = 0; at < pcm.length; at += BATCH_CHUNK) {
        if (req.signal.aborted) throw req.signal.reason;
        await recognizer.push(pcm.subarray(at, at + BATCH_CHUNK));
      }
      return await recognizer.finalize();
    } finally {
      recognizer.close();
    }
  },
  stream: {
    sampleRate: ENGINE_RATE,
    open: (_upstream, options) => createRecognizer({ sampleRate: ENGINE_RATE, keyterms: options.keyterms }),
  },
};

/** Healthy when the library loads and the model files are where Debian puts them. */
export async function checkPocketsphinx(): Promise<HealthResult> {
  const started = performance.now();
  try {
    pocketsphinx();
    modelPaths();
    return { ok: true, latencyMs: Math.round(performance.now() - started) };
  } catch (e) {
    return { ok: false, latencyMs: 0, error: (e as Error).message };
  }
}
