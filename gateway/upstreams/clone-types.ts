import type { UpstreamEntry } from '../registry/model-registry.js';

/** A measured clip: mono float PCM, and the same as a 16-bit WAV for engines that take files. */
export interface VoiceClip {
  samples: Float32Array;
  sampleRate: number;
  wav: Buffer;
}

export interface VoiceCloneRequest {
  clip: VoiceClip;
  name: string;
  language: string;
  transcript: string | null;
  /** stability trades likeness for consistency; similarity tracks the speaker closely. */
  mode: 'stability' | 'similarity';
  signal: AbortSignal;
  timeoutMs: number;
}

/** What a voice profile keeps: the engine's voice id, its parameters, and when it lapses. */
export interface PreparedVoice {
  upstreamId: string;
  params: Record<string, unknown> | null;
  expiresAt: Date | null;
  /** Measurements or engine facts worth showing in the voice's source_metadata. */
  metadata: Record<string, unknown>;
  /** Set when the engine itself measured the gender (local engines). */
  gender?: string;
  description?: string;
}

/** An engine that can make a voice from a clip (instant cloning, profile preparation). */
export interface VoiceCloneAdapter {
  clone(upstream: UpstreamEntry, request: VoiceCloneRequest): Promise<PreparedVoice>;
}
