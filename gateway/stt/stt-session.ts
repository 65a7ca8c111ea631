// One streaming-transcription session, whatever carries it: audio frames and commands in, typed
// events (stt-events.ts) out through an Outbox. The WebSocket routes bind a socket to it
// (open-session.ts, each route's dialect writing the events in its protocol: docs/stt.md); the
// realtime session drives one in process (gateway/realtime/stt-leg.ts). Audio is decoded from the
// session's encoding, written to the engine's stream in order (engine-stream.ts: opened at the
// first audio, resampled to its rate, moved to the next upstream if the engine fails:
// docs/failover.md, "Streaming STT") and metered as it arrives (audio-meter.ts: each next second
// is paid for, reserved, before it is accepted). Turns: an engine that finds them itself reports
// them; otherwise the gateway's turn detector finds pauses and finalizes each utterance. The idle
// timeout, the maximum duration, the shutdown and the key's revocation come from SessionLife, on
// the injected clock.
import { toFloat32, type PcmSamples } from '../audio/pcm.ts';
import { decodePcm } from '../audio/sample-encoding.ts';
import { formatUsd } from '../../server/money.ts';
import { isServiceError } from '../../server/services/errors.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { SessionLife } from '../sessions/session-life.ts';
import { UpstreamError, type TranscriptionEvent, type Word } from '../upstreams/contract.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { AudioMeter } from './audio-meter.ts';
import { EngineStream, type EngineSwitch, type OpenedStream } from './engine-stream.ts';
import type { SttSessionOptions } from './stt-session-options.ts';
import { TurnLog } from './turn-log.ts';
import type { SttCommand, SttEvent, SttTranscript } from './stt-events.ts';
import { TurnDetector } from './turn-detector.ts';
import { TurnRelay } from './turn-relay.ts';

export type { SttSessionOptions };

export const MAX_SESSION_MS = 60 * 60_000;
/** Audio is debited every time this much more has arrived (and at the end); credit is reserved this much at a time. */
export const METER_EVERY_MS = 1_000;

/**
 * Each session's metering offset into the interval (AudioMeter `offsetMs`): one of
 * METER_SLOTS slots, 0 for the process's first session, then spread evenly by the golden ratio,
 * so that sessions started together do not all debit at the same moment of every second. Slots
 * rather than any millisecond: the debits of one slot share a commit (the hot store's group
 * commit), and a commit's fixed cost is paid METER_SLOTS times a second, not once per session.
 */
function nextMeterOffsetMs(): number {
  const slot = Math.floor(((sessionsMetered++ * GOLDEN_RATIO_FRACTION) % 1) * METER_SLOTS);
  return (slot * METER_EVERY_MS) / METER_SLOTS;
}
const METER_SLOTS = 10;
let sessionsMetered = 0;
const GOLDEN_RATIO_FRACTION = (Math.sqrt(5) - 1) / 2;
/** Audio waiting for the recognizer beyond this means the client sends faster than real time can be processed. */
export const MAX_BACKLOG_SECONDS = 30;

/**
 * live: audio and commands are taken. ending: a clean end was asked (close, maximum duration):
 * what was heard is being finalized, and audio that comes after is not taken. closed: the last
 * event is out (or the transport is gone): nothing more is sent or taken; the audio received is
 * being billed, then the engine and the credit left are given back.
 */
type State = 'live' | 'ending' | 'closed';

const NO_BYTES = Buffer.alloc(0);

type Waiting = { frame: Buffer } | { command: SttCommand; bytes: number };

export class SttSession {
  private state: State = 'live';
  private readonly life: SessionLife;
  private readonly meter: AudioMeter;
  private readonly engine: EngineStream;
  private readonly turns: TurnDetector;
  private readonly turnLog: TurnLog;
  private readonly relay: TurnRelay;
  /** Aborted when the session ends (an engine still opening is given up). */
  private readonly gone = new AbortController();
  private readonly bytesPerSample: number;
  private readonly maxBacklogBytes: number;
  /** The bytes of a sample split across frames. */
  private carry: Buffer = NO_BYTES;
  /** Work for the recognizer, in arrival order; while any is pending the session is not idle. */
  private steps: Promise<void> = Promise.resolve();
  private pendingSteps = 0;
  private debits: Promise<void> = Promise.resolve();
  /** Audio accepted but not yet written to the engine (it waits while the engine opens). */
  private queuedSamples = 0;
  /** Samples given to the gateway's turn detector so far (its audio time, at the session's rate). */
  private detectedSamples = 0;
  /**
   * Frames past what reserved credit covers wait here, in order, while the next interval is
   * reserved; commands sent after such frames wait behind them (a finalize applies to all audio before it).
   */
  private readonly waiting: Waiting[] = [];
  private waitingBytes = 0;
  private extending = false;
  private lastPartial = '';
  private lastAudioAt: number;
  private firstAudioAt: number | undefined;
  private firstTranscriptSent = false;
  /** No engine would take the audio (it refused us, or none had room) while the session was live: nothing is billed. */
  private engineRefused = false;
  private billed: () => void = () => {};

  constructor(
    private readonly o: SttSessionOptions,
    private readonly outbox: Outbox<SttEvent>,
  ) {
    this.bytesPerSample = o.encoding === 'pcm_f32le' ? 4 : o.encoding === 'pcm_s16le' ? 2 : 1;
    this.maxBacklogBytes = MAX_BACKLOG_SECONDS * o.sampleRate * this.bytesPerSample;
    this.turns = new TurnDetector(o.sampleRate, o.turns);
    this.meter = new AudioMeter({
      sampleRate: o.sampleRate,
      picoPerSecond: o.model.prices.picoPerSecond,
      intervalMs: METER_EVERY_MS,
      offsetMs: nextMeterOffsetMs(),
      hold: o.hold,
      charge: (micros, audioMillis) =>
        o.core.charge(
          o.auth,
          o.requestId,
          micros,
          { modelId: o.model.id, modality: 'stt', route: o.usageRoute ?? 'stt.websocket', audioMillis },
          o.hold,
          micros,
        ),
    });
    this.engine = new EngineStream(
      o.sampleRate,
      {
        open: (failed, only) => o.openStream(this.gone.signal, failed, only),
        canSwitch: o.canSwitch ?? (() => false),
        clock: o.clock,
        stallMs: o.stallMs,
        finalizeHedgeMs: o.finalizeHedgeMs,
        maxPendingSeconds: MAX_BACKLOG_SECONDS,
        hedge: o.hedge,
      },
      {
        event: (event, opened) => this.onEngineEvent(event, opened.engineTurns),
        failed: (err, upstream) => {
          if (err instanceof UpstreamError) o.onEngineFailure?.(err, upstream);
          this.fail(err);
        },
        switching: (s) => this.onSwitching(s),
        hedged: (h) => o.onHedge?.(h),
        // The upstream started beside a silent engine failed too: recorded as any engine failing mid-session, unseen by the client.
        takeoverFailed: (s) => o.onFailover?.({ ...s, phase: this.firstTranscriptSent ? 'mid_stream' : 'before_first_output' }),
      },
    );
    this.turnLog = new TurnLog(o.logTurn);
    this.relay = new TurnRelay({
      engine: this.engine,
      turnLog: this.turnLog,
      send: (event) => this.send(event),
      lastPartial: () => this.lastPartial,
      receivedSeconds: () => this.meter.receivedMillis / 1000,
      turnSettings: () => this.turns.settings,
    });
    o.track?.(new Promise<void>((resolve) => (this.billed = resolve)));
    this.life = new SessionLife(
      o.clock,
      { idleMs: o.idleTimeoutMs, maxDurationMs: MAX_SESSION_MS },
      { shutdown: o.shutdown, revoked: o.revoked },
      {
        idle: () => this.onIdle(),
        maxDuration: () => this.onMaxDuration(),
        // 1001 "going away": the client should reconnect (to another replica). Audio received so far is billed, as for any other ending.
        shutdown: (error) => this.end(1001, 'shutdown', error),
        revoked: (error) => this.end(1008, error.code, error),
      },
    );
    this.lastAudioAt = o.clock.now();
    this.send({
      type: 'started',
      sessionId: o.sessionId,
      requestId: o.requestId,
      model: o.model.id,
      sampleRate: o.sampleRate,
      encoding: o.encoding,
      turns: o.turns,
      idleTimeoutSeconds: o.idleTimeoutMs / 1000,
      maxSessionSeconds: MAX_SESSION_MS / 1000,
      startedAt: new Date(this.life.started),
    });
  }

  /** The last event is out, or the transport is gone (a getter: the state changes across awaits). */
  private get closed(): boolean {
    return this.state === 'closed';
  }

  /** A frame of audio in the session's encoding (a sample may be split across frames). */
  audio(frame: Buffer): void {
    if (this.closed) return;
    // Only frames that complete a sample are audio: empty frames keep nothing open.
    if (this.samplesIn(frame) > 0) {
      this.lastAudioAt = this.o.clock.now();
      this.life.touch();
    }
    if (this.waiting.length === 0 && this.meter.covers(this.samplesIn(frame))) return this.takeAudio(frame);
    this.wait({ frame }, frame.length);
    void this.extendCoverage();
  }

  command(command: SttCommand): void {
    if (this.closed) return;
    if (this.waiting.length === 0) return this.handleCommand(command);
    const bytes = JSON.stringify(command).length;
    this.wait({ command, bytes }, bytes);
  }

  /** The transport is gone: nothing more is sent; the audio received is billed, then the engine is freed. */
  close(): void {
    if (this.closed) return;
    this.state = 'closed';
    this.finish();
  }

  // ---- audio

  private samplesIn(frame: Buffer): number {
    return Math.floor((this.carry.length + frame.length) / this.bytesPerSample);
  }

  private wait(entry: Waiting, bytes: number): void {
    this.waiting.push(entry);
    this.waitingBytes += bytes;
    if (this.waitingBytes > this.maxBacklogBytes) this.backlog();
  }

  /** Reserves interval after interval until the waiting frames are covered, handling them (and the commands between them) in order. */
  private async extendCoverage(): Promise<void> {
    if (this.extending) return;
    this.extending = true;
    try {
      while (this.waiting.length > 0 && !this.closed) {
        const next = this.waiting[0]!;
        if ('frame' in next && !this.meter.covers(this.samplesIn(next.frame))) {
          if (await this.meter.extend()) continue;
          const refused = this.meter.refusal("The organization's credit ran out: the next second of audio cannot be paid for; add credits to continue.");
          return this.end(1008, refused.code, { code: refused.code, message: refused.message });
        }
        this.waiting.shift();
        if ('frame' in next) {
          this.waitingBytes -= next.frame.length;
          this.takeAudio(next.frame);
        } else {
          this.waitingBytes -= next.bytes;
          this.handleCommand(next.command);
        }
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.extending = false;
    }
  }

  /**
   * Audio paid for: counted, then written to the engine (opened at the first) and to the turn
   * detector, in order. The samples are views of the frame where its encoding allows (decodePcm:
   * s16 and f32 frames are not copied, nor s16 turned into float and back); the failover's
   * replay keeps a copy (pending-audio.ts).
   */
  private takeAudio(frame: Buffer): void {
    if (this.state !== 'live') return;
    const bytes: Buffer = this.carry.length ? Buffer.concat([this.carry, frame]) : frame;
    const usable = bytes.length - (bytes.length % this.bytesPerSample);
    // Whole samples (most frames): no views made of the frame.
    this.carry = usable === bytes.length ? NO_BYTES : bytes.subarray(usable);
    if (usable === 0) return;
    const input = decodePcm(usable === bytes.length ? bytes : bytes.subarray(0, usable), this.o.encoding);
    this.firstAudioAt ??= performance.now();
    this.meter.count(input.length);
    // Most frames of a live session: the engine is open and finds turns itself, and nothing waits
    // before this audio. It is written now, without a step (a step is three promises a frame).
    const opened = this.engine.opened;
    if (opened?.engineTurns && this.pendingSteps === 0) return this.toEngine(input);
    this.queuedSamples += input.length;
    if (this.queuedSamples / this.o.sampleRate > MAX_BACKLOG_SECONDS) return this.backlog();
    this.enqueue(async () => {
      if (this.closed) return;
      let opened: OpenedStream;
      try {
        opened = await this.engine.open();
      } catch (err) {
        // Refused while the session was live (not cut short by its own end: that audio is billed as always).
        if (!this.closed) this.engineRefused = true;
        throw err;
      }
      if (this.closed) return;
      this.queuedSamples -= input.length;
      if (!opened.engineTurns) {
        await this.detectTurns(input);
        if (this.meter.debitDue) this.debitInBackground();
      } else this.toEngine(input);
    });
  }

  /**
   * Audio for an engine whose turns the gateway's detector finds. Each turn event is acted on
   * where the detector decided it in the audio: a turn's finalize follows exactly the audio up to
   * there, and what came after goes to the engine after it (a word begun right after the turn's
   * silence is the next utterance's, whole). So only the audio a turn cannot end before
   * (TurnDetector.earliestEndSeconds: while someone speaks, or no one does, all of a frame in
   * practice) goes to the engine before the detector judged it; the rest, in a pause, waits for
   * its judgement (the detector's time on a frame).
   */
  private async detectTurns(input: PcmSamples): Promise<void> {
    const rate = this.o.sampleRate;
    const start = this.detectedSamples;
    this.detectedSamples += input.length;
    let sent = 0;
    const sendUpTo = (seconds: number): boolean => {
      const upTo = Math.min(input.length, Math.max(sent, Math.floor(seconds * rate) - start));
      if (upTo > sent && this.engine.write(sent === 0 && upTo === input.length ? input : input.subarray(sent, upTo)) > MAX_BACKLOG_SECONDS) {
        this.backlog();
        return false;
      }
      sent = upTo;
      return true;
    };
    if (!sendUpTo(this.turns.earliestEndSeconds)) return;
    const found = await this.turns.push(toFloat32(input));
    if (this.closed) return;
    for (const t of found) {
      if (!sendUpTo(t.decidedAtSeconds)) return;
      // Whether anyone speaks, for engines that are sent only speech: told before the turn's finalize.
      if (t.type === 'turn.start' || t.type === 'turn.end') this.engine.speaking(t.type === 'turn.start');
      this.relay.detected(t);
    }
    sendUpTo(Infinity);
  }

  /** Audio to the engine; the next debit starts once an interval's worth more has arrived. */
  private toEngine(input: PcmSamples): void {
    try {
      if (this.engine.write(input) > MAX_BACKLOG_SECONDS) return this.backlog();
      if (this.meter.debitDue) this.debitInBackground();
    } catch (err) {
      this.fail(err);
    }
  }

  private enqueue(step: () => Promise<void>): void {
    this.pendingSteps++;
    this.steps = this.steps.then(step).finally(() => {
      this.pendingSteps--;
    });
    this.steps.catch((err: unknown) => this.fail(err));
  }

  private backlog(): void {
    this.end(1013, 'backlog', {
      code: 'backlog',
      message: `More than ${MAX_BACKLOG_SECONDS} s of audio is waiting for the recognizer; send audio no faster than real time.`,
    });
  }

  /** Debits on a chain of their own, in order: the audio behind a debit does not wait for its ledger write. */
  private debitInBackground(): void {
    this.debits = this.debits.then(() => this.debit(false)).catch((err: unknown) => this.fail(err));
  }

  /** Debits the audio received since the last debit (see AudioMeter); a balance at zero ends the session. */
  private async debit(force: boolean): Promise<void> {
    const remaining = await this.meter.debit(force);
    if (remaining === null || remaining > 0n) return;
    this.end(1008, 'insufficient_quota', {
      code: 'insufficient_quota',
      message: `The organization's credit ran out (balance ${formatUsd(remaining)} USD); add credits to continue.`,
    });
  }

  // ---- the engine's events

  private onEngineEvent(event: Exclude<TranscriptionEvent, { type: 'finalized' }>, engineTurns: boolean): void {
    switch (event.type) {
      case 'transcript':
        if (event.isFinal) {
          this.lastPartial = '';
          this.turnLog.final(event.text);
          if (event.text) this.sendTranscript(event, true);
        } else if (event.text && event.text !== this.lastPartial) {
          this.lastPartial = event.text;
          this.turns.hint(event.text);
          this.sendTranscript(event, false);
        }
        return;
      case 'speech_started':
        return engineTurns ? this.relay.engineStarted(event.atSeconds) : undefined;
      case 'end_of_turn':
        return engineTurns ? this.relay.engineEnded(event.atSeconds) : undefined;
    }
  }

  /** The engine failed mid-session: the next upstream hears the audio since the last final; the client hears nothing of it (but an informational event, where its dialect has one). */
  private onSwitching(s: EngineSwitch): void {
    const phase = this.firstTranscriptSent ? 'mid_stream' : 'before_first_output';
    this.o.onFailover?.({ ...s, phase });
    this.turnLog.failover(`${s.reason} (${phase.replace(/_/g, ' ')})`);
    this.send({ type: 'switched', reason: s.reason, atSeconds: s.atSeconds });
  }

  private sendTranscript(t: { text: string; words: Word[] }, isFinal: boolean): void {
    if (!this.firstTranscriptSent && this.firstAudioAt !== undefined) {
      this.firstTranscriptSent = true;
      this.o.onFirstTranscript?.((performance.now() - this.firstAudioAt) / 1000);
    }
    const event: SttTranscript = { type: 'transcript', text: t.text, words: t.words, isFinal, audioSeconds: this.meter.receivedMillis / 1000 };
    if (isFinal) event.cause = this.engine.nextFinalCause;
    // An interim is superseded by the next one: a client that does not keep up may miss it.
    this.send(event, { droppable: !isFinal });
  }

  private fail(err: unknown): void {
    const error = err instanceof UpstreamError ? upstreamEnvelope(err, this.o.engineTimeoutMs) : err;
    // The server has no recognizer to spare: the client may retry (1013 "try again later").
    if (isServiceError(error) && error.code === 'temporarily_unavailable') return this.end(1013, 'capacity', error);
    this.o.log.warn({ err }, 'stt session failed');
    // The engine refused or failed: its message (never its key) tells the client why.
    if (isServiceError(error)) return this.end(1011, 'engine_error', { code: error.code, message: `${error.message} Reconnect to start a new session.` });
    this.end(1011, 'engine_error', { code: 'upstream_error', message: 'The speech recognizer failed; reconnect to start a new session.' });
  }

  // ---- commands

  private handleCommand(command: SttCommand): void {
    switch (command.type) {
      case 'invalid':
        return this.send({ type: 'error', code: command.code, message: command.message });
      case 'keepalive':
        // Keeps a quiet session open, but not forever without audio (maxSilenceMs).
        if (this.o.clock.now() - this.lastAudioAt < this.o.maxSilenceMs) this.life.touch();
        return;
      case 'configure':
        // New turn settings apply from the audio after the message (in order with the audio before it).
        return this.enqueue(async () => {
          this.turns.configure(command.turns);
          this.send({ type: 'configured', turns: command.turns });
        });
      case 'finalize':
        this.life.touch();
        return this.enqueue(async () => this.engine.finalize('finalize', () => this.send({ type: 'flushed' })));
      case 'close':
        this.life.touch();
        if (this.state === 'live') this.state = 'ending';
        return this.enqueue(async () => {
          this.engine.endAudio();
          this.engine.finalize('close', () => void this.endCleanly('client_close'));
        });
    }
  }

  // ---- ends

  // Idle means: no audio or keepalive from the client AND nothing left for the recognizer
  // (a client waiting for a slow final transcript is not idle). Keepalives count only within
  // maxSilenceMs of the last audio; other text messages do not count.
  private onIdle(): void {
    if (this.pendingSteps > 0 || this.extending || this.engine.finalizing) return this.life.touch();
    const message =
      this.o.clock.now() - this.lastAudioAt >= this.o.maxSilenceMs
        ? `No audio for ${this.o.maxSilenceMs / 1000} s (keepalives keep a session open only that long without audio).`
        : `No audio or keepalive for ${this.o.idleTimeoutMs / 1000} s.`;
    this.end(1000, 'idle_timeout', { code: 'idle_timeout', message });
  }

  private onMaxDuration(): void {
    if (this.state === 'live') this.state = 'ending';
    const error = { code: 'max_duration', message: `Sessions last at most ${MAX_SESSION_MS / 60_000} minutes; reconnect to continue.` };
    this.enqueue(async () => this.engine.finalize('close', () => void this.endCleanly('max_duration', error)));
  }

  /** A clean end: everything heard is transcribed and billed, then the session closes. */
  private async endCleanly(reason: string, error?: { code: string; message: string }): Promise<void> {
    await this.debit(true).catch((err: unknown) => this.o.log.warn({ err }, 'failed to bill an stt session'));
    this.end(1000, reason, error);
  }

  /** Ends the session: the error (if any) and `closed` are its last events, then the transport is closed with `code`. */
  private end(code: number, reason: string, error?: { code: string; message: string }): void {
    if (this.closed) return;
    this.state = 'closed';
    if (error) this.send({ type: 'error', code: error.code, message: error.message });
    // No audio counts after this; the end-of-session debit brings the ledger to exactly this cost,
    // including audio that arrived while the last debit was written.
    const millis = this.meter.receivedMillis;
    const costUsd = formatUsd(this.engineRefused ? 0n : this.meter.costMicros);
    this.send({ type: 'closed', reason, audioSeconds: millis / 1000, costUsd, clientRequested: reason === 'client_close' });
    this.outbox.close(code, reason);
    this.finish();
  }

  /** Bills what arrived, gives back the credit reserved beyond it, then frees the engine: nothing keeps running for a gone client. */
  private finish(): void {
    this.life.dispose();
    this.gone.abort();
    this.engine.detach();
    this.waiting.length = 0;
    this.waitingBytes = 0;
    void this.steps
      .catch(() => {})
      .then(() => this.debits)
      // No engine would take the audio (it refused us, or none had room): nothing to bill.
      .then(() => (this.engineRefused ? undefined : this.meter.debit(true)))
      .catch((err: unknown) => this.o.log.warn({ err }, 'failed to bill the end of an stt session'))
      .finally(() => {
        this.o.hold.release();
        this.engine.close();
        this.turns.close();
        this.billed();
      });
  }

  private send(event: SttEvent, options?: { droppable: boolean }): void {
    this.outbox.send(event, options);
  }
}
