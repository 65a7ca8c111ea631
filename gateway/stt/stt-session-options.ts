// What a streaming-transcription session (stt-session.ts) is given by whoever starts it
// (open-session.ts for the WebSocket routes and the realtime session).
import type { Encoding } from '../audio/output-format.ts';
import type { Clock } from '../../server/clock.ts';
import type { CreditHold, RequestAuth, GatewayCore } from '../core/gateway-core.ts';
import type { FailoverPhase } from '../core/failover.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import type { SessionTurn } from '../request-log/request-log-types.ts';
import type { UpstreamError } from '../upstreams/contract.ts';
import type { EngineSwitch, HedgeOutcome, OpenedStream } from './engine-stream.ts';
import type { TurnSettings } from './turn-detector.ts';

export interface SttSessionOptions {
  sessionId: string;
  requestId: string;
  model: ModelEntry;
  sampleRate: number;
  encoding: Encoding;
  /** The gateway's turn detection (used unless the engine reports its own turns). */
  turns: TurnSettings;
  /** The usage records' `route` (default: stt.websocket). */
  usageRoute?: string;
  auth: RequestAuth;
  core: GatewayCore;
  /**
   * Credit reserved for the session's audio: the route reserves the first metering interval
   * before the session starts; the session reserves each next one before accepting its audio.
   * The session gives back what is left after its last debit.
   */
  hold: CreditHold;
  /**
   * Opens the engine's stream at the session's first audio, and again after a failure on the
   * next upstream not in `failed` (upstream ids), or on `only`; `signal` is aborted when the session ends first.
   */
  openStream: (signal: AbortSignal, failed: readonly string[], only?: string) => Promise<OpenedStream>;
  /** Hedging (the model's capabilities.hedge): the two upstreams to open at once, or null (engine-stream.ts). */
  hedge?: () => [UpstreamEntry, UpstreamEntry] | null;
  /** A hedge was decided (its record). */
  onHedge?: (h: HedgeOutcome) => void;
  /** Whether a healthy upstream not in `failed` is left to move to. */
  canSwitch?: (failed: readonly string[]) => boolean;
  /** The engine failed mid-session and the session moves to the next upstream (the failover's record). */
  onFailover?: (s: EngineSwitch & { phase: FailoverPhase }) => void;
  /** How long the engine may stay silent while audio flows, or leave a finalize unanswered, before it counts as failed. */
  stallMs: number;
  /** A finalize unanswered this long at least starts the next upstream beside the engine (engine-stream.ts; 0 or absent: never). */
  finalizeHedgeMs?: number;
  /** Each turn's row for the request log (issue #33), at its end. */
  logTurn?: (turn: SessionTurn) => void;
  /** An engine failure after the stream opened, on `upstream` (metrics). */
  onEngineFailure?: (error: UpstreamError, upstream: UpstreamEntry | undefined) => void;
  /** The session's timers (idle, maximum duration) and its idea of now. */
  clock: Clock;
  /** No audio and no keepalive for this long: the session is closed (idle_timeout). */
  idleTimeoutMs: number;
  /** No audio for this long: closed even if keepalives keep coming (an open session is not free to hold). */
  maxSilenceMs: number;
  /** How long the engine may stay silent (for the timeout error's message). */
  engineTimeoutMs: number;
  /** Aborted when a shutdown's grace period is over: the session closes with 1001; the reason is the error to show. */
  shutdown?: AbortSignal;
  /** Aborted (reason: a ServiceError such as api_key_disabled) when the session must end at once. */
  revoked?: AbortSignal;
  log: { warn(obj: unknown, msg: string): void };
  /** Handed the session's lifetime up to its last debit, so a shutdown waits for it before closing the database. */
  track?: (untilBilled: Promise<void>) => void;
  /** Seconds from the first audio received to the first transcript sent (metrics). */
  onFirstTranscript?: (seconds: number) => void;
}
