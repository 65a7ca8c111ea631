// `pocketsphinx`: the speech recognizer the gateway runs itself (Debian's en-us model, in worker
// threads: gateway/upstreams/pocketsphinx/). The model is 16 kHz: higher rates are resampled to
// 16 kHz, while 8 kHz telephone audio goes to the recognizer as it is (it upsamples it itself and
// starts from a baseline measured on 8 kHz speech: ~25 % WER instead of ~80 % from a plain resample).
import { z } from 'zod';
import { floatToS16 } from '../../audio/pcm.ts';
import { resample } from '../../audio/resample.ts';
import { defineProtocol, type StreamingTranscriptionCapability, type TranscriptionCapability } from '../contract.ts';
import { asUpstreamError } from '../engine-http.ts';
import { modelPaths, pocketsphinx as loadLibrary } from '../pocketsphinx/ffi.ts';
import { configureRecognizer, createRecognizer, recognizerSettings } from '../pocketsphinx/recognizer.ts';
import { recognizerStream } from '../recognizer-stream.ts';

const MODEL_RATE = 16000;
const engineRate = (inputRate: number): 8000 | 16000 => (inputRate === 8000 ? 8000 : MODEL_RATE);

const transcription: TranscriptionCapability = {
  async transcribe(_target, req) {
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
    } catch (e) {
      // The recognizer's own failures (its worker died, the model would not load) as the engine's.
      throw req.signal.aborted ? e : asUpstreamError(e, false);
    } finally {
      recognizer.close();
    }
  },
};

const streamingTranscription: StreamingTranscriptionCapability = {
  engineRate,
  findsTurns: () => false,
  // A live session does not wait for a decoder: it is told at once that the server is full.
  open: async (_target, options) =>
    recognizerStream(await createRecognizer({ sampleRate: engineRate(options.sampleRate), keyterms: options.keyterms, waitForDecoder: false })),
};

export const pocketsphinx = defineProtocol({
  name: 'pocketsphinx',
  summary: 'CMU pocketsphinx (en-us), run by the gateway (upstream URL local:pocketsphinx)',
  settings: z.object({}).strict(),
  capabilities: ['transcription', 'streaming_transcription'],
  create: (engines) => {
    // The configured settings (SVC_STT_WORKERS, SVC_POCKETSPHINX_*), for the pool's threads.
    configureRecognizer(engines.pocketsphinx);
    return {
      // Healthy when the library loads and the model files are in the configured directory
      // (by default where Debian puts them).
      async health() {
        const started = performance.now();
        try {
          loadLibrary();
          modelPaths(recognizerSettings().modelDir);
          return { ok: true, latencyMs: Math.round(performance.now() - started) };
        } catch (e) {
          return { ok: false, latencyMs: 0, error: (e as Error).message };
        }
      },
      transcription,
      streamingTranscription,
    };
  },
});
