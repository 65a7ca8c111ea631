// Where sound begins in a stretch of audio: "first audio" measured as a listener hears it (the
// first sample loud enough to hear), not the first byte, which is often the engine's lead-in
// silence. AudibleWatch follows audio sent chunk by chunk and played from its first byte: when
// its first audible sample is heard.
import type { Encoding } from './output-format.ts';
import type { PcmSamples } from './pcm.ts';
import { decodePcm } from './sample-encoding.ts';

/** -50 dBFS: below it a sample is silence (or dither) to a listener. */
export const AUDIBLE_THRESHOLD = 10 ** (-50 / 20);

/**
 * The index of the first sample at or above `threshold` (of full scale), or -1 when none is.
 * Float samples are in [-1, 1]; 16-bit ones (PCM s16) in [-32768, 32767].
 */
export function firstAudibleSample(samples: PcmSamples, threshold = AUDIBLE_THRESHOLD): number {
  const limit = samples instanceof Int16Array ? threshold * 32768 : threshold;
  for (let i = 0; i < samples.length; i++) if (Math.abs(samples[i]!) >= limit) return i;
  return -1;
}

/** Milliseconds into `bytes` (raw audio in `encoding` at `sampleRate`) of its first audible sample, or undefined when it is all silence. */
export function firstAudibleMs(bytes: Uint8Array, encoding: Encoding, sampleRate: number, threshold = AUDIBLE_THRESHOLD): number | undefined {
  const at = firstAudibleSample(decodePcm(bytes, encoding), threshold);
  return at < 0 ? undefined : (at * 1000) / sampleRate;
}

/**
 * One stream of audio, sent chunk by chunk and played from its first byte at real time: when its
 * first audible sample is heard. A chunk plays when the ones before it have played, or when it is
 * sent if that is later (the listener ran out of audio and waited).
 */
export class AudibleWatch {
  private firstSentAt: number | undefined;
  private sentMs = 0;
  /** When the first audible sample is heard (on the clock `sent` was given), once found. */
  heardAt: number | undefined;

  /** A chunk of `samples` at `sampleRate` sent at `now`: returns when its first audible sample is heard if it holds the stream's first, else undefined. */
  sent(samples: PcmSamples, sampleRate: number, now = performance.now()): number | undefined {
    if (this.heardAt !== undefined || samples.length === 0) return undefined;
    this.firstSentAt ??= now;
    const plays = Math.max(now, this.firstSentAt + this.sentMs);
    const millis = (samples.length * 1000) / sampleRate;
    this.sentMs += millis;
    const at = firstAudibleSample(samples);
    if (at < 0) return undefined;
    this.heardAt = plays + (at * 1000) / sampleRate;
    return this.heardAt;
  }

  /** The same, for raw audio in `encoding` (read in place where it can be: every chunk of a stream comes here until one is heard). */
  sentBytes(bytes: Uint8Array, encoding: Encoding, sampleRate: number, now = performance.now()): number | undefined {
    return this.heardAt === undefined ? this.sent(decodePcm(bytes, encoding), sampleRate, now) : undefined;
  }
}
