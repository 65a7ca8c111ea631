// The engine's side of a streaming-transcription session: its stream (gateway/upstreams/contract.ts),
// opened at the session's first audio, not at connect (the engine is the costly part); the
// resampler to the engine's rate; the finalizes asked of it, in order, each answered once the
// engine reports it done; and the failover: when the engine fails mid-session (its stream breaks
// or ends, it sends what the protocol does not allow, it stays silent `stallMs` while audio
// flows, or leaves a finalize unanswered that long) the next healthy upstream is opened and the
// audio since the last final (pending-audio.ts) is replayed to it, its times moved to the
// session's. The session (stt-session.ts) calls it from its steps, which run one at a time.
import { floatToS16 } from '../audio/pcm.ts';
import { createResampler, type Resampler } from '../audio/resample.ts';
import type { Clock, Timer } from '../../server/clock.ts';
import type { FailoverReason } from '../core/failover.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import { UpstreamError, type TranscriptionEvent, type TranscriptionStream, type Word } from '../upstreams/contract.ts';
import { PendingAudio } from './pending-audio.ts';
import type { FinalCause } from './stt-events.ts';

export interface OpenedStream {
  stream: TranscriptionStream;
  engineRate: number;
  /** The engine reports its own turns (else the gateway's turn detector finalizes utterances). */
  engineTurns: boolean;
  /** Run when the session ends (releases what opening took). */
  release?: () => void;
  /** Where it runs (a failover leaves it for the others). */
  upstream?: UpstreamEntry;
}

/** The engine failed mid-session; the next upstream is being opened. */
export interface EngineSwitch {
  from: UpstreamEntry | undefined;
  reason: FailoverReason;
  error: unknown;
  /** Seconds of the session's audio at which the replay to the next engine starts. */
  atSeconds: number;
}

export interface EngineStreamEvents {
  /** A transcript or turn the engine reported, its times the session's (not `finalized`: the finalize queue answers those). */
  event(event: Exclude<TranscriptionEvent, { type: 'finalized' }>, opened: OpenedStream): void;
  /** The engine failed while the session was listening, and no other upstream took over. */
  failed(err: unknown): void;
  /** The engine failed; the session moves on to the next upstream (failed() follows if none opens). */
  switching?(s: EngineSwitch): void;
}

export interface EngineStreamOptions {
  /** Opens a stream on the model's first healthy upstream not in `failed` (upstream ids). */
  open: (failed: readonly string[]) => Promise<OpenedStream>;
  /** Whether a healthy upstream not in `failed` is left (none: the session fails as it would without failover). */
  canSwitch: (failed: readonly string[]) => boolean;
  clock: Clock;
  /** The engine's silence while audio flows, or a finalize unanswered, that counts as a failure. */
  stallMs: number;
  /** Most audio kept for a replay (seconds). */
  maxPendingSeconds: number;
}

interface Finalize {
  cause: FinalCause;
  then: () => void;
  /** The session's audio position it was asked at (a replay asks it again there). */
  at: number;
}

export class EngineStream {
  /** The stream taking audio now (null before the first open and while a failover opens the next). */
  private current: OpenedStream | null = null;
  /** The first open, or a failover's. */
  private opening: Promise<OpenedStream> | null = null;
  private resampler: Resampler | null = null;
  private readonly finalizes: Finalize[] = [];
  private readonly pending: PendingAudio;
  /** The session's audio position where the current stream's audio begins (its times are offset by it). */
  private streamStart = 0;
  private readonly failedUpstreams: string[] = [];
  private audioEnded = false;
  /** A failover is opening the next engine (audio and finalizes wait in `pending` for its replay). */
  private switching = false;
  /** The gateway's or the engine's idea of whether someone speaks (undefined: not known). */
  private speechActive: boolean | undefined;
  private stallTimer: Timer | null = null;
  private finalizeTimer: Timer | null = null;
  /** The session is over: the engine's events are ignored. */
  private detached = false;
  private closed = false;

  constructor(
    private readonly sessionRate: number,
    private readonly o: EngineStreamOptions,
    private readonly on: EngineStreamEvents,
  ) {
    this.pending = new PendingAudio(Math.round(o.maxPendingSeconds * sessionRate));
  }

  /** A finalize was asked and the engine has not reported it done yet. */
  get finalizing(): boolean {
    return this.finalizes.length > 0;
  }

  /** Why the engine's next final comes: the oldest finalize not yet done (undefined: the engine finalizes by itself). */
  get nextFinalCause(): FinalCause | undefined {
    return this.finalizes[0]?.cause;
  }

  /** The stream, opened at the first call (while a failover opens the next one: that one). */
  async open(): Promise<OpenedStream> {
    if (this.current) return this.current;
    this.opening ??= this.o.open([]).then(
      (opened) => this.install(opened),
      (err: unknown) => {
        this.opening = null;
        throw err;
      },
    );
    return this.opening;
  }

  /** Writes samples at the session's rate (resampled to the engine's); returns the seconds of audio the engine has not taken yet. */
  write(samples: Float32Array): number {
    this.pending.append(samples);
    const opened = this.current;
    // A failover is opening the next engine: it gets this audio in the replay.
    if (!opened) return 0;
    opened.stream.write(floatToS16(this.resampler ? this.resampler.push(samples) : samples));
    if (!this.stallTimer && this.speechActive !== false && !opened.stream.speaking) {
      this.stallTimer = this.o.clock.after(this.o.stallMs, () => this.fail('stall'));
    }
    return opened.stream.pendingSamples / opened.engineRate;
  }

  /**
   * Ends the current utterance; `then` runs once the engine reported its final transcript (in
   * order with earlier finalizes). Audio after it goes on to the engine at once (a new utterance).
   */
  finalize(cause: FinalCause, then: () => void): void {
    // Nothing was heard yet: nothing to finalize (and no engine to open for it).
    if (!this.current && !this.switching) return then();
    this.finalizes.push({ cause, then, at: this.pending.end });
    if (!this.current) return;
    this.current.stream.finalize();
    this.finalizeTimer ??= this.o.clock.after(this.o.stallMs, () => this.fail('finalize_unanswered'));
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
    this.audioEnded = true;
    this.flushResampler();
  }

  /** Whether someone is speaking (the gateway's turn detector), for engines that are sent only speech. */
  speaking(active: boolean): void {
    this.speechActive = active;
    this.current?.stream.speaking?.(active);
  }

  /**
   * The session is over: what the engine still reports is ignored, and the engine stops working
   * (no call starts for a client that has gone); close() frees what opening took.
   */
  detach(): void {
    this.detached = true;
    this.stopTimers();
    this.current?.stream.close();
  }

  /** Frees the engine's side (at once, or as soon as a stream still opening is open). */
  close(): void {
    this.detach();
    this.closed = true;
    if (this.current) this.free(this.current);
  }

  private free(opened: OpenedStream): void {
    opened.stream.close();
    opened.release?.();
    opened.release = undefined;
    if (opened === this.current) {
      this.resampler?.close();
      this.resampler = null;
    }
  }

  /** A stream opened (first, or by a failover): it takes the audio from now on. */
  private install(opened: OpenedStream): OpenedStream {
    this.current = opened;
    this.opening = null;
    this.switching = false;
    // Without its own turns, the engine hears speech only when the gateway's detector says so.
    if (!opened.engineTurns) this.speechActive ??= false;
    if (opened.engineRate !== this.sessionRate) this.resampler = createResampler(this.sessionRate, opened.engineRate);
    // The gateway's turn detector says who speaks (speaking()): no one yet, or as it last said.
    if (!opened.engineTurns) opened.stream.speaking?.(this.speechActive ?? false);
    // Closed while it opened: free it now.
    if (this.closed) this.free(opened);
    else void this.relay(opened);
    return opened;
  }

  private flushResampler(): void {
    if (this.current && this.resampler) this.current.stream.write(floatToS16(this.resampler.end()));
    this.resampler = null;
  }

  /** The engine's events, until its stream ends (a stream left by a failover is no longer heard). */
  private async relay(opened: OpenedStream): Promise<void> {
    try {
      for await (const event of opened.stream.events) {
        if (this.detached || opened !== this.current) return;
        this.heard(event, opened);
      }
      if (!this.detached && opened === this.current) throw new UpstreamError('broken', 'The engine ended the transcription stream.');
    } catch (err) {
      if (!this.detached && opened === this.current) this.fail(reasonOf(err), err);
    }
  }

  private heard(event: TranscriptionEvent, opened: OpenedStream): void {
    this.stallTimer?.cancel();
    this.stallTimer = null;
    const offset = this.streamStart / this.sessionRate;
    switch (event.type) {
      case 'finalized': {
        const done = this.finalizes.shift();
        this.finalizeTimer?.cancel();
        this.finalizeTimer = this.finalizes.length ? this.o.clock.after(this.o.stallMs, () => this.fail('finalize_unanswered')) : null;
        if (!done) return;
        this.pending.dropBefore(done.at);
        return done.then();
      }
      case 'transcript': {
        const lastWord = event.words.at(-1);
        // A final's audio is done: it is never replayed (its words end where the next engine starts).
        if (event.isFinal && lastWord) this.pending.dropBefore(this.streamStart + Math.round(lastWord.end * this.sessionRate));
        return this.on.event(offset ? { ...event, words: event.words.map((w) => shifted(w, offset)) } : event, opened);
      }
      case 'speech_started':
      case 'end_of_turn':
        if (opened.engineTurns) this.speechActive = event.type === 'speech_started';
        return this.on.event(offset ? { ...event, atSeconds: event.atSeconds + offset } : event, opened);
    }
  }

  /** The current engine failed: the next upstream takes over, or the session fails with the first failure. */
  private fail(reason: FailoverReason, error?: unknown): void {
    const from = this.current;
    if (this.detached || !from) return;
    const failure =
      error ??
      new UpstreamError(
        'timeout',
        reason === 'stall'
          ? `The engine sent nothing for ${this.o.stallMs / 1000} s while audio flowed.`
          : `The engine did not answer a finalize within ${this.o.stallMs / 1000} s.`,
      );
    this.stopTimers();
    if (!from.upstream || !this.o.canSwitch([...this.failedUpstreams, from.upstream.id])) {
      // Nowhere to go: a silent engine is left to its protocol's own deadlines (as without failover); a failed one fails the session.
      return error === undefined ? undefined : this.on.failed(failure);
    }
    this.failedUpstreams.push(from.upstream.id);
    this.free(from);
    this.current = null;
    this.switching = true;
    this.on.switching?.({ from: from.upstream, reason, error: failure, atSeconds: this.pending.start / this.sessionRate });
    this.opening = this.o.open(this.failedUpstreams).then(
      (next) => this.resume(next),
      (err: unknown) => {
        this.opening = null;
        this.switching = false;
        if (!this.detached) this.on.failed(failure);
        throw err;
      },
    );
    // The session's steps that wait on it see the rejection too; this one is handled above.
    this.opening.catch(() => {});
  }

  /** The next engine is open: the audio since the last final is replayed to it, with the finalizes still unanswered at their places. */
  private resume(next: OpenedStream): OpenedStream {
    this.streamStart = this.pending.start;
    this.install(next);
    if (this.closed) return next;
    let at = this.pending.start;
    for (const f of this.finalizes) {
      const to = Math.max(f.at, at);
      this.replay(at, to);
      at = to;
      if (this.audioEnded && at >= this.pending.end) this.flushResampler();
      next.stream.finalize();
    }
    this.replay(at, this.pending.end);
    if (this.audioEnded) this.flushResampler();
    if (this.finalizes.length) this.finalizeTimer = this.o.clock.after(this.o.stallMs, () => this.fail('finalize_unanswered'));
    return next;
  }

  private replay(from: number, to: number): void {
    const { stream } = this.current!;
    for (const samples of this.pending.between(from, to)) {
      stream.write(floatToS16(this.resampler ? this.resampler.push(samples) : samples));
    }
  }

  private stopTimers(): void {
    this.stallTimer?.cancel();
    this.finalizeTimer?.cancel();
    this.stallTimer = this.finalizeTimer = null;
  }
}

const shifted = (w: Word, offset: number): Word => ({ ...w, start: w.start + offset, end: w.end + offset });

/** The failover's reason for an engine's failure. */
function reasonOf(err: unknown): FailoverReason {
  if (!(err instanceof UpstreamError)) return 'error';
  if (err.kind === 'broken') return 'closed';
  if (err.kind === 'protocol' || err.kind === 'timeout') return err.kind;
  return 'error';
}
