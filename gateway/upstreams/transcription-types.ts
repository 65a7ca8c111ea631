import type { UpstreamEntry } from '../registry/model-registry.js';

export interface Word {
  word: string;
  /** Seconds from the start of the audio. */
  start: number;
  end: number;
}

export interface Transcript {
  text: string;
  words: Word[];
}

export interface TranscriptionRequest {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  sampleRate: number;
  language: string | undefined;
  keyterms: string[];
  signal: AbortSignal;
  timeoutMs: number;
}

/** A live recognition session (streaming STT). */
export interface StreamingRecognizer {
  /** 16-bit mono PCM at the session's engine rate; resolves with the current partial transcript. */
  push(samples: Int16Array): Promise<Transcript>;
  /** Ends the current utterance: its final transcript; later audio starts a new one. */
  finalize(): Promise<Transcript>;
  close(): void;
}

export interface TranscriptionAdapter {
  transcribe(upstream: UpstreamEntry, request: TranscriptionRequest): Promise<Transcript>;
  /** Streaming sessions, for engines that offer them; absent means batch-only. */
  stream?: {
    /** The sample rate the engine wants pushed, for audio arriving at `inputRate`. */
    engineRate(inputRate: number): number;
    open(upstream: UpstreamEntry, options: { keyterms: string[]; language: string | undefined; sampleRate: number }): Promise<StreamingRecognizer>;
  };
}
