// The upstream contract: what the gateway asks of an engine, and how an engine fails. Every
// protocol module (gateway/upstreams/protocols/*) implements these interfaces and nothing else;
// this module imports nothing from the edge (routes, the error envelope, the gateway context)
// or the database, so a protocol can be written and tested against a scripted peer alone.
// How to add one: docs/adding-a-protocol.md.
import type { output, ZodType } from 'zod';
import type { PcmSamples } from '../audio/pcm.ts';

// ---------------------------------------------------------------------------------------------
// The target and the call

/** An upstream's settings, as its protocol's schema parsed them. */
export type UpstreamSettings = Record<string, unknown>;

/**
 * One engine endpoint of a model, as the registry hands it to a protocol. A protocol sees its
 * own settings' type (`S`, from its schema: see defineProtocol); the gateway sees any.
 */
export interface UpstreamTarget<S = UpstreamSettings> {
  id: string;
  /** The gateway's model this upstream serves (for messages). */
  modelId: string;
  /** Base URL without a trailing slash (`https://api.deepgram.com`), or `local:<engine>`. */
  url: string;
  protocol: string;
  /** The engine's name for the model. */
  upstreamModel: string;
  /** The engine's API key (read from the environment variable the registry names), if any. */
  readonly apiKey: string | undefined;
  /** This upstream's settings, as parsed by its protocol's `settings` schema. */
  settings: S;
}

/** Every engine call carries one: aborted when the client leaves, the key is revoked or the deadline passes. */
export interface CallOptions {
  signal: AbortSignal;
  /** The longest the engine may stay silent (connect, headers, between chunks). */
  timeoutMs: number;
}

// ---------------------------------------------------------------------------------------------
// How an engine fails: one error type, translated into the client's envelope in one place
// (gateway/upstream-envelope.ts).

export type UpstreamFailure =
  /** The request never reached the engine (refused, unresolvable, TLS): another upstream may be tried. */
  | 'connect'
  /** The engine stayed silent past the deadline. */
  | 'timeout'
  /** The engine answered with an error status (HTTP, or a WebSocket handshake or close code). */
  | 'status'
  /** The engine answered something the protocol does not allow (not JSON, no transcript, no voice id). */
  | 'protocol'
  /** The engine's stream broke after it had started (connection dropped, engine crashed). */
  | 'broken'
  /** The engine is not installed or cannot run here (local engines). */
  | 'unavailable'
  /** The engine is at capacity (local engines' bounded pools): retry shortly. */
  | 'busy';

export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(
    readonly kind: UpstreamFailure,
    message: string,
    readonly details: {
      /** The engine's status: HTTP status, or a WebSocket close code. */
      status?: number;
      /** `status`: the engine's own message, as it gave it (without the key). */
      engineMessage?: string;
      /** The request field the engine blamed (an OpenAI-style `param`). */
      param?: string | null;
      /** `busy`: when to retry. */
      retryAfterSeconds?: number;
      cause?: unknown;
    } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
  }
}

export function isUpstreamError(e: unknown): e is UpstreamError {
  return e instanceof UpstreamError;
}

/** An answer read whole that passed its bound: the rest was not read (the request is abandoned). */
export function answerTooLarge(maxBytes: number): UpstreamError {
  const size = maxBytes % (1024 * 1024) === 0 ? `${maxBytes / (1024 * 1024)} MiB` : `${Math.ceil(maxBytes / 1024)} KiB`;
  return new UpstreamError('protocol', `The engine's answer was too large (over ${size}); the gateway stopped reading it.`);
}

// ---------------------------------------------------------------------------------------------
// Capabilities

export interface HealthResult {
  ok: boolean;
  latencyMs: number;
  error?: string;
}

export type HealthCheck<S = UpstreamSettings> = (target: UpstreamTarget<S>, signal: AbortSignal) => Promise<HealthResult>;

/**
 * An engine's answer to a chat completion, shaped like an HTTP response from an
 * OpenAI-compatible server: local engines produce the same bytes (JSON or SSE), so the route
 * relays and meters every engine the same way.
 */
export interface ChatResponse {
  statusCode: number;
  contentType: string;
  body: AsyncIterable<Uint8Array>;
  /** The whole body; past `maxBytes` the answer is abandoned and this rejects with `answerTooLarge`. */
  text(maxBytes?: number): Promise<string>;
}

export interface ChatRequest extends CallOptions {
  /** The client's bytes, forwarded unchanged where the engine speaks HTTP. */
  raw: Buffer;
  body: Record<string, unknown>;
}

export type ChatCapability<S = UpstreamSettings> = (target: UpstreamTarget<S>, request: ChatRequest) => Promise<ChatResponse>;

export interface SpeechRequest extends CallOptions {
  /** Text after pronunciation-dictionary expansion. */
  text: string;
  /** The voice as the engine knows it (the profile's upstream id) and profile parameters. */
  voice: { upstreamId: string; params: Record<string, unknown> | null };
  language: string | undefined;
  /** 0.6-1.5; 1 is the engine's natural rate. */
  speed: number;
  /** Who the speech is for (an org id): a local engine's bounded pool gives each its share. */
  tenant?: string;
}

/** Mono PCM (float or 16-bit) at `sampleRate`, produced progressively; the iterator throws UpstreamError. */
export interface SpeechStream {
  sampleRate: number;
  chunks: AsyncIterable<PcmSamples>;
}

export interface SpeechCapability<S = UpstreamSettings> {
  /** Resolves once the engine has accepted the request (its headers), before any audio. */
  synthesize(target: UpstreamTarget<S>, request: SpeechRequest): Promise<SpeechStream>;
  /** How the engine wants inline phonemes from pronunciation dictionaries; null if it takes none. */
  formatPhoneme: ((phoneme: string) => string) | null;
}

export interface Word {
  word: string;
  /** Seconds from the start of the audio (of the session, for streams). */
  start: number;
  end: number;
}

export interface Transcript {
  text: string;
  words: Word[];
}

export interface TranscriptionRequest extends CallOptions {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  sampleRate: number;
  language: string | undefined;
  keyterms: string[];
}

export interface TranscriptionCapability<S = UpstreamSettings> {
  transcribe(target: UpstreamTarget<S>, request: TranscriptionRequest): Promise<Transcript>;
}

export interface StreamingTranscriptionOptions extends CallOptions {
  /** The rate of the audio that will be written (what `engineRate` asked for). */
  sampleRate: number;
  language: string | undefined;
  keyterms: string[];
  /**
   * Whether the engine should find turns itself (`findsTurns` engines). False when the gateway's
   * own turn detection drives `finalize()`.
   */
  engineTurns: boolean;
}

/** What a streaming transcription reports, in order. */
export type TranscriptionEvent =
  /**
   * Interim: the words heard since the last final, as the engine currently hears them (each
   * interim replaces the previous one). Final: those words settled; the next interim starts after them.
   */
  | { type: 'transcript'; isFinal: boolean; text: string; words: Word[] }
  /** The engine heard speech begin (engines that find turns). Seconds from the session's start. */
  | { type: 'speech_started'; atSeconds: number }
  /** The engine decided the speaker's turn is over (engines that find turns); its final came before. */
  | { type: 'end_of_turn'; atSeconds: number }
  /** Everything written before a `finalize()` has been transcribed and reported: one per call, in order. */
  | { type: 'finalized' };

/**
 * A live transcription. `events` ends when the stream is closed, or throws an UpstreamError when
 * the engine fails (the stream is then over).
 */
export interface TranscriptionStream {
  /**
   * 16-bit mono PCM at the opened sample rate. Never blocks: see `pendingSamples`. The samples
   * are lent for the call (they may be a view of the client's frame, or of the session's replay
   * buffer): a stream copies what it keeps and never writes into them.
   */
  write(samples: Int16Array): void;
  /** Samples written but not yet taken by the engine (the gateway refuses to buffer without bound). */
  readonly pendingSamples: number;
  /** Ends the current utterance: its final transcript, then `finalized`. Later audio starts a new one. */
  finalize(): void;
  /** Frees the engine's side at once (closes its connection); `events` ends. Idempotent. */
  close(): void;
  /**
   * The gateway's voice-activity detection, as it changes: whether someone is speaking now. Only
   * streams over batch engines use it (they send an engine only what has speech); until it is
   * first called, all audio counts as speech.
   */
  speaking?(active: boolean): void;
  events: AsyncIterable<TranscriptionEvent>;
}

export interface StreamingTranscriptionCapability<S = UpstreamSettings> {
  /** The sample rate the engine wants written, for audio arriving at `inputRate`. */
  engineRate(inputRate: number): number;
  /** True when the engine (as this upstream is set up) finds turns itself and reports `speech_started` / `end_of_turn`. */
  findsTurns(target: UpstreamTarget<S>): boolean;
  /** Resolves once the engine has accepted the session (rejects with UpstreamError otherwise). */
  open(target: UpstreamTarget<S>, options: StreamingTranscriptionOptions): Promise<TranscriptionStream>;
}

/** A measured clip: mono float PCM, and the same as a 16-bit WAV for engines that take files. */
export interface VoiceClip {
  samples: Float32Array;
  sampleRate: number;
  wav: Buffer;
}

export interface VoiceCloneRequest extends CallOptions {
  clip: VoiceClip;
  name: string;
  language: string;
  transcript: string | null;
  /** stability trades likeness for consistency; similarity tracks the speaker closely. */
  mode: 'stability' | 'similarity';
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

export interface CloneCapability<S = UpstreamSettings> {
  clone(target: UpstreamTarget<S>, request: VoiceCloneRequest): Promise<PreparedVoice>;
  /**
   * Deletes a voice this engine cloned (its id, as `clone` gave it), freeing the slot it takes in
   * the engine's account; an engine that no longer has it is not an error. Absent where the
   * engine keeps no voices or cannot delete them.
   */
  deleteVoice?(target: UpstreamTarget<S>, upstreamId: string, call: CallOptions): Promise<void>;
}

/** One voice of an engine's own catalogue, importable as a platform voice. */
export interface EngineVoice {
  /** The engine's voice id (becomes the profile's upstream id). */
  id: string;
  name: string;
  /** BCP-47 or ISO 639-1 as the engine gives it; 'en' when it gives none. */
  language: string;
  gender: 'male' | 'female' | 'neutral' | null;
  description: string;
}

export interface VoiceCatalogueCapability<S = UpstreamSettings> {
  listVoices(target: UpstreamTarget<S>, call: CallOptions): Promise<EngineVoice[]>;
}

// ---------------------------------------------------------------------------------------------
// The protocol definition: one per module, the registry is a list of them.

/** Where a runtime holds each capability, by its name in a protocol's `capabilities`. */
interface RuntimeKeys {
  chat: 'chat';
  speech: 'speech';
  transcription: 'transcription';
  streaming_transcription: 'streamingTranscription';
  clone: 'clone';
  voice_catalogue: 'voiceCatalogue';
}

export type Capability = keyof RuntimeKeys;

interface RuntimeCapabilities<S> {
  chat: ChatCapability<S>;
  speech: SpeechCapability<S>;
  transcription: TranscriptionCapability<S>;
  streamingTranscription: StreamingTranscriptionCapability<S>;
  clone: CloneCapability<S>;
  voiceCatalogue: VoiceCatalogueCapability<S>;
}

/** What every runtime has, whatever its capabilities. */
interface RuntimeBase<S> {
  health: HealthCheck<S>;
  /**
   * OpenAI's Responses API (`POST /responses`), for engines that may serve it: the client's bytes
   * forwarded, the engine's answer as it is. Without it (or when the engine answers that it has
   * no such route) the gateway translates the request to `chat` (gateway/llm/responses-via-chat.ts).
   */
  responses?: ChatCapability<S>;
}

/** Settings of the process's own engines (server/config/env.ts `engines`), for local protocols. */
export interface EngineConfig {
  dataDir: string;
  /** The in-process llama.cpp engine (SVC_LLAMA_*): sequences per model, threads, context tokens, requests that may wait for a sequence. */
  llama: { sequences: number; threads: number; contextSize: number; maxWaiting: number };
  /** The local speech recognizer (SVC_STT_WORKERS, SVC_STT_SPARE_DECODERS, SVC_POCKETSPHINX_*). */
  pocketsphinx: { workers: number; spareDecoders: number; modelDir: string; logFile: string; extraArgs: string; keytermBonus: number };
}

/** The runtime of a protocol that lists the capabilities C: each of them, and no other. */
export type RuntimeWith<C extends Capability, S = UpstreamSettings> = RuntimeBase<S> & {
  [K in C as RuntimeKeys[K]]: RuntimeCapabilities<S>[RuntimeKeys[K]];
} & {
  [K in Exclude<Capability, C> as RuntimeKeys[K]]?: never;
};

/** Any protocol's runtime, as the gateway holds it: each capability there or not (its protocol's `capabilities` say which). */
export type ProtocolRuntime = RuntimeBase<UpstreamSettings> & Partial<RuntimeCapabilities<UpstreamSettings>>;

/** A protocol as its module defines it: its settings' type `S` (from the schema) and its capabilities `C`. */
export interface ProtocolDefinition<S extends UpstreamSettings, C extends Capability> {
  /** The registry's `protocol` value. */
  name: string;
  /** One line for `svc model upsert --help`, the table in docs/engines-and-protocols.md and refusals. */
  summary: string;
  /** The upstream's `settings` (`svc model upsert --setting k=v`), validated when registered. */
  settings: ZodType<S>;
  /** What `create` provides, known without creating it (the registry checks models against it). */
  capabilities: readonly C[];
  create(engines: EngineConfig): RuntimeWith<C, S>;
}

/** An upstream as a protocol's capabilities take it, its settings typed by that protocol's schema (tests build them). */
export type TargetOf<P extends { settings: ZodType }> = UpstreamTarget<output<P['settings']>>;

/** Any protocol, as the registry lists them: its settings and capabilities known at run time. */
export interface Protocol {
  name: string;
  summary: string;
  settings: ZodType<UpstreamSettings>;
  capabilities: readonly Capability[];
  create(engines: EngineConfig): ProtocolRuntime;
}

/** A protocol known to offer the capability C (see `offers`), whatever else it offers. */
export interface ProtocolWith<C extends Capability> extends Protocol {
  create(engines: EngineConfig): ProtocolRuntime & Pick<RuntimeCapabilities<UpstreamSettings>, RuntimeKeys[C]>;
}

/**
 * One protocol module's definition: `capabilities` must list exactly what `create` returns, and
 * the capabilities see their upstreams' settings as the schema's output type.
 */
export function defineProtocol<S extends UpstreamSettings, C extends Capability>(definition: ProtocolDefinition<S, C>): ProtocolDefinition<S, C> & Protocol {
  // The one place the settings' type is let go of: the registry hands a protocol only upstreams
  // whose settings this protocol's schema parsed (protocols/index.ts checkProtocol, the registry).
  return definition as ProtocolDefinition<S, C> & Protocol;
}

/** Whether a protocol offers a capability; where it does, its runtime holds it (defineProtocol sees to that). */
export function offers<C extends Capability>(protocol: Protocol, capability: C): protocol is ProtocolWith<C> {
  return protocol.capabilities.includes(capability);
}
