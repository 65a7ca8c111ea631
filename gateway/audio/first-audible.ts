// Where sound begins in a stretch of audio: "first audio" measured as a listener hears it (the
// first sample loud enough to hear), not the first byte, which is often the engine's lead-in
// silence.
import type { Encoding } from './output-format.ts';
import { decodeSamples } from './sample-encoding.ts';

/** -50 dBFS: below it a sample is silence (or dither) to a listener. */
export const AUDIBLE_THRESHOLD = 10 ** (-50 / 20);

/** The index of the first sample at or above `threshold` (of full scale), or -1 when none is. */
export function firstAudibleSample(samples: Float32Array, threshold = AUDIBLE_THRESHOLD): number {
  for (let i = 0; i < samples.length; i++) if (Math.abs(samples[i]!) >= threshold) return i;
  return -1;
}

/** Milliseconds into `bytes` (raw audio in `encoding` at `sampleRate`) of its first audible sample, or undefined when it is all silence. */
export function firstAudibleMs(bytes: Uint8Array, encoding: Encoding, sampleRate: number, threshold = AUDIBLE_THRESHOLD): number | undefined {
  const at = firstAudibleSample(decodeSamples(bytes, encoding), threshold);
  return at < 0 ? undefined : (at * 1000) / sampleRate;
}
