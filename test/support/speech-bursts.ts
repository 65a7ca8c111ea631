// Test audio that the gateway's turn detector (Silero VAD) hears as speech and the scripted
// engines hear as words: voiced bursts (gateway/audio/test-signals.ts voicedBurst) at known
// places, silence elsewhere. A pure tone is no speech to the VAD, so route tests whose turns the
// gateway finds speak in these.
import { voicedBurst } from '../../gateway/audio/test-signals.ts';

/**
 * Full amplitude (peak ~0.8): the scripted engines count a 20 ms frame as voiced above 5 % of
 * full scale (RMS), and the burst's 4 Hz syllable envelope dips to a fifth of its peak, where
 * its RMS is then ~6 %; at half amplitude a burst would fall apart into several words.
 */
export const SPEECH_AMPLITUDE = 1;

/** The pitch of a burst unless given: mid-range for the VAD (100-160 Hz is speech to it). */
export const SPEECH_F0 = 120;

/** A voiced burst of `seconds` at `f0`, as the scripted engines hear one word. */
export const speechBurst = (rate: number, seconds: number, f0 = SPEECH_F0): Float32Array => voicedBurst(f0, rate, seconds, SPEECH_AMPLITUDE);

/** Voiced bursts at [start, end] seconds (pitch `f0`, default SPEECH_F0), silence elsewhere. */
export function speechBursts(rate: number, spans: [start: number, end: number, f0?: number][], totalSeconds: number): Float32Array {
  const out = new Float32Array(Math.round(rate * totalSeconds));
  for (const [start, end, f0] of spans) out.set(speechBurst(rate, end - start, f0), Math.round(start * rate));
  return out;
}
