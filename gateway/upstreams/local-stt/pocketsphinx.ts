// The local speech recogniser (pocketsphinx, Debian's en-us model) as a transcription adapter:
// batch and streaming. The model is 16 kHz: higher rates are resampled to 16 kHz here, while
// 8 kHz telephone audio goes to the recogniser as it is (it upsamples it itself and starts
// from a baseline measured on 8 kHz speech: ~25 % WER instead of ~80 % from a plain resample).
import { floatToS16 } from '../../audio/pcm.js';
import { resample } from '../../audio/resample.js';
import { createRecognizer } from '../pocketsphinx/recognizer.js';
import { modelPaths, pocketsphinx } from '../pocketsphinx/ffi.js';
import type { HealthResult } from '../types.js';
import type { TranscriptionAdapter } from '../transcription-types.js';

const MODEL_RATE = 16000;
const engineRate = (inputRate: number): 8000 | 16000 => (inputRate === 8000 ? 8000 : MODEL_RATE);

export const pocketsphinxAdapter: TranscriptionAdapter = {
  async transcribe(_upstream, req) {
    const rate = engineRate(req.sampleRate);
    const samples = req.sampleRate === rate ? req.samples : resample(req.samples, req.sampleRate, rate);
    const recognizer = await createRecognizer({ sampleRate: rate, keyterms: req.keyterms, signal: req.signal });
    try {
      const pcm = floatToS16(samples);
      // A second at a time, so a client that leaves stops the work.
      for (let at = 0; at < pcm.length; at += rate) {
        if (req.signal.aborted) throw req.signal.reason;
        await recognizer.push(pcm.subarray(at, at + rate));
      }
      return await recognizer.finalize();
    } finally {
      recognizer.close();
    }
  },
  stream: {
    engineRate,
    // A live session does not wait for a decoder: it is told at once that the server is full.
    open: (_upstream, options) => createRecognizer({ sampleRate: engineRate(options.sampleRate), keyterms: options.keyterms, waitForDecoder: false }),
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
