// The turns of one /v1/realtime session as rows of the request log (docs/logs.md): when the
// user began and stopped speaking, when the turn ended, and its answer's legs (LLM first token,
// first audio sent) and barge-in. Times are the gateway's clock: a turn's start in ms from the
// session's, the rest in ms from the turn's start. A turn's row is written once its answer has
// ended, at once when it asks for none, and at the latest when the session ends (the session's
// row closes with the session, and a turn must name it).
import type { SessionTurn } from '../request-log/request-log-types.ts';
import type { ResponseRun } from './response-run.ts';

interface OpenTurn {
  index: number;
  startAt: number;
  speechEndAt?: number;
  endAt?: number;
  bargeInAt?: number;
  userText?: string;
  answer?: ResponseRun;
}

export class TurnLog {
  private readonly openedAt = performance.now();
  private count = 0;
  /** The turn the user is speaking now. */
  private speaking: OpenTurn | null = null;
  /** Ended turns whose answers are still running. */
  private readonly answering = new Set<OpenTurn>();

  constructor(private readonly write: (turn: SessionTurn) => void) {}

  /** The user began speaking `agoMs` ago; `interrupting`: over an answer, which the turn it answers records (when the gateway cut it). */
  speechStarted(interrupting: boolean, agoMs: number): void {
    const now = performance.now();
    if (interrupting) for (const t of this.answering) t.bargeInAt ??= now;
    if (this.speaking) return;
    this.speaking = { index: this.count++, startAt: now - agoMs };
  }

  /** The user stopped speaking `agoMs` ago (the detector decides after some silence; audio arrives in real time). */
  speechStopped(agoMs: number): void {
    if (this.speaking) this.speaking.speechEndAt ??= performance.now() - agoMs;
  }

  /**
   * The user's audio was committed (the detector's end of turn, or the client's commit). Returns
   * the turn, for `answered` when a response answers it; unanswered turns are written now.
   */
  ended(userText: string, answering: boolean): OpenTurn {
    const now = performance.now();
    const turn = this.speaking ?? { index: this.count++, startAt: now };
    this.speaking = null;
    turn.endAt = now;
    turn.userText = userText;
    if (answering) this.answering.add(turn);
    else this.flush(turn);
    return turn;
  }

  /** The response answering `turn` has started. */
  answeredBy(turn: OpenTurn, run: ResponseRun): void {
    turn.answer = run;
  }

  /** The response answering `turn` has ended (or never started). */
  answerDone(turn: OpenTurn): void {
    if (this.answering.delete(turn)) this.flush(turn);
  }

  /** The session ends: every turn is written with what is known of it now. */
  close(): void {
    for (const t of this.answering) this.flush(t);
    this.answering.clear();
    if (this.speaking) this.flush(this.speaking);
    this.speaking = null;
  }

  private flush(t: OpenTurn): void {
    const from = (at: number | undefined) => (at === undefined ? undefined : Math.max(0, Math.round(at - t.startAt)));
    const run = t.answer;
    const runAt = (ms: number | undefined) => (run && ms !== undefined ? from(run.startedAt + ms) : undefined);
    this.write({
      turnIndex: t.index,
      startMs: Math.max(0, Math.round(t.startAt - this.openedAt)),
      speechEndMs: from(t.speechEndAt),
      endOfTurnMs: from(t.endAt),
      llmFirstTokenMs: runAt(run?.timings.llmFirstToken),
      ttsFirstAudioMs: runAt(run?.timings.ttsFirstAudio),
      firstAudibleMs: runAt(run?.timings.firstAudible),
      bargeInMs: from(t.bargeInAt),
      userText: t.userText,
      assistantText: run?.transcript(),
    });
  }
}
