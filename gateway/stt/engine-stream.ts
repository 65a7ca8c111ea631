// The engine's side of a streaming-transcription session: its stream (gateway/upstreams/contract.ts),
// opened at the session's first audio, not at connect (the engine is the costly part); the
// resampler to the engine's rate; the finalizes asked of it, in order, each answered once the
// engine reports it done; and the failover: when the engine fails mid-session (its stream breaks
// or ends, it sends what the protocol does not allow, it stays silent `stallMs` while audio
// flows, or leaves a finalize unanswered that long) the next healthy upstream is opened and the
// audio since the last final (pending-audio.ts) is replayed to it, its times moved to the
// session's. A finalize the engine leaves unanswered past a short hedge delay (a multiple of the
// slowest answer it gave in this session, at least `finalizeHedgeMs`, half that once it answered
// one with words) starts that failover beside
// it instead: the next upstream is opened, replayed to and asked the finalize while the engine
// may still answer; the first to answer is kept, the other closed (the engine, if it lost, failed
// over as `finalize_unanswered`). Hedging (the model's capabilities.hedge): the stream is opened
// on two upstreams at once, and both hear the same audio until one of them says something; that
// one is kept and the other closed (bounded: HEDGE_MAX_SECONDS of audio with a word from neither
// keeps the first opened). The session (stt-session.ts) calls it from its steps, which run one at
// a time.
import { floatToS16, toFloat32, type PcmSamples } from '../audio/pcm.ts';
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

/**
 * Hedging: the race for the first message ends after this much of the session's audio with none
 * (the first engine opened is kept); what the other engine is sent, and may hold, is bounded by it.
 */
export const HEDGE_MAX_SECONDS = 10;

/** A hedge decided: `won` kept, `lost` closed (`failure`: it failed while racing, a failover unseen by the client). */
export interface HedgeOutcome {
  won: UpstreamEntry;
  lost: UpstreamEntry;
  failure?: { reason: FailoverReason; error: unknown };
}

/**
 * A finalize's takeover waits at least this multiple of the slowest finalize answer the engine
 * gave in this session (engines' answer times vary from one utterance to the next).
 */
export const TAKEOVER_ANSWER_MULTIPLE = 2;

/**
 * Once the engine has answered a finalize with words in this session (its own answer, not one its
 * adapter settles without asking it), the floor of the hedge delay is this share of
 * `finalizeHedgeMs`: the answers now say how fast it is, and the floor only covers the timing
 * noise on top of them (the multiple of its slowest answer decides above it).
 */
export const TAKEOVER_ANSWERED_FLOOR_SHARE = 0.5;

export interface EngineStreamEvents {
  /** A transcript or turn the engine reported, its times the session's (not `finalized`: the finalize queue answers those). */
  event(event: Exclude<TranscriptionEvent, { type: 'finalized' }>, opened: OpenedStream): void;
  /** The engine (on `upstream`) failed while the session was listening, and no other upstream took over. */
  failed(err: unknown, upstream: UpstreamEntry | undefined): void;
  /** The engine failed; the session moves on to the next upstream (failed() follows if none opens). */
  switching?(s: EngineSwitch): void;
  /** Hedging: the race for the first message is over. */
  hedged?(h: HedgeOutcome): void;
  /** A finalize's takeover: the upstream started beside the engine failed before answering (the engine goes on; the client sees nothing). */
  takeoverFailed?(s: EngineSwitch): void;
}

export interface EngineStreamOptions {
  /** Opens a stream on the model's first healthy upstream not in `failed` (upstream ids); `only`: on that upstream alone. */
  open: (failed: readonly string[], only?: string) => Promise<OpenedStream>;
  /** Whether a healthy upstream not in `failed` is left (none: the session fails as it would without failover). */
  canSwitch: (failed: readonly string[]) => boolean;
  clock: Clock;
  /** The engine's silence while audio flows, or a finalize unanswered, that counts as a failure. */
  stallMs: number;
  /**
   * The least time a finalize is left to the engine alone before the next upstream is started
   * beside it (the takeover), until the engine answered one with words (then
   * TAKEOVER_ANSWERED_FLOOR_SHARE of it); the delay is TAKEOVER_ANSWER_MULTIPLE times the slowest
   * answer the engine gave, when longer. 0 or absent: no takeover (the finalize waits `stallMs`).
   */
  finalizeHedgeMs?: number;
  /** Most audio kept for a replay (seconds). */
  maxPendingSeconds: number;
  /** Hedging: the two upstreams to open at once, or null (off, or fewer than two to race). */
  hedge?: () => [UpstreamEntry, UpstreamEntry] | null;
}

/**
 * Two engines racing, and the second stream once it opened (it hears the same audio as the
 * first). `hedge`: the model's hedging, decided by the first thing either says. `takeover`: a
 * finalize left unanswered past the hedge delay, decided by the first answer to the oldest
 * finalize; until then what each says is held (the winner's is then heard, the loser's dropped).
 */
type Race = { rival: OpenedStream | null; resampler: Resampler | null; /** The session's audio position the rival's audio begins at. */ start: number } & (
  | { kind: 'hedge'; pair: [UpstreamEntry, UpstreamEntry] }
  | {
      kind: 'takeover';
      /** The next upstream opening (a failover meanwhile takes it: `adopted`). */
      opening: Promise<OpenedStream>;
      adopted: boolean;
      held: { current: TranscriptionEvent[]; rival: TranscriptionEvent[] };
    }
);

interface Finalize {
  cause: FinalCause;
  then: () => void;
  /** The session's audio position it was asked at (a replay asks it again there). */
  at: number;
  /** When it was asked of the engine serving now, on the session's clock (undefined: asked again in a replay; its answer time is not the engine's). */
  askedAt: number | undefined;
  /** A final with words came from the engine while it was the oldest unanswered: its answer is the engine's own. */
  withWords?: boolean;
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
  /** A finalize's takeover, due at the hedge delay after the oldest finalize was asked (or the one before it answered). */
  private takeoverTimer: Timer | null = null;
  /** The slowest finalize answer of the engine serving now (ms), which its hedge delay is a multiple of. */
  private slowestAnswerMs = 0;
  /** The engine serving now answered a finalize with words in this session (its answers are evidence of its speed). */
  private answeredWithWords = false;
  /** Hedging: the race for the first message (null: none, or over). */
  private race: Race | null = null;
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
    const pair = this.opening ? null : (this.o.hedge?.() ?? null);
    this.opening ??= (pair ? this.openBoth(pair) : this.o.open([])).then(
      (opened) => this.install(opened),
      (err: unknown) => {
        this.opening = null;
        throw err;
      },
    );
    return this.opening;
  }

  /**
   * Hedging: both upstreams opened at once; the first open serves, the other joins the race when
   * it opens. Neither opens: the model's other upstreams in turn (none: the first one's error).
   */
  private openBoth(pair: [UpstreamEntry, UpstreamEntry]): Promise<OpenedStream> {
    const race: Race = { kind: 'hedge', pair, rival: null, resampler: null, start: 0 };
    this.race = race;
    const openings = pair.map((u) => this.o.open([], u.id));
    const first = Promise.any(openings).catch((e: AggregateError) => {
      this.race = null;
      const ids = pair.map((u) => u.id);
      return this.o.canSwitch(ids) ? this.o.open(ids) : Promise.reject(e.errors[0] as Error);
    });
    for (const opening of openings) {
      void Promise.allSettled([opening, first]).then(([opened]) => {
        if (opened.status === 'fulfilled' && opened.value !== this.current) this.join(opened.value, race);
      });
    }
    return first;
  }

  /** A race's second stream opened; it is sent the audio kept (and asked the finalizes so far), then hears what the first hears. */
  private join(opened: OpenedStream, race: Race): void {
    // The race is over (decided, or the session ended): it is not needed.
    if (race !== this.race || race.rival || this.closed || this.detached || !this.current) {
      opened.stream.close();
      opened.release?.();
      return;
    }
    race.rival = opened;
    race.start = this.pending.start;
    if (opened.engineRate !== this.sessionRate) race.resampler = createResampler(this.sessionRate, opened.engineRate);
    if (!opened.engineTurns) opened.stream.speaking?.(this.speechActive ?? false);
    this.replayPending({
      write: (samples) => this.writeRival(race, samples),
      flush: () => this.flushRival(race),
      finalize: () => opened.stream.finalize(),
    });
    void this.relay(opened);
  }

  /**
   * A race decided: `winner` spoke first, or answered the finalize first (or the first opened is
   * kept at the cap, or the other failed): it serves from now on, the other is closed.
   */
  private decide(winner: OpenedStream, failure?: HedgeOutcome['failure']): void {
    const race = this.race;
    if (!race || (winner !== this.current && winner !== race.rival)) return;
    this.race = null;
    const rivalWon = winner === race.rival;
    const loser = rivalWon ? this.current : race.rival;
    if (rivalWon) {
      // The rival heard everything the first heard: it takes over, its times from where its audio began.
      this.current = winner;
      this.resampler?.close();
      this.resampler = race.resampler;
      race.resampler = null;
      this.streamStart = race.start;
      if (!winner.engineTurns) this.speechActive ??= false;
      this.newEngine();
      this.stopTimers();
      this.armFinalizeTimers();
    }
    race.resampler?.close();
    if (loser) {
      loser.stream.close();
      loser.release?.();
      loser.release = undefined;
    }
    if (race.kind === 'hedge') {
      const won = winner.upstream ?? race.pair[0];
      this.on.hedged?.({ won, lost: race.pair.find((u) => u.id !== won.id)!, ...(failure && { failure }) });
      return;
    }
    // A takeover: what the winner said while racing is heard now, in order; the loser's is dropped.
    for (const event of rivalWon ? race.held.rival : race.held.current) {
      if (this.detached) return;
      this.heard(event, winner);
    }
  }

  /** The stream taking audio now, or null (not opened yet, or a failover is opening the next). */
  get opened(): OpenedStream | null {
    return this.current;
  }

  /** Writes samples at the session's rate (resampled to the engine's); returns the seconds of audio the engine has not taken yet. */
  write(samples: PcmSamples): number {
    this.pending.append(samples);
    const opened = this.current;
    // A failover is opening the next engine: it gets this audio in the replay.
    if (!opened) return 0;
    opened.stream.write(engineSamples(samples, this.resampler));
    if (this.race) {
      if (this.race.rival) this.writeRival(this.race, samples);
      // Bounded: after this much audio with a word from neither, the first opened is kept.
      if (this.race.kind === 'hedge' && this.pending.end >= HEDGE_MAX_SECONDS * this.sessionRate) this.decide(opened);
    }
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
    this.finalizes.push({ cause, then, at: this.pending.end, askedAt: this.current ? this.o.clock.now() : undefined });
    if (!this.current) return;
    this.current.stream.finalize();
    this.race?.rival?.stream.finalize();
    if (!this.finalizeTimer) this.armFinalizeTimers();
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
    if (this.race) this.flushRival(this.race);
  }

  /** Whether someone is speaking (the gateway's turn detector), for engines that are sent only speech. */
  speaking(active: boolean): void {
    this.speechActive = active;
    this.current?.stream.speaking?.(active);
    this.race?.rival?.stream.speaking?.(active);
  }

  /**
   * The session is over: what the engine still reports is ignored, and the engine stops working
   * (no call starts for a client that has gone); close() frees what opening took.
   */
  detach(): void {
    this.detached = true;
    this.stopTimers();
    this.current?.stream.close();
    this.race?.rival?.stream.close();
  }

  /** Frees the engine's side (at once, or as soon as a stream still opening is open). */
  close(): void {
    this.detach();
    this.closed = true;
    if (this.current) this.free(this.current);
    const race = this.race;
    this.race = null;
    if (race?.rival) {
      race.resampler?.close();
      this.free(race.rival);
    }
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
    this.newEngine();
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

  private writeRival(race: Race, samples: PcmSamples): void {
    race.rival?.stream.write(engineSamples(samples, race.resampler));
  }

  private flushRival(race: Race): void {
    if (race.rival && race.resampler) race.rival.stream.write(floatToS16(race.resampler.end()));
    race.resampler = null;
  }

  /** The engine's events, until its stream ends (a stream left by a failover, or that lost a race, is no longer heard). */
  private async relay(opened: OpenedStream): Promise<void> {
    const racing = () => opened === this.race?.rival;
    try {
      for await (const event of opened.stream.events) {
        if (this.detached) return;
        const race = this.race;
        if (race?.kind === 'takeover' && race.rival) {
          if (opened !== this.current && opened !== race.rival) return;
          this.held(race, opened, event);
          continue;
        }
        // A takeover's engine answered while the next upstream opens: the race is over (that one is closed when it opens).
        if (race?.kind === 'takeover' && opened === this.current && event.type === 'finalized') this.race = null;
        // Hedging: the first thing either engine says decides the race (an empty transcript says nothing).
        if (race?.kind === 'hedge' && !(event.type === 'transcript' && !event.text)) this.decide(opened);
        if (opened === this.current) this.heard(event, opened);
        else if (!racing()) return;
      }
      if (!this.detached && (opened === this.current || racing())) throw new UpstreamError('broken', 'The engine ended the transcription stream.');
    } catch (err) {
      if (this.detached) return;
      if (opened === this.current) this.fail(reasonOf(err), err);
      else if (racing()) this.rivalFailed(opened, reasonOf(err), err);
    }
  }

  /** The second engine of a race failed while racing: the first is kept, the other left out of any later failover. */
  private rivalFailed(rival: OpenedStream, reason: FailoverReason, error: unknown): void {
    const race = this.race!;
    if (rival.upstream) this.failedUpstreams.push(rival.upstream.id);
    if (race.kind === 'hedge') return this.decide(this.current!, { reason, error });
    this.decide(this.current!);
    if (rival.upstream) this.on.takeoverFailed?.({ from: rival.upstream, reason, error, atSeconds: race.start / this.sessionRate });
  }

  /**
   * A takeover's race: what either engine says is held; the first to answer the oldest finalize
   * wins. The engine answering keeps the session (the next upstream is closed); the next upstream
   * answering takes it over, the engine failed over as `finalize_unanswered`.
   */
  private held(race: Race & { kind: 'takeover' }, opened: OpenedStream, event: TranscriptionEvent): void {
    const isRival = opened === race.rival;
    // The engine says something: it is not silent (the stall rule), whatever the race's outcome.
    if (!isRival) {
      this.stallTimer?.cancel();
      this.stallTimer = null;
    }
    (isRival ? race.held.rival : race.held.current).push(event);
    if (event.type !== 'finalized') return;
    if (!isRival) return this.decide(opened);
    this.fail(
      'finalize_unanswered',
      new UpstreamError('timeout', 'The engine left a finalize unanswered; the next upstream, started beside it, answered first.'),
    );
  }

  private heard(event: TranscriptionEvent, opened: OpenedStream): void {
    this.stallTimer?.cancel();
    this.stallTimer = null;
    const offset = this.streamStart / this.sessionRate;
    switch (event.type) {
      case 'finalized': {
        const done = this.finalizes.shift();
        if (done?.askedAt !== undefined) {
          this.slowestAnswerMs = Math.max(this.slowestAnswerMs, this.o.clock.now() - done.askedAt);
          if (done.withWords) this.answeredWithWords = true;
        }
        this.armFinalizeTimers();
        if (!done) return;
        this.pending.dropBefore(done.at);
        return done.then();
      }
      case 'transcript': {
        const lastWord = event.words.at(-1);
        // A final's audio is done: it is never replayed (its words end where the next engine starts).
        if (event.isFinal && lastWord) {
          this.pending.dropBefore(this.streamStart + Math.round(lastWord.end * this.sessionRate));
          if (this.finalizes[0]) this.finalizes[0].withWords = true;
        }
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
    const race = this.race;
    const rival = race?.rival;
    if (rival && from.upstream) {
      // The engine racing this one (a hedge, a takeover) has heard all the audio too: it takes over at once.
      this.failedUpstreams.push(from.upstream.id);
      this.on.switching?.({ from: from.upstream, reason, error: failure, atSeconds: race!.start / this.sessionRate });
      return this.decide(rival);
    }
    // The other engine of a race has not opened yet: a hedge's is closed when it does, and the
    // failover opens the next as always; a takeover's is the next upstream opening: the failover takes it.
    this.race = null;
    const takeover = race?.kind === 'takeover' ? race : null;
    if (!from.upstream || (!takeover && !this.o.canSwitch([...this.failedUpstreams, from.upstream.id]))) {
      // Nowhere to go: a silent engine is left to its protocol's own deadlines (as without failover); a failed one fails the session.
      return error === undefined ? undefined : this.on.failed(failure, from.upstream);
    }
    if (takeover) takeover.adopted = true;
    this.failedUpstreams.push(from.upstream.id);
    this.free(from);
    this.current = null;
    this.switching = true;
    this.on.switching?.({ from: from.upstream, reason, error: failure, atSeconds: this.pending.start / this.sessionRate });
    this.opening = (takeover?.opening ?? this.o.open(this.failedUpstreams)).then(
      (next) => this.resume(next),
      (err: unknown) => {
        this.opening = null;
        this.switching = false;
        if (!this.detached) this.on.failed(failure, from.upstream);
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
    this.replayPending({
      write: (samples) => next.stream.write(engineSamples(samples, this.resampler)),
      flush: () => this.flushResampler(),
      finalize: () => next.stream.finalize(),
    });
    this.armFinalizeTimers();
    return next;
  }

  /** The pending audio to a stream that just opened, the finalizes still unanswered asked again at their places in it. */
  private replayPending(to: { write(samples: PcmSamples): void; flush(): void; finalize(): void }): void {
    let at = this.pending.start;
    for (const f of this.finalizes) {
      const end = Math.max(f.at, at);
      for (const samples of this.pending.between(at, end)) to.write(samples);
      at = end;
      if (this.audioEnded && at >= this.pending.end) to.flush();
      to.finalize();
    }
    for (const samples of this.pending.between(at, this.pending.end)) to.write(samples);
    if (this.audioEnded) to.flush();
  }

  /** Another engine serves from now on: its answer times are its own, and the finalizes it was asked in a replay are not timed. */
  private newEngine(): void {
    this.slowestAnswerMs = 0;
    this.answeredWithWords = false;
    for (const f of this.finalizes) f.askedAt = undefined;
  }

  /** The oldest finalize's timers (none left: none): the failure after `stallMs`, the takeover after the hedge delay. */
  private armFinalizeTimers(): void {
    this.finalizeTimer?.cancel();
    this.takeoverTimer?.cancel();
    this.finalizeTimer = this.takeoverTimer = null;
    if (!this.finalizes.length) return;
    this.finalizeTimer = this.o.clock.after(this.o.stallMs, () => this.fail('finalize_unanswered'));
    const delay = this.hedgeDelayMs();
    if (delay !== null) this.takeoverTimer = this.o.clock.after(delay, () => this.takeOver());
  }

  /**
   * How long a finalize is left to the engine alone: TAKEOVER_ANSWER_MULTIPLE times its slowest
   * answer in this session, at least `finalizeHedgeMs` (TAKEOVER_ANSWERED_FLOOR_SHARE of it once
   * the engine answered one with words); null: no takeover (off; the delay would
   * reach the stall allowance; or a stream over a batch engine, whose answer takes as long as its
   * segment is long).
   */
  private hedgeDelayMs(): number | null {
    const floor = this.o.finalizeHedgeMs ?? 0;
    if (floor <= 0 || this.current?.stream.speaking) return null;
    const least = this.answeredWithWords ? floor * TAKEOVER_ANSWERED_FLOOR_SHARE : floor;
    const delay = Math.max(least, TAKEOVER_ANSWER_MULTIPLE * this.slowestAnswerMs);
    return delay < this.o.stallMs ? delay : null;
  }

  /**
   * The oldest finalize is still unanswered at the hedge delay: the next healthy upstream is
   * opened beside the engine, sent the audio kept and asked the finalizes (join), and the two race
   * to answer (held). The engine is not failed yet: it may answer first.
   */
  private takeOver(): void {
    this.takeoverTimer = null;
    const from = this.current;
    if (this.detached || this.race || !this.finalizes.length || !from?.upstream) return;
    const failed = [...this.failedUpstreams, from.upstream.id];
    if (!this.o.canSwitch(failed)) return;
    const race: Race = {
      kind: 'takeover',
      opening: this.o.open(failed),
      adopted: false,
      held: { current: [], rival: [] },
      rival: null,
      resampler: null,
      start: this.pending.start,
    };
    this.race = race;
    race.opening.then(
      (opened) => {
        // A failover took it (the engine failed meanwhile): it serves as the failover's next engine.
        if (!race.adopted) this.join(opened, race);
      },
      () => {
        // Nothing opened: the engine goes on alone (its stall allowance still runs).
        if (this.race === race) this.race = null;
      },
    );
  }

  private stopTimers(): void {
    this.stallTimer?.cancel();
    this.finalizeTimer?.cancel();
    this.takeoverTimer?.cancel();
    this.stallTimer = this.finalizeTimer = this.takeoverTimer = null;
  }
}

/**
 * Samples at the session's rate as the engine's 16-bit PCM: through the resampler when the
 * engine's rate differs; at the same rate, s16 goes as it is (no float round trip) and float is
 * converted.
 */
function engineSamples(samples: PcmSamples, resampler: Resampler | null): Int16Array {
  if (resampler) return floatToS16(resampler.push(toFloat32(samples)));
  return samples instanceof Int16Array ? samples : floatToS16(samples);
}

const shifted = (w: Word, offset: number): Word => ({ ...w, start: w.start + offset, end: w.end + offset });

/** The failover's reason for an engine's failure. */
function reasonOf(err: unknown): FailoverReason {
  if (!(err instanceof UpstreamError)) return 'error';
  if (err.kind === 'broken') return 'closed';
  if (err.kind === 'protocol' || err.kind === 'timeout') return err.kind;
  return 'error';
}
