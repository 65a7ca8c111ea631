// The words a streaming-transcription session speaks with its client. One session
// (gateway/stt/stt-session.ts) does the work -- audio, engine, turns, metering, limits -- and says
// what happens in typed events (stt-events.ts); a dialect writes those events in the route's
// protocol and reads the client's text messages as commands: ours on /stt/websocket (docs/stt.md,
// "Streaming STT protocol"), Deepgram's on /v1/listen, Cartesia's on /stt/turns/websocket.
import { ERROR_TABLE } from '../errors.ts';
import type { ErrorCode } from '../../server/services/errors.ts';
import type { SttClosed, SttCommand, SttConfigured, SttEvent, SttStarted, SttSwitched, SttTranscript, SttTurn, SttTurnFinal } from './stt-events.ts';

/** Each event method returns the messages to send (JSON objects), in order; a dialect may keep state (one per session). */
export interface SttDialect {
  started(e: SttStarted): object[];
  transcript(e: SttTranscript): object[];
  turn(e: SttTurn): object[];
  /** The ended turn's final transcript is out (its end was sent at turn.end, before the final): for dialects whose end of turn carries the transcript. */
  turnFinal?(e: SttTurnFinal): object[];
  /** The client's finalize is done (its final, if any, was sent before). */
  flushed(): object[];
  /** The client's configure is applied: only a dialect whose protocol acknowledges one has this. */
  configured?(e: SttConfigured): object[];
  error(e: { code: string; message: string }): object[];
  /** The last messages before the socket closes. */
  closed(e: SttClosed): object[];
  /** The engine was switched (failover): only a dialect that offers the event has this (vendor clients never see it). */
  switched?(e: SttSwitched): object[];
  /** A client's text message as a command (`invalid` when it is none: the session answers with an error and carries on). */
  command(text: string): SttCommand;
}

/** The messages that carry `event` in `dialect`. */
export function encodeSttEvent(dialect: SttDialect, event: SttEvent): object[] {
  switch (event.type) {
    case 'started':
      return dialect.started(event);
    case 'transcript':
      return dialect.transcript(event);
    case 'turn':
      return dialect.turn(event);
    case 'turn_final':
      return dialect.turnFinal?.(event) ?? [];
    case 'flushed':
      return dialect.flushed();
    case 'configured':
      return dialect.configured?.(event) ?? [];
    case 'error':
      return dialect.error(event);
    case 'closed':
      return dialect.closed(event);
    case 'switched':
      return dialect.switched?.(event) ?? [];
  }
}

/** A text message the dialect cannot read. */
export const invalidMessage = (message: string): SttCommand => ({ type: 'invalid', code: 'invalid_message', message });

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;

/**
 * A client's text message as a command word: JSON `{"type":"finalize"}` (ours, Deepgram's
 * `Finalize` / `CloseStream` / `KeepAlive`) or Cartesia's plain text `finalize`, `close` and
 * `done` (what pipecat sends to close). Lower-cased; null when it is neither.
 */
export function commandWord(text: string): { word: string; json: Record<string, unknown> | null } | null {
  const plain = text.trim().toLowerCase();
  if (plain === 'finalize' || plain === 'close' || plain === 'done') return { word: plain, json: null };
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return null;
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return null;
  const type = (msg as { type?: unknown }).type;
  return { word: typeof type === 'string' ? type.toLowerCase() : '', json: msg as Record<string, unknown> };
}

/** HTTP-like statuses of the session's own error codes (Cartesia's `status_code`); the rest are in ERROR_TABLE. */
const SESSION_ERROR_STATUS: Record<string, number> = { invalid_message: 400, idle_timeout: 408, max_duration: 408, backlog: 429 };

/**
 * An error event with Cartesia's fields (`title`, `message`, `error_code`, `status_code`,
 * `request_id`, and the older `error` string LiveKit's plugins read) as well as ours (`code`,
 * `message`). LiveKit's Cartesia STT reconnects on a `status_code` of 500 or more.
 */
export function cartesiaError(e: { code: string; message: string }, requestId: string): object {
  const status = ERROR_TABLE[e.code as ErrorCode]?.status ?? SESSION_ERROR_STATUS[e.code] ?? 500;
  return { type: 'error', code: e.code, message: e.message, request_id: requestId, title: e.code, error_code: e.code, status_code: status, error: e.message };
}

/** The gateway's own protocol (docs/stt.md, "Streaming STT protocol"). */
export const svcDialect: SttDialect = {
  started: (i) => [
    {
      type: 'session.started',
      session_id: i.sessionId,
      request_id: i.requestId,
      model: i.model,
      sample_rate: i.sampleRate,
      encoding: i.encoding,
      turn_detection: i.turns.preset,
      idle_timeout_seconds: i.idleTimeoutSeconds,
      max_session_seconds: i.maxSessionSeconds,
      started_at: i.startedAt.toISOString(),
    },
  ],
  transcript: (t) => [{ type: 'transcript', is_final: t.isFinal, text: t.text, words: t.words }],
  turn: (e) => [{ type: e.turn, at: round3(e.atSeconds), ...(e.transcript !== undefined ? { transcript: e.transcript } : {}) }],
  // turn.end comes at the detector's decision; this says the turn's finals (if any) are all out, with their text.
  turnFinal: (e) => [{ type: 'turn.finalized', at: round3(e.atSeconds), transcript: e.transcript }],
  flushed: () => [{ type: 'flush_done' }],
  error: (e) => [{ type: 'error', code: e.code, message: e.message }],
  closed: (e) => [{ type: 'session.closed', reason: e.reason, audio_seconds: e.audioSeconds, cost_usd: e.costUsd }],
  command(text) {
    const c = commandWord(text);
    if (c === null) return invalidMessage('Text messages must be JSON objects like {"type":"finalize"}, or the plain text finalize, close or done.');
    if (c.word === 'keepalive') return { type: 'keepalive' };
    if (c.word === 'finalize') return { type: 'finalize' };
    if (c.word === 'close' || c.word === 'closestream' || c.word === 'done') return { type: 'close' };
    return invalidMessage(`Unknown message type ${JSON.stringify(c.json?.type)}; use finalize, keepalive or close.`);
  },
};

/**
 * The gateway's protocol as Cartesia's clients read it (the route picks it when the upgrade
 * carries `Cartesia-Version` or `cartesia_version`, as cartesia-js, LiveKit and pipecat send):
 * the same events and commands, plus `request_id` on every event, `duration` (s) on transcripts,
 * a transcript's text led by a space after an earlier final (Cartesia's clients join the finals'
 * texts as they are), error events with Cartesia's fields, and `{"type":"done"}` after
 * `session.closed` when the client asked for the close.
 */
export function cartesiaSttDialect(requestId: string): SttDialect {
  let spokeBefore = false;
  let audioAtLastFinal = 0;
  const tagged = (events: object[]) => events.map((e) => ({ ...e, request_id: requestId }));
  return {
    ...svcDialect,
    started: (i) => tagged(svcDialect.started(i)),
    transcript(t) {
      const text = spokeBefore && t.text ? ` ${t.text}` : t.text;
      const duration = round3(t.audioSeconds - audioAtLastFinal);
      if (t.isFinal) {
        audioAtLastFinal = t.audioSeconds;
        spokeBefore ||= t.text !== '';
      }
      return [{ type: 'transcript', is_final: t.isFinal, text, words: t.words, duration, request_id: requestId }];
    },
    turn: (e) => tagged(svcDialect.turn(e)),
    turnFinal: (e) => tagged(svcDialect.turnFinal!(e)),
    flushed: () => [{ type: 'flush_done', request_id: requestId }],
    error: (e) => [cartesiaError(e, requestId)],
    closed: (e) => [...tagged(svcDialect.closed(e)), ...(e.clientRequested ? [{ type: 'done', request_id: requestId }] : [])],
  };
}

/**
 * `dialect` with the informational `engine.switched` event (`?failover_events=true` on
 * /stt/websocket): the reason and the audio time from which the next engine transcribes.
 */
export function withFailoverEvents(dialect: SttDialect, requestId?: string): SttDialect {
  return {
    ...dialect,
    switched: (e) => [{ type: 'engine.switched', reason: e.reason, at: round3(e.atSeconds), ...(requestId ? { request_id: requestId } : {}) }],
  };
}
