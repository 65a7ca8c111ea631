// The turns of one /v1/realtime session as rows of the request log (docs/logs.md): when the
// user began and stopped speaking, when the turn ended (the detector's decision, or the client's
// commit), and its answer's legs (LLM first token, first audio sent, first audible sample) and
// barge-in. Times are the gateway's clock: a turn's start in ms from the session's, the rest in
// ms from the turn's start. A turn's row is written once its answer has ended, at once when it
// asks for none, and at the latest when the session ends (the session's row closes with the
// session, and a turn must name it). A turn the detector ended is also reported, while the
// session runs, as its latency from the end of speech (the opt-in `svc.turn_latency` event).
import type { SessionTurn } from '../request-log/request-log-types.ts';
import type { ResponseRun } from './response-run.ts';

interface OpenTurn {
  index: number;
  startAt: number;
  speechEndAt?: number;
  /** Where the speech ended in the session's input audio (ms). */
  audioEndMs?: number;
  /** The turn's end: the detector's decision (speech_stopped), else the client's commit. */
  endAt?: number;
  /** Its final transcript was in and the item committed. */
  committedAt?: number;
  itemId?: string;
  bargeInAt?: number;
  userText?: string;
  answer?: ResponseRun;
}

/** A turn's latency, in ms from the end of its speech (as the gateway received the audio), each null when it did not happen. */
export interface TurnLatency {
  itemId: string;
  responseId: string | null;
  audioEndMs: number;
  turnEnd: number;
  transcriptFinal: number | null;
  llmFirstToken: number | null;
  ttsFirstAudio: number | null;
  firstAudible: number | null;
}

export class TurnLog {
  private readonly openedAt = performance.now();
  private count = 0;
  /** The turn the user is speaking now. */
  private speaking: OpenTurn | null = null;
  /** Ended turns whose answers are still running. */
  private readonly answering = new Set<OpenTurn>();

  constructor(
    private readonly write: (turn: SessionTurn) => void,
    /** A turn the detector ended is done (its answer ended, or it asked for none). */
    private readonly report?: (latency: TurnLatency) => void,
  ) {}

  /** The user began speaking `agoMs` ago; `interrupting`: over an answer, which the turn it answers records (when the gateway cut it). */
  speechStarted(interrupting: boolean, agoMs: number): void {
    const now = performance.now();
    if (interrupting) for (const t of this.answering) t.bargeInAt ??= now;
    if (this.speaking) return;
    this.speaking = { index: this.count++, startAt: now - agoMs };
  }

  /** The detector ended the turn now: the user stopped speaking `agoMs` ago, at `audioEndMs` of the input audio (it decides after some silence; audio arrives in real time). */
  speechStopped(agoMs: number, audioEndMs: number): void {
    if (!this.speaking) return;
    const now = performance.now();
    this.speaking.speechEndAt ??= now - agoMs;
    this.speaking.audioEndMs ??= audioEndMs;
    this.speaking.endAt ??= now;
  }

  /**
   * The user's audio was committed as `itemId` (its final transcript is in: after the detector's
   * end of turn, or at the client's commit). Returns the turn, for `answered` when a response
   * answers it; unanswered turns are written now.
   */
  ended(itemId: string, userText: string, answering: boolean): OpenTurn {
    const now = performance.now();
    const turn = this.speaking ?? { index: this.count++, startAt: now };
    this.speaking = null;
    turn.endAt ??= now;
    turn.committedAt = now;
    turn.itemId = itemId;
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

  /** The session ends: every turn is written with what is known of it now (and reported to no one: the client is gone). */
  close(): void {
    for (const t of this.answering) this.flush(t, false);
    this.answering.clear();
    if (this.speaking) this.flush(this.speaking, false);
    this.speaking = null;
  }

  private flush(t: OpenTurn, report = true): void {
    if (report) this.reportLatency(t);
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

  private reportLatency(t: OpenTurn): void {
    const { speechEndAt, audioEndMs, endAt, itemId } = t;
    if (!this.report || speechEndAt === undefined || audioEndMs === undefined || endAt === undefined || itemId === undefined) return;
    const run = t.answer;
    const since = (at: number | undefined) => (at === undefined ? null : Math.round((at - speechEndAt) * 10) / 10);
    const leg = (ms: number | undefined) => (run && ms !== undefined ? since(run.startedAt + ms) : null);
    this.report({
      itemId,
      responseId: run?.id ?? null,
      audioEndMs,
      turnEnd: since(endAt)!,
      transcriptFinal: since(t.committedAt),
      llmFirstToken: leg(run?.timings.llmFirstToken),
      ttsFirstAudio: leg(run?.timings.ttsFirstAudio),
      firstAudible: leg(run?.timings.firstAudible),
    });
  }
}
