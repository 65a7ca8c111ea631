// The request log's row for each turn of a streaming-transcription session (issue #33): when it
// started, when the speech ended and when its end was found (milliseconds from its start, on the
// session's audio clock: the audio received so far; request-log-types.ts SessionTurn), what was
// said, and the failover it went through, if any. Written at each end of turn.
import type { SessionTurn } from '../request-log/request-log-types.ts';

export class TurnLog {
  private index = 0;
  private startSeconds: number | undefined;
  private texts: string[] = [];
  private failoverReason: string | undefined;

  constructor(private readonly write: ((turn: SessionTurn) => void) | undefined) {}

  started(atSeconds: number): void {
    this.startSeconds ??= atSeconds;
  }

  final(text: string): void {
    if (text) this.texts.push(text);
  }

  /** The turn's final words so far. */
  get text(): string {
    return this.texts.join(' ');
  }

  failover(reason: string): void {
    this.failoverReason = reason;
  }

  /** The turn ended: its speech at `speechEnd`, the end found with `endOfTurn` seconds of audio received. Returns its final text. */
  ended(speechEnd: number, endOfTurn: number): string {
    const start = this.startSeconds ?? speechEnd;
    const ms = (seconds: number) => Math.max(0, Math.round(seconds * 1000));
    const text = this.text;
    this.write?.({
      turnIndex: this.index++,
      startMs: ms(start),
      speechEndMs: ms(speechEnd - start),
      endOfTurnMs: ms(Math.max(endOfTurn, speechEnd) - start),
      failoverReason: this.failoverReason,
      userText: text || undefined,
    });
    this.startSeconds = this.failoverReason = undefined;
    this.texts = [];
    return text;
  }
}
