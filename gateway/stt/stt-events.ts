// What a streaming-transcription session (stt-session.ts) says and is told, whatever carries it:
// typed events out, typed commands in. A WebSocket route's dialect (dialect.ts, dialects/) turns
// the events into its protocol's JSON and its text messages into commands; the realtime session
// reads them as they are (gateway/realtime/stt-leg.ts).
import type { Encoding } from '../audio/output-format.ts';
import type { Word } from '../upstreams/contract.ts';
import type { TurnEvent, TurnSettings } from './turn-detector.ts';

/** Why a final transcript came: the end of a turn, its eager end (finalizeOnEagerEnd), the client's finalize, or the session's end. */
export type FinalCause = 'turn' | 'eager' | 'finalize' | 'close';

/** The session is open (always its first event). */
export interface SttStarted {
  type: 'started';
  sessionId: string;
  requestId: string;
  model: string;
  sampleRate: number;
  encoding: Encoding;
  turns: TurnSettings;
  idleTimeoutSeconds: number;
  maxSessionSeconds: number;
  startedAt: Date;
}

/** An interim (a later one supersedes it) or final transcript of the current utterance. */
export interface SttTranscript {
  type: 'transcript';
  text: string;
  words: Word[];
  isFinal: boolean;
  /** For finals: what asked for it (undefined: the engine finalized by itself). */
  cause?: FinalCause;
  /** Seconds of audio the session had received when the transcript came. */
  audioSeconds: number;
}

/** A turn started, (eagerly) ended or resumed, at `atSeconds` of the session's audio. */
export interface SttTurn {
  type: 'turn';
  turn: TurnEvent['type'];
  atSeconds: number;
  /** With an eager end: what was heard of the turn so far. */
  transcript?: string;
}

/**
 * The turn that ended at `atSeconds` has its final transcript out (sent just before, if it had
 * words). `turn.end` is sent when the detector decides, without waiting for the engine's final
 * decode; a dialect whose end of turn carries the turn's transcript sends its end at this event.
 */
export interface SttTurnFinal {
  type: 'turn_final';
  atSeconds: number;
  /** The turn's final transcripts joined ('' when nothing was recognized). */
  transcript: string;
}

/** The client's finalize is done (its final, if any, was sent before). */
export interface SttFlushed {
  type: 'flushed';
}

/** A `configure` command was applied (from the audio after it on): `turns` are what it set. */
export interface SttConfigured {
  type: 'configured';
  turns: Partial<TurnSettings>;
}

/** Something went wrong: before a close the session starts, or for a bad command (the session carries on). */
export interface SttError {
  type: 'error';
  code: string;
  message: string;
}

/** The session's last event, before the transport is closed. */
export interface SttClosed {
  type: 'closed';
  reason: string;
  audioSeconds: number;
  costUsd: string;
  /** The client asked for the end (close / CloseStream). */
  clientRequested: boolean;
}

/**
 * The engine failed and the session moved to the next upstream, replaying the audio from
 * `atSeconds` (informational: transcripts carry on; only dialects that ask for it say it).
 */
export interface SttSwitched {
  type: 'switched';
  reason: string;
  atSeconds: number;
}

export type SttEvent = SttStarted | SttTranscript | SttTurn | SttTurnFinal | SttFlushed | SttConfigured | SttError | SttClosed | SttSwitched;

/**
 * What the client may ask. `configure` changes the turn detection from the next audio on
 * (Cartesia's `config` message; the dialect has checked the result); `invalid` is a message the
 * dialect could not read: the session answers it with an error event, in order with the rest.
 */
export type SttCommand =
  | { type: 'finalize' }
  | { type: 'close' }
  | { type: 'keepalive' }
  | { type: 'configure'; turns: Partial<TurnSettings> }
  | { type: 'invalid'; code: string; message: string };
