// Deepgram Flux's turn-based protocol (WS /v2/listen; developers.deepgram.com/reference/speech-to-
// text/listen-flux and docs/flux, read 2026-12-05, and the message types of @deepgram/sdk 5.13
// `listen.v2`): the session's turn events as Flux's TurnInfo messages.
//   Connected {request_id, sequence_id}
//   TurnInfo  {event: StartOfTurn | Update | EagerEndOfTurn | TurnResumed | EndOfTurn, turn_index,
//              audio_window_start, audio_window_end, transcript, words:[{word, confidence, start,
//              end}], end_of_turn_confidence, request_id, sequence_id}
//   ConfigureSuccess {thresholds:{eot_threshold, eager_eot_threshold, eot_timeout_ms}, keyterms}
//                    once a Configure is applied (the values now in effect)
//   ConfigureFailure {description} when it is refused (nothing of it applied; the session goes on)
//   Error     {code, description, sequence_id}     (before an error close)
// Client text messages: {"type":"CloseStream"} (what was heard is transcribed, then the socket
// closes), {"type":"ForceEndTurn"} (the turn ends now), {"type":"Configure","thresholds":{...}}
// (new thresholds from the next audio on; `keyterms`, `language_hints` and `numerals` cannot be
// changed on an open stream here, so a Configure naming one is refused whole) and KeepAlive.
//
// Turns are the gateway's detector's (turn-detector.ts), which weighs P(end of turn) as Flux
// does: `eot_threshold` is its end threshold, `eager_eot_threshold` its eager one (absent: no
// eager events, as on Flux). `transcript` and `words` are the whole turn's so far;
// `end_of_turn_confidence` is the threshold the detector's P(end) reached (eager end or end), 0
// on the other events; the engines give no word confidence (1).
import { ServiceError } from '../../../server/services/errors.ts';
import type { Word } from '../../upstreams/contract.ts';
import { commandWord, invalidMessage, type SttDialect } from '../dialect.ts';
import type { TurnSettings } from '../turn-detector.ts';
import { parseMillis, parseThreshold } from '../turn-params.ts';

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;

/** Flux's ranges: eot_threshold 0.5–0.9, eager_eot_threshold 0.3–0.9, eot_timeout_ms 500–10000. */
export interface FluxThresholds {
  eot_threshold?: string | number;
  eager_eot_threshold?: string | number;
  eot_timeout_ms?: string | number;
}

/** `base` with Flux's thresholds applied (absent ones keep the base's); throws invalid_request naming the parameter. */
export function applyFluxThresholds(base: TurnSettings, p: FluxThresholds, prefix = ''): TurnSettings {
  const inRange = (raw: string | number | undefined, name: string, min: number, max: number) => {
    const value = parseThreshold(raw, `${prefix}${name}`);
    if (value !== undefined && (value < min || value > max))
      throw new ServiceError('invalid_request', `${prefix}${name} must be from ${min} to ${max} (got ${value}).`, `${prefix}${name}`);
    return value;
  };
  const end = inRange(p.eot_threshold, 'eot_threshold', 0.5, 0.9);
  const eager = inRange(p.eager_eot_threshold, 'eager_eot_threshold', 0.3, 0.9);
  const timeout = parseMillis(p.eot_timeout_ms, `${prefix}eot_timeout_ms`, 500, 10_000);
  const next: TurnSettings = {
    ...base,
    endThreshold: end ?? base.endThreshold,
    eagerEndThreshold: eager ?? base.eagerEndThreshold,
    endTimeoutMs: timeout ?? base.endTimeoutMs,
  };
  if (next.eagerEndThreshold !== null && next.eagerEndThreshold > next.endThreshold) {
    throw new ServiceError(
      'invalid_request',
      `${prefix}eager_eot_threshold (${next.eagerEndThreshold}) must not be above ${prefix}eot_threshold (${next.endThreshold}).`,
      `${prefix}eager_eot_threshold`,
    );
  }
  return next;
}

/** Configure fields the session cannot change once open (the engine took them at its start). */
const FIXED_FIELDS = ['keyterms', 'language_hints', 'numerals'];
/** The code a refused Configure travels under from the dialect's command to its error (sent as ConfigureFailure). */
const CONFIGURE_FAILURE = 'configure_failure';

/**
 * The session's events in Flux's protocol; `turns` are the session's settings at the start
 * (Configure changes them), `keyterms` its keyterms (ConfigureSuccess reports them).
 */
export function deepgramFluxDialect(requestId: string, turns: TurnSettings, keyterms: string[] = []): SttDialect {
  /** The settings in effect (what EndOfTurn reports), and those the Configures so far will have set (what the next is checked against). */
  let settings = turns;
  let requested = turns;
  let sequence = 0;
  let turnIndex = 0;
  let inTurn = false;
  /** An EagerEndOfTurn went out in this turn and no TurnResumed since. */
  let awaitingEnd = false;
  let windowStart = 0;
  let audioEnd = 0;
  /** The turn's final transcripts and words so far, and the partial of what follows them. */
  let finals: string[] = [];
  let finalWords: Word[] = [];
  let partial = '';
  let partialWords: Word[] = [];
  let lastSent = '';
  const transcript = () => [...finals, partial].filter(Boolean).join(' ');
  const message = (type: string, fields: object = {}) => ({ type, ...fields, request_id: requestId, sequence_id: sequence++ });
  const turnInfo = (event: string, confidence = 0) =>
    message('TurnInfo', {
      event,
      turn_index: turnIndex,
      audio_window_start: round3(windowStart),
      audio_window_end: round3(Math.max(audioEnd, windowStart)),
      transcript: transcript(),
      words: [...finalWords, ...partialWords].map((w) => ({ word: w.word, confidence: 1, start: round3(w.start), end: round3(w.end) })),
      end_of_turn_confidence: confidence,
    });
  /** An Update when the turn's transcript changed. */
  const update = () => {
    const text = transcript();
    if (!inTurn || text === '' || text === lastSent) return [];
    lastSent = text;
    return [turnInfo('Update')];
  };
  const endTurn = () => {
    const end = turnInfo('EndOfTurn', settings.endThreshold);
    inTurn = false;
    awaitingEnd = false;
    turnIndex++;
    finals = [];
    finalWords = [];
    partial = '';
    partialWords = [];
    lastSent = '';
    return [end];
  };

  return {
    started: () => [message('Connected')],
    transcript(t) {
      audioEnd = Math.max(audioEnd, t.audioSeconds);
      if (!t.isFinal) {
        // Heard before the turn started: kept, and sent with the turn's start.
        partial = t.text;
        partialWords = t.words;
        return update();
      }
      partial = '';
      partialWords = [];
      // A final outside any turn (speech too short or too quiet to start one) belongs to none.
      if (!inTurn) return [];
      if (t.text) finals.push(t.text);
      finalWords.push(...t.words);
      return update();
    },
    turn(e) {
      audioEnd = Math.max(audioEnd, e.atSeconds);
      switch (e.turn) {
        case 'turn.start':
          if (inTurn) return [];
          inTurn = true;
          windowStart = e.atSeconds;
          finals = [];
          finalWords = [];
          lastSent = transcript();
          return [turnInfo('StartOfTurn')];
        // Flux's state machine (developers.deepgram.com/docs/flux/state): an EagerEndOfTurn always
        // carries a transcript (its words are made final first: finalizeOnEagerEnd, listen-v2.ts),
        // and a TurnResumed only follows one.
        case 'turn.eager_end':
          if (!inTurn || awaitingEnd || transcript() === '') return [];
          awaitingEnd = true;
          return [turnInfo('EagerEndOfTurn', settings.eagerEndThreshold ?? settings.endThreshold)];
        case 'turn.resume':
          if (!inTurn || !awaitingEnd) return [];
          awaitingEnd = false;
          return [turnInfo('TurnResumed')];
        // EndOfTurn carries the turn's exact transcript: it is sent with the final (turnFinal).
        case 'turn.end':
          return [];
      }
    },
    turnFinal: () => (inTurn ? endTurn() : []),
    // ForceEndTurn: what was heard is final; the turn ends with it.
    flushed: () => (inTurn ? endTurn() : []),
    configured(e) {
      settings = { ...settings, ...e.turns };
      const thresholds = {
        eot_threshold: settings.endThreshold,
        ...(settings.eagerEndThreshold === null ? {} : { eager_eot_threshold: settings.eagerEndThreshold }),
        eot_timeout_ms: settings.endTimeoutMs,
      };
      return [message('ConfigureSuccess', { thresholds, keyterms })];
    },
    error: (e) =>
      e.code === CONFIGURE_FAILURE ? [message('ConfigureFailure', { description: e.message })] : [message('Error', { code: e.code, description: e.message })],
    // Asked to close mid-turn: everything heard was transcribed, so the turn ends with it.
    closed: (e) => (e.clientRequested && inTurn ? endTurn() : []),
    command(text) {
      const c = commandWord(text);
      if (c?.json) {
        if (c.word === 'closestream') return { type: 'close' };
        if (c.word === 'forceendturn') return { type: 'finalize' };
        if (c.word === 'keepalive') return { type: 'keepalive' };
        if (c.word === 'configure') {
          const refused = (why: string) => ({ type: 'invalid' as const, code: CONFIGURE_FAILURE, message: why });
          const fixed = FIXED_FIELDS.find((f) => c.json![f] !== undefined && c.json![f] !== null);
          if (fixed)
            return refused(`${fixed} cannot be changed on an open stream here: reconnect with them in the query. Nothing of this Configure was applied.`);
          const thresholds = (c.json.thresholds ?? {}) as FluxThresholds;
          if (thresholds === null || typeof thresholds !== 'object' || Array.isArray(thresholds)) return refused('Configure.thresholds must be an object.');
          try {
            requested = applyFluxThresholds(requested, thresholds, 'thresholds.');
          } catch (err) {
            if (err instanceof ServiceError) return refused(err.message);
            throw err;
          }
          return {
            type: 'configure',
            turns: { eagerEndThreshold: requested.eagerEndThreshold, endThreshold: requested.endThreshold, endTimeoutMs: requested.endTimeoutMs },
          };
        }
      }
      return invalidMessage(
        'Text messages are {"type":"CloseStream"}, {"type":"ForceEndTurn"}, {"type":"Configure","thresholds":{...}} or {"type":"KeepAlive"}; audio goes in binary frames.',
      );
    },
  };
}
