import type { PcmSamples } from '../audio/pcm.js';
import type { UpstreamEntry } from '../registry/model-registry.js';

export interface SpeechRequest {
  /** Text after pronunciation-dictionary expansion. */
  text: string;
  /** The voice as the engine knows it (the profile's upstream id) and profile parameters. */
  voice: { upstreamId: string; params: Record<string, unknown> | null };
  language: string | undefined;
  /** 0.6-1.5; 1 is the engine's natural rate. */
  speed: number;
  signal: AbortSignal;
  timeoutMs: number;
}

/** Mono PCM (float or 16-bit) at the engine's own rate, produced progressively. */
export interface SpeechStream {
  sampleRate: number;
  chunks: AsyncIterable<PcmSamples>;
}

export interface SpeechAdapter {
  synthesize(upstream: UpstreamEntry, request: SpeechRequest): Promise<SpeechStream>;
  /** How the engine wants inline phonemes from pronunciation dictionaries; null if it takes none. */
  formatPhoneme: ((phoneme: string) => string) | null;
}
