// The turns of a streaming-transcription session as its client hears of them (issue #32): the
// end of a turn goes out as soon as it is found (the gateway's detector decided, or the engine
// said so), without waiting for the recognizer's final decode; the turn's final transcript
// follows when the engine has given it, then `turn_final` with the turn's whole final text (its
// log row is written then). A turn's start and the detector's other events wait behind the last
// turn's final, so a turn's events never overlap the one before; a turn's end waits behind its
// own start when that start still waits. Each dialect orders its own messages from these
// (docs/stt.md): those whose end of turn carries the transcript end the turn at `turn_final`.
import type { EngineStream } from './engine-stream.ts';
import type { SttEvent, SttTurn } from './stt-events.ts';
import type { TurnEvent, TurnSettings } from './turn-detector.ts';
import type { TurnLog } from './turn-log.ts';

export interface TurnRelayHost {
  readonly engine: EngineStream;
  readonly turnLog: TurnLog;
  send(event: SttEvent): void;
  /** The latest interim transcript (what an eager end carries). */
  lastPartial(): string;
  /** Seconds of audio the session has received (when a turn's end was found). */
  receivedSeconds(): number;
  /** The detector's settings now. */
  turnSettings(): TurnSettings;
}

export class TurnRelay {
  /** Turn starts waiting for the last turn's final: the events of their turns wait behind them. */
  private startsWaiting = 0;

  constructor(private readonly host: TurnRelayHost) {}

  /** An event of the gateway's turn detector (the engine was told who speaks before this). */
  detected(t: TurnEvent): void {
    const { engine, turnLog } = this.host;
    switch (t.type) {
      case 'turn.start':
        this.startsWaiting++;
        return engine.afterPendingFinals(() => {
          this.startsWaiting--;
          turnLog.started(t.atSeconds);
          this.host.send(turnEvent(t));
        });
      case 'turn.end': {
        const endOfTurn = this.host.receivedSeconds();
        if (this.startsWaiting === 0) this.host.send(turnEvent(t));
        else engine.afterPendingFinals(() => this.host.send(turnEvent(t)));
        return engine.finalize('turn', () => this.finalized(t.atSeconds, endOfTurn));
      }
      // What was heard so far goes with an eager end: an agent may start its answer on it. Asked
      // for, the words so far are made final first: the eager end then follows their final.
      case 'turn.eager_end':
        if (this.host.turnSettings().finalizeOnEagerEnd) return engine.finalize('eager', () => this.host.send({ ...turnEvent(t), transcript: turnLog.text }));
        return engine.afterPendingFinals(() => this.host.send({ ...turnEvent(t), transcript: this.host.lastPartial() }));
      default:
        return engine.afterPendingFinals(() => this.host.send(turnEvent(t)));
    }
  }

  /** The engine's own turn started. */
  engineStarted(atSeconds: number): void {
    this.host.turnLog.started(atSeconds);
    this.host.send({ type: 'turn', turn: 'turn.start', atSeconds });
  }

  /** The engine's own turn ended: its final came before it. */
  engineEnded(atSeconds: number): void {
    this.host.send({ type: 'turn', turn: 'turn.end', atSeconds });
    this.finalized(atSeconds, this.host.receivedSeconds());
  }

  /** The ended turn's final is out: its log row (with what was said) is written, and the dialects are told, with the turn's final text. */
  private finalized(speechEnd: number, endOfTurn: number): void {
    const transcript = this.host.turnLog.ended(speechEnd, endOfTurn);
    this.host.send({ type: 'turn_final', atSeconds: speechEnd, transcript });
  }
}

const turnEvent = (t: TurnEvent): SttTurn => ({ type: 'turn', turn: t.type, atSeconds: t.atSeconds });
