// The engine's side of a streaming-transcription session: its stream (gateway/upstreams/contract.ts),
// opened at the session's first audio, not at connect (the engine is the costly part); the
// resampler to the engine's rate; and the finalizes asked of it, in order, each answered once the
// engine reports it done. The session (stt-session.ts) calls it from its steps, which run one at
// a time, so the stream is opened once.
import { floatToS16 } from '../audio/pcm.ts';
import { createResampler, type Resampler } from '../audio/resample.ts';
import { UpstreamError, type TranscriptionEvent, type TranscriptionStream } from '../upstreams/contract.ts';
import type { FinalCause } from './stt-events.ts';

export interface OpenedStream {
  stream: TranscriptionStream;
  engineRate: number;
  /** The engine reports its own turns (else the gateway's turn detector finalizes utterances). */
  engineTurns: boolean;
  /** Run when the session ends (releases what opening took). */
  release?: () => void;
}

export interface EngineStreamEvents {
  /** A transcript or turn the engine reported (not `finalized`: the finalize queue answers those). */
  event(event: Exclude<TranscriptionEvent, { type: 'finalized' }>, opened: OpenedStream): void;
  /** The stream failed, or the engine ended it by itself, while the session was listening. */
  failed(err: unknown): void;
}

export class EngineStream {
  private opened: OpenedStream | null = null;
  private resampler: Resampler | null = null;
  /** The finalizes asked of the engine, in order: why, and what runs once the engine reports it done. */
  private readonly finalizes: { cause: FinalCause; then: () => void }[] = [];
  /** The session is over: the engine's events are ignored. */
  private detached = false;
  private closed = false;

  constructor(
    private readonly sessionRate: number,
    private readonly openStream: () => Promise<OpenedStream>,
    private readonly on: EngineStreamEvents,
  ) {}

  /** A finalize was asked and the engine has not reported it done yet. */
  get finalizing(): boolean {
    return this.finalizes.length > 0;
  }

  /** Why the engine's next final comes: the oldest finalize not yet done (undefined: the engine finalizes by itself). */
  get nextFinalCause(): FinalCause | undefined {
    return this.finalizes[0]?.cause;
  }

  /** The stream, opened at the first call. */
  async open(): Promise<OpenedStream> {
    if (this.opened) return this.opened;
    const opened = await this.openStream();
    this.opened = opened;
    if (opened.engineRate !== this.sessionRate) this.resampler = createResampler(this.sessionRate, opened.engineRate);
    // The gateway's turn detector says who speaks (speaking()), from the first audio: no one yet.
    if (!opened.engineTurns) opened.stream.speaking?.(false);
    // Closed while it opened: free it now.
    if (this.closed) this.close();
    else void this.relay(opened);
    return opened;
  }

  /** Writes samples at the session's rate (resampled to the engine's); returns the seconds of audio the engine has not taken yet. */
  write(samples: Float32Array): number {
    const { stream, engineRate } = this.opened!;
    stream.write(floatToS16(this.resampler ? this.resampler.push(samples) : samples));
    return stream.pendingSamples / engineRate;
  }

  /**
   * Ends the current utterance; `then` runs once the engine reported its final transcript (in
   * order with earlier finalizes). Audio after it goes on to the engine at once (a new utterance).
   */
  finalize(cause: FinalCause, then: () => void): void {
    // Nothing was heard yet: nothing to finalize (and no engine to open for it).
    if (!this.opened) return then();
    this.finalizes.push({ cause, then });
    this.opened.stream.finalize();
  }

  /** Runs `fn` once the finalizes asked for so far are done (a new turn.start after the last turn.end). */
  afterPendingFinals(fn: () => void): void {
    const last = this.finalizes.at(-1);
    if (!last) return fn();
    const before = last.then;
    last.then = () => {
      before();
      fn();
    };
  }

  /** The last audio: the resampler's last samples (its filter delay) go to the engine too, so no audio is left out. */
  endAudio(): void {
    if (this.opened && this.resampler) this.opened.stream.write(floatToS16(this.resampler.end()));
    this.resampler = null;
  }

  /** Whether someone is speaking (the gateway's turn detector), for engines that are sent only speech. */
  speaking(active: boolean): void {
    this.opened?.stream.speaking?.(active);
  }

  /**
   * The session is over: what the engine still reports is ignored, and the engine stops working
   * (no call starts for a client that has gone); close() frees what opening took.
   */
  detach(): void {
    this.detached = true;
    this.opened?.stream.close();
  }

  /** Frees the engine's side (at once, or as soon as a stream still opening is open). */
  close(): void {
    this.detached = true;
    this.closed = true;
    if (!this.opened) return;
    this.opened.stream.close();
    this.opened.release?.();
    this.opened.release = undefined;
    this.resampler?.close();
    this.resampler = null;
  }

  /** The engine's events, until its stream ends. */
  private async relay(opened: OpenedStream): Promise<void> {
    try {
      for await (const event of opened.stream.events) {
        if (this.detached) continue;
        if (event.type === 'finalized') this.finalizes.shift()?.then();
        else this.on.event(event, opened);
      }
      if (!this.detached) throw new UpstreamError('broken', 'The engine ended the transcription stream.');
    } catch (err) {
      if (!this.detached) this.on.failed(err);
    }
  }
}
