// What the voice operations that make voices (clone, localize, prepare a profile, the jobs that
// do it) run with. They keep the rules and the records; which models can make voices and the
// work on audio belong to the process that runs the engines (the gateway), which hands them in
// as VoiceEngines.
import type { JobQueueDeps } from '../jobs/queue-voice-job.ts';

export type CloneMode = 'stability' | 'similarity';

/** A clip measured from its audio (gateway/voices/voice-clip.ts MeasuredClip). */
export interface VoiceClip {
  samples: Float32Array;
  sampleRate: number;
  /** The clip as WAV, as stored and as engines take it. */
  wav: Buffer;
  durationMs: number;
}

/** What an engine made of a clip (gateway/upstreams/contract.ts PreparedVoice). */
export interface PreparedProfile {
  upstreamId: string;
  params: Record<string, unknown> | null;
  expiresAt: Date | null;
  /** Measurements or engine facts worth showing in the voice's source_metadata. */
  metadata: Record<string, unknown>;
  gender?: string;
  description?: string;
}

/** A ready profile a voice can speak through. */
export interface ReadyProfile {
  modelId: string;
  upstreamId: string;
  params: unknown;
}

export interface VoiceEngines {
  /** The TTS model to make a voice with: the one named (refused unless an engine of it can clone), else the default one. */
  chooseCloneModel(modelId: string | undefined): string;
  /** The id of the TTS model `modelId` names (an alias resolved); model_not_found otherwise. */
  resolveModel(modelId: string): string;
  /** Refuses (invalid_request) a model none of whose engines can clone. */
  requireCloneCapable(modelId: string): void;
  /** Whether an engine of the model that can clone is online: the voice is made now rather than by a job. */
  canCloneNow(modelId: string): boolean;
  /** A stored clip (WAV) measured from its audio. */
  decodeClip(wav: Buffer): VoiceClip;
  /** Several clips as one (professional clones). */
  joinClips(clips: VoiceClip[]): Promise<VoiceClip>;
  /** Runs the model's clone engine on the clip. */
  prepare(
    modelId: string,
    clip: VoiceClip,
    voice: { name: string; language: string; transcript: string | null },
    mode: CloneMode,
    signal: AbortSignal,
  ): Promise<PreparedProfile>;
  /** The voice speaking `text` through the first of its profiles whose model is online; null when none is. */
  speak(profiles: ReadyProfile[], text: string, language: string, signal: AbortSignal): Promise<VoiceClip | null>;
  /** Whether cloning with the model goes to an engine outside this process: one that may bill, and keeps the voice in its account. */
  clonesBill(modelId: string): boolean;
  /** Deletes an engine's copy of a voice cloned with the model where the model's engines can; false when none can (or the model is gone). */
  deleteEngineCopy(modelId: string, upstreamId: string, signal: AbortSignal): Promise<boolean>;
}

export interface VoiceDeps extends JobQueueDeps {
  /** Where blobs (clips, previews) are stored. */
  dataDir: string;
  engines: VoiceEngines;
  /** Told when a voice got a ready profile, so that a preview worker in this process makes its preview now rather than at its next pass. */
  previewsWanted?: () => void;
}
