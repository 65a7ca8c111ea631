// Cartesia's auto-finalize protocol (WS /stt/turns/websocket; docs.cartesia.ai
// api-reference/stt/turns/websocket, and @cartesia/cartesia-js 4.2 `stt.autoFinalize`): the
// session's turn events as Cartesia's, each with the connection's `request_id`:
//   connected · turn.start · turn.update {transcript} · turn.eager_end {transcript} ·
//   turn.resume · turn.end {transcript} · error
// A turn's `transcript` is cumulative (all of the turn so far, not a delta). Every turn opens
// with turn.start and closes with turn.end; an eager end is followed by a resume or the end.
// Client text messages: `{"type":"close"}` (everything heard is transcribed, then the socket
// closes) and `{"type":"config","turn":{start_threshold, eager_end_threshold, end_threshold,
// end_timeout_ms}}` (new thresholds from the next audio on).
//
// Cartesia's thresholds are on the likelihood that the user is still in a turn: a turn starts
// above `start_threshold`, eagerly ends below `eager_end_threshold` and ends below
// `end_threshold` (start > eager end > end). The gateway's detector (turn-detector.ts) weighs
// P(end of turn) = 1 - that likelihood, so the end thresholds are mirrored (1 - x) and the start
// threshold is the speech probability a frame needs.
import { ServiceError } from '../../../server/services/errors.ts';
import { cartesiaError, commandWord, invalidMessage, type SttDialect } from '../dialect.ts';
import type { TurnSettings } from '../turn-detector.ts';
import { applyTurnThresholds, TURN_KEYS, type TurnThresholdParams } from '../turn-params.ts';

/** The session's events in Cartesia's auto-finalize protocol; `turns` are the session's settings at the start (config messages change them). */
export function cartesiaTurnsDialect(requestId: string, turns: TurnSettings): SttDialect {
  let settings = turns;
  let inTurn = false;
  /** The turn's final transcripts so far, and the partial of what follows them. */
  let finals: string[] = [];
  let partial = '';
  let lastSent = '';
  const transcript = () => [...finals, partial].filter(Boolean).join(' ');
  const event = (type: string, withTranscript?: string) => ({
    type,
    request_id: requestId,
    ...(withTranscript !== undefined ? { transcript: withTranscript } : {}),
  });
  /** A turn.update when the turn's transcript changed. */
  const update = () => {
    const text = transcript();
    if (!inTurn || text === '' || text === lastSent) return [];
    lastSent = text;
    return [event('turn.update', text)];
  };
  const endTurn = () => {
    const text = transcript();
    inTurn = false;
    finals = [];
    partial = '';
    lastSent = '';
    return [event('turn.end', text)];
  };

  return {
    started: () => [event('connected')],
    transcript(t) {
      if (!t.isFinal) {
        // Heard before the turn started: kept, and sent with the turn's start.
        partial = t.text;
        return update();
      }
      partial = '';
      // A final outside any turn (speech too short or too quiet to start one) belongs to none.
      if (!inTurn) return [];
      if (t.text) finals.push(t.text);
      return update();
    },
    turn(e) {
      switch (e.turn) {
        case 'turn.start':
          if (inTurn) return [];
          inTurn = true;
          finals = [];
          return [event('turn.start'), ...update()];
        case 'turn.eager_end':
          return inTurn ? [event('turn.eager_end', transcript() || (e.transcript ?? ''))] : [];
        case 'turn.resume':
          return inTurn ? [event('turn.resume')] : [];
        // turn.end carries the turn's exact transcript: it is sent with the final (turnFinal).
        case 'turn.end':
          return [];
      }
    },
    turnFinal: () => (inTurn ? endTurn() : []),
    // No finalize command in this protocol.
    flushed: () => [],
    error: (e) => [cartesiaError(e, requestId)],
    // Asked to close mid-turn: everything heard was transcribed, so the turn ends with it.
    closed: (e) => (e.clientRequested && inTurn ? endTurn() : []),
    command(text) {
      const c = commandWord(text);
      if (c?.word === 'close' || c?.word === 'done') return { type: 'close' };
      if (c?.word === 'config' && c.json) {
        try {
          return { type: 'configure', turns: configure(c.json) };
        } catch (err) {
          if (err instanceof ServiceError) return invalidMessage(err.message);
          throw err;
        }
      }
      return invalidMessage('Text messages are {"type":"close"} or {"type":"config","turn":{...}}; audio goes in binary frames.');
    },
  };

  /** A config message's turn settings, checked against the current ones (nothing applies if one is wrong). */
  function configure(msg: Record<string, unknown>): Partial<TurnSettings> {
    const unknown = Object.keys(msg).filter((k) => k !== 'type' && k !== 'turn');
    if (unknown.length > 0) throw new ServiceError('invalid_request', `Unknown config field ${JSON.stringify(unknown[0])}; the config message takes "turn".`);
    const turn = msg.turn ?? {};
    if (turn === null || typeof turn !== 'object' || Array.isArray(turn)) throw new ServiceError('invalid_request', 'config.turn must be an object.');
    const unknownTurn = Object.keys(turn).filter((k) => !(TURN_KEYS as readonly string[]).includes(k));
    if (unknownTurn.length > 0)
      throw new ServiceError('invalid_request', `Unknown turn setting ${JSON.stringify(unknownTurn[0])}; use ${TURN_KEYS.join(', ')}.`);
    for (const [k, v] of Object.entries(turn)) {
      if (typeof v !== 'number') throw new ServiceError('invalid_request', `turn.${k} must be a number (got ${JSON.stringify(v)}).`);
    }
    settings = applyTurnThresholds(settings, turn as TurnThresholdParams, 'turn.');
    return {
      speechThreshold: settings.speechThreshold,
      eagerEndThreshold: settings.eagerEndThreshold,
      endThreshold: settings.endThreshold,
      endTimeoutMs: settings.endTimeoutMs,
    };
  }
}
