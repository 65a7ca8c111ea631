// One streaming-transcription session over a WebSocket: audio frames in, JSON events out.
// The protocol is documented in docs/stt.md ("Streaming STT protocol"). Audio is decoded from the
// session's encoding, resampled to the engine's rate, written to the engine's transcription
// stream in order (gateway/upstreams/contract.ts), and metered as it arrives. Turns: an engine
// that finds them itself reports them; otherwise the gateway's turn detector finds pauses and
// finalizes each utterance. The engine (the costly part) is opened at the first audio, not at
// connect, and each next second of audio is paid for (reserved) before it is accepted.
import type { RawData, WebSocket } from 'ws';
import { decodeSamples } from '../audio/sample-encoding.ts';
import { floatToS16 } from '../audio/pcm.ts';
import { createResampler, type Resampler } from '../audio/resample.ts';
import type { Encoding } from '../audio/output-format.ts';
import { formatUsd } from '../../server/money.ts';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import type { CreditHold, RequestAuth, GatewayCore } from '../core/gateway-core.ts';
import { isServiceError } from '../../server/services/errors.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { UpstreamError, type TranscriptionStream, type Word } from '../upstreams/contract.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { TurnDetector, type TurnSettings } from './turn-detector.ts';
import { svcDialect, type FinalCause, type SttDialect } from './dialect.ts';

export const MAX_SESSION_MS = 60 * 60_000;
export const PING_INTERVAL_MS = 20_000;
/** Audio is debited every time this much more has arrived (and at the end). */
export const METER_EVERY_MS = 1_000;
/** Audio waiting for the recognizer beyond this means the client sends faster than real time can be processed. */
export const MAX_BACKLOG_SECONDS = 30;

export interface SessionOptions {
  sessionId: string;
  requestId: string;
  model: ModelEntry;
  sampleRate: number;
  encoding: Encoding;
  /** The gateway's turn detection (used unless the engine reports its own turns). */
  turns: TurnSettings;
  /** The protocol's events and commands (default: the gateway's own). */
  dialect?: SttDialect;
  /** The usage records' `route` (default: stt.websocket). */
  usageRoute?: string;
  auth: RequestAuth;
  core: GatewayCore;
  /**
   * Credit reserved for the session's audio: the route reserves the first metering interval
   * before the upgrade; the session reserves each next one before accepting its audio.
   */
  hold: CreditHold;
  /**
   * Opens the engine's stream at the session's first audio: the stream, the rate it takes, and
   * whether its own turns are reported (else the gateway's turn detector finalizes utterances).
   */
  openStream: () => Promise<OpenedStream>;
  /** An engine failure after the stream opened (metrics). */
  onEngineFailure?: (error: UpstreamError) => void;
  /** Aborted (reason: a ServiceError such as api_key_disabled) when the session must end at once. */
  revoked?: AbortSignal;
  log: { warn(obj: unknown, msg: string): void };
  /** No audio and no keepalive for this long: the session is closed (idle_timeout). */
  idleTimeoutMs: number;
  /** No audio for this long: closed even if keepalives keep coming (an open session is not free to hold). */
  maxSilenceMs: number;
  /** How long the engine may stay silent (for the timeout error's message). */
  engineTimeoutMs: number;
  /** Aborted when a shutdown's grace period is over: the session closes with 1001; the reason is the error to show. */
  shutdown?: AbortSignal;
  /** Handed the session's lifetime up to its last debit, so a shutdown waits for it before closing the database. */
  track?: (untilBilled: Promise<void>) => void;
  /** Seconds from the first audio received to the first transcript sent (metrics). */
  onFirstTranscript?: (seconds: number) => void;
}

export interface OpenedStream {
  stream: TranscriptionStream;
  engineRate: number;
  engineTurns: boolean;
  /** Run when the session ends (releases what opening took). */
  release?: () => void;
}

export function runSttSession(socket: WebSocket, o: SessionOptions): void {
  let engine: OpenedStream | null = null;
  let resampler: Resampler | null = null;
  const dialect = o.dialect ?? svcDialect;
  const turns = new TurnDetector(o.sampleRate, o.turns);
  /** The finalizes asked of the engine, in order: why, and what runs once the engine reports it done. */
  const afterFinalized: { cause: FinalCause; then: () => void }[] = [];
  const bytesPerSample = o.encoding === 'pcm_f32le' ? 4 : o.encoding === 'pcm_s16le' ? 2 : 1;
  let carry: Buffer = Buffer.alloc(0);
  let queue: Promise<void> = Promise.resolve();
  /** Audio accepted but not yet written to the engine (it waits while the engine opens). */
  let queuedSamples = 0;
  // Counted in samples (exact); milliseconds are derived from it.
  let receivedSamples = 0;
  const receivedMillis = () => Math.round((receivedSamples * 1000) / o.sampleRate);
  const owedFor = (millis: number) => perSecondCostMicros(o.model.prices.picoPerSecond, millis);
  let billedMicros = 0n;
  let meteredMs = 0;
  /** Audio already in a usage record (its sum over the records is the whole audio billed). */
  let recordedMs = 0;
  let lastPartial = '';
  let closed = false;
  /** The session is ending cleanly (close, max duration): audio that comes after is not taken. */
  let closing = false;
  /** No engine would take the audio (it refused us, or none had room) while the session was live: nothing is billed. */
  let engineRefused = false;
  const started = Date.now();
  let lastAudioAt = performance.now();

  // Audio is accepted only as far as reserved credit covers it (`coveredSamples`); frames past
  // that wait, in order, while the next interval is reserved (none: the session ends, 1008).
  // Commands sent after such frames wait behind them (a finalize applies to all audio before it).
  const intervalMicros = owedFor(METER_EVERY_MS);
  const intervalSamples = (o.sampleRate * METER_EVERY_MS) / 1000;
  let coveredSamples = intervalMicros === 0n ? Infinity : intervalSamples;
  const waiting: (Buffer | string)[] = [];
  let waitingBytes = 0;
  let extending = false;
  const maxBacklogBytes = MAX_BACKLOG_SECONDS * o.sampleRate * bytesPerSample;

  const send = (events: object[]) => {
    for (const event of events) if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(event));
  };
  let firstAudioAt: number | undefined;
  let firstTranscriptSent = false;
  const sendTranscript = (t: { text: string; words: Word[] }, isFinal: boolean) => {
    if (!firstTranscriptSent && firstAudioAt !== undefined) {
      firstTranscriptSent = true;
      o.onFirstTranscript?.((performance.now() - firstAudioAt) / 1000);
    }
    send(
      dialect.transcript({
        text: t.text,
        words: t.words,
        isFinal,
        cause: isFinal ? afterFinalized[0]?.cause : undefined,
        audioSeconds: receivedMillis() / 1000,
      }),
    );
  };
  let billed: () => void = () => {};
  o.track?.(new Promise<void>((resolve) => (billed = resolve)));

  const close = (code: number, reason: string, error?: { code: string; message: string }) => {
    if (closed) return;
    closed = true;
    if (error) send(dialect.error(error));
    // No audio counts after this; the end-of-session debit (socket 'close') brings the ledger
    // to exactly this cost, including audio that arrived while the last debit was written.
    const millis = receivedMillis();
    const costUsd = formatUsd(engineRefused ? 0n : owedFor(millis));
    send(dialect.closed({ reason, audioSeconds: millis / 1000, costUsd, clientRequested: reason === 'client_close' }));
    socket.close(code, reason.slice(0, 120));
  };

  /** Debits the audio received since the last debit (exact: cumulative pico-USD, rounded up once). */
  const meter = async (force: boolean) => {
    const millis = receivedMillis();
    if (!force && millis - meteredMs < METER_EVERY_MS) return;
    meteredMs = millis;
    const owed = owedFor(millis);
    const delta = owed - billedMicros;
    if (delta <= 0n) return;
    billedMicros = owed;
    const audioMillis = millis - recordedMs;
    recordedMs = millis;
    const remaining = await o.core.charge(
      o.auth,
      o.requestId,
      delta,
      { modelId: o.model.id, modality: 'stt', route: o.usageRoute ?? 'stt.websocket', audioMillis },
      o.hold,
      delta,
    );
    if (remaining <= 0n && !closed) {
      close(1008, 'insufficient_quota', {
        code: 'insufficient_quota',
        message: `The organization's credit ran out (balance ${formatUsd(remaining)} USD); add credits to continue.`,
      });
    }
  };

  /** The engine's events, as client events, until its stream ends. */
  const relay = async (opened: OpenedStream) => {
    try {
      for await (const event of opened.stream.events) {
        if (closed) continue;
        switch (event.type) {
          case 'transcript':
            if (event.isFinal) {
              lastPartial = '';
              if (event.text) sendTranscript(event, true);
            } else if (event.text && event.text !== lastPartial) {
              lastPartial = event.text;
              turns.hint(event.text);
              sendTranscript(event, false);
            }
            break;
          case 'speech_started':
            if (opened.engineTurns) send(dialect.turn({ type: 'turn.start', atSeconds: event.atSeconds }));
            break;
          case 'end_of_turn':
            if (opened.engineTurns) send(dialect.turn({ type: 'turn.end', atSeconds: event.atSeconds }));
            break;
          case 'finalized':
            afterFinalized.shift()?.then();
            break;
        }
      }
      // The engine ended the stream by itself while the session goes on.
      if (!closed) throw new UpstreamError('broken', 'The engine ended the transcription stream.');
    } catch (err) {
      if (closed) return;
      if (err instanceof UpstreamError) o.onEngineFailure?.(err);
      fail(err);
    }
  };

  /** The engine's stream, opened at the first audio (steps run in order, so it is opened once). */
  const openEngine = async (): Promise<OpenedStream> => {
    if (engine) return engine;
    const opened = await o.openStream();
    engine = opened;
    if (opened.engineRate !== o.sampleRate) resampler = createResampler(o.sampleRate, opened.engineRate);
    // Closed while it opened: free it now (the socket's close handler ran before it existed).
    if (closed && socketClosed) closeEngine();
    else void relay(opened);
    return opened;
  };

  const closeEngine = () => {
    engine?.stream.close();
    engine?.release?.();
  };

  /** Runs `fn` once the finalizes asked for so far are done (a new turn.start after the last turn.end). */
  const afterPendingFinals = (fn: () => void) => {
    const last = afterFinalized.length - 1;
    if (last < 0) return fn();
    const entry = afterFinalized[last]!;
    const before = entry.then;
    entry.then = () => {
      before();
      fn();
    };
  };

  /**
   * Ends the current utterance; `then` runs once the engine reported its final transcript (in
   * order with earlier finalizes). Audio after it goes on to the engine at once (a new utterance).
   */
  const finalize = (cause: FinalCause, then: () => void) => {
    // Nothing was heard yet: nothing to finalize (and no engine to open for it).
    if (!engine) return then();
    afterFinalized.push({ cause, then });
    engine.stream.finalize();
  };

  // Work for the recognizer runs in arrival order; while any is pending the session is not idle.
  let pendingSteps = 0;
  const enqueue = (step: () => Promise<void>) => {
    pendingSteps++;
    queue = queue.then(step).finally(() => {
      pendingSteps--;
    });
    queue.catch(fail);
  };

  const samplesIn = (frame: Buffer) => Math.floor((carry.length + frame.length) / bytesPerSample);
  const covered = (frame: Buffer) => receivedSamples + samplesIn(frame) <= coveredSamples;

  const backlogError = () =>
    close(1013, 'backlog', {
      code: 'backlog',
      message: `More than ${MAX_BACKLOG_SECONDS} s of audio is waiting for the recognizer; send audio no faster than real time.`,
    });

  const acceptAudio = (frame: Buffer) => {
    if (waiting.length === 0 && covered(frame)) return handleAudio(frame);
    waiting.push(frame);
    waitingBytes += frame.length;
    if (waitingBytes > maxBacklogBytes) return backlogError();
    void extendCoverage();
  };

  /** Reserves interval after interval until the waiting frames are covered, handling them in order. */
  const extendCoverage = async () => {
    if (extending) return;
    extending = true;
    try {
      while (waiting.length > 0 && !closed) {
        const frame = waiting[0]!;
        if (typeof frame === 'string') {
          waiting.shift();
          waitingBytes -= frame.length;
          handleCommand(frame);
          continue;
        }
        if (!covered(frame)) {
          if (!(await o.hold.extend(intervalMicros))) {
            if (!closed)
              close(1008, 'insufficient_quota', {
                code: 'insufficient_quota',
                message: "The organization's credit ran out: the next second of audio cannot be paid for; add credits to continue.",
              });
            return;
          }
          coveredSamples += intervalSamples;
          continue;
        }
        waiting.shift();
        waitingBytes -= frame.length;
        handleAudio(frame);
      }
    } catch (err) {
      fail(err);
    } finally {
      extending = false;
    }
  };

  const handleAudio = (frame: Buffer) => {
    if (closing) return;
    const bytes: Buffer = carry.length ? Buffer.concat([carry, frame]) : frame;
    const usable = bytes.length - (bytes.length % bytesPerSample);
    carry = bytes.subarray(usable);
    if (usable === 0) return;
    const input = decodeSamples(bytes.subarray(0, usable), o.encoding);
    firstAudioAt ??= performance.now();
    receivedSamples += input.length;
    queuedSamples += input.length;
    if (queuedSamples / o.sampleRate > MAX_BACKLOG_SECONDS) return backlogError();
    enqueue(async () => {
      if (closed) return;
      let opened: OpenedStream;
      try {
        opened = await openEngine();
      } catch (err) {
        // Refused while the session was live (not cut short by its own end: that audio is billed as always).
        if (!closed) engineRefused = true;
        throw err;
      }
      if (closed) return;
      queuedSamples -= input.length;
      opened.stream.write(floatToS16(resampler ? resampler.push(input) : input));
      if (opened.stream.pendingSamples / opened.engineRate > MAX_BACKLOG_SECONDS) return backlogError();
      if (!opened.engineTurns) {
        const found = await turns.push(input);
        if (closed) return;
        for (const t of found) {
          if (t.type === 'turn.end') finalize('turn', () => send(dialect.turn(t)));
          // What was heard so far goes with an eager end: an agent may start its answer on it.
          else if (t.type === 'turn.eager_end') afterPendingFinals(() => send(dialect.turn({ ...t, transcript: lastPartial })));
          else afterPendingFinals(() => send(dialect.turn(t)));
        }
      }
      await meter(false);
    });
  };

  const fail = (err: unknown) => {
    const error = err instanceof UpstreamError ? upstreamEnvelope(err, o.engineTimeoutMs) : err;
    // The server has no recognizer to spare: the client may retry (1013 "try again later").
    if (isServiceError(error) && error.code === 'temporarily_unavailable') return close(1013, 'capacity', { code: error.code, message: error.message });
    o.log.warn({ err }, 'stt session failed');
    if (isServiceError(error)) {
      // The engine refused or failed: its message (never its key) tells the client why.
      return close(1011, 'engine_error', { code: error.code, message: `${error.message} Reconnect to start a new session.` });
    }
    close(1011, 'engine_error', { code: 'upstream_error', message: 'The speech recognizer failed; reconnect to start a new session.' });
  };

  const handleCommand = (text: string) => {
    const command = dialect.command(text);
    if ('error' in command) return send(dialect.error(command.error));
    if (command.type === 'keepalive') {
      // Keeps a quiet session open, but not forever without audio (maxSilenceMs).
      if (performance.now() - lastAudioAt < o.maxSilenceMs) touch();
      return;
    }
    // New turn settings apply from the audio after the message (in order with the audio before it).
    if (command.type === 'configure') return enqueue(async () => turns.configure(command.turns));
    touch();
    if (command.type === 'finalize') return enqueue(async () => finalize('finalize', () => send(dialect.flushed())));
    closing = true;
    enqueue(async () => {
      // The resampler's last samples (its filter delay) go to the engine too: no audio is left out.
      if (engine && resampler) engine.stream.write(floatToS16(resampler.end()));
      resampler = null;
      finalize('close', () => void endSession('client_close'));
    });
  };

  // Idle means: no audio or keepalive from the client AND nothing left for the recognizer
  // (a client waiting for a slow final transcript is not idle). Keepalives count only within
  // maxSilenceMs of the last audio; other text messages do not count.
  const onIdle = () => {
    if (pendingSteps > 0 || extending || afterFinalized.length > 0) return touch();
    const silentFor = performance.now() - lastAudioAt;
    const message =
      silentFor >= o.maxSilenceMs
        ? `No audio for ${o.maxSilenceMs / 1000} s (keepalives keep a session open only that long without audio).`
        : `No audio or keepalive for ${o.idleTimeoutMs / 1000} s.`;
    close(1000, 'idle_timeout', { code: 'idle_timeout', message });
  };
  let idle = setTimeout(onIdle, o.idleTimeoutMs);
  const touch = () => {
    clearTimeout(idle);
    idle = setTimeout(onIdle, o.idleTimeoutMs);
  };
  /** A clean end: everything heard is transcribed, billed, then the socket closes. */
  const endSession = async (reason: string, error?: { code: string; message: string }) => {
    await meter(true).catch((err: unknown) => o.log.warn({ err }, 'failed to bill an stt session'));
    close(1000, reason, error);
  };
  const maxLength = setTimeout(() => {
    closing = true;
    enqueue(async () =>
      finalize(
        'close',
        () =>
          void endSession('max_duration', {
            code: 'max_duration',
            message: `Sessions last at most ${MAX_SESSION_MS / 60_000} minutes; reconnect to continue.`,
          }),
      ),
    );
  }, MAX_SESSION_MS);
  const ping = setInterval(() => socket.readyState === socket.OPEN && socket.ping(), PING_INTERVAL_MS);
  // 1001 "going away": the client should reconnect (to another replica). Audio received so
  // far is billed on close, as for any other ending.
  const onShutdown = () => {
    const reason = o.shutdown?.reason as { code?: string; message?: string } | undefined;
    close(1001, 'shutdown', { code: reason?.code ?? 'temporarily_unavailable', message: reason?.message ?? 'The gateway is shutting down; reconnect.' });
  };

  // The key was revoked (or the session must end for another reason the gateway names).
  const onRevoked = () => {
    const reason = o.revoked?.reason as { code?: string; message?: string } | undefined;
    close(1008, reason?.code ?? 'api_key_disabled', {
      code: reason?.code ?? 'api_key_disabled',
      message: reason?.message ?? 'This API key has been disabled.',
    });
  };

  const onMessage = (data: RawData, isBinary: boolean) => {
    if (closed) return;
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (isBinary) {
      // Only frames that complete a sample are audio: empty frames keep nothing open.
      if (samplesIn(buf) > 0) {
        lastAudioAt = performance.now();
        touch();
      }
      acceptAudio(buf);
    } else if (waiting.length > 0) {
      waiting.push(buf.toString('utf8'));
      waitingBytes += buf.length;
      if (waitingBytes > maxBacklogBytes) backlogError();
    } else handleCommand(buf.toString('utf8'));
  };
  let socketClosed = false;
  socket.on('message', onMessage);
  socket.on('close', () => {
    closed = true;
    socketClosed = true;
    clearTimeout(idle);
    clearTimeout(maxLength);
    clearInterval(ping);
    o.shutdown?.removeEventListener('abort', onShutdown);
    o.revoked?.removeEventListener('abort', onRevoked);
    waiting.length = 0;
    // Bill what arrived, give back the credit reserved beyond it, then free the decoder;
    // nothing keeps running for a gone client.
    void queue
      .catch(() => {})
      // No engine would take the audio (it refused us, or none had room): nothing to bill.
      .then(() => (engineRefused ? undefined : meter(true)))
      .catch((err: unknown) => o.log.warn({ err }, 'failed to bill the end of an stt session'))
      .finally(() => {
        o.hold.release();
        closeEngine();
        resampler?.close();
        turns.close();
        billed();
      });
  });
  socket.on('error', () => {});

  send(
    dialect.started({
      sessionId: o.sessionId,
      requestId: o.requestId,
      model: o.model.id,
      sampleRate: o.sampleRate,
      encoding: o.encoding,
      turns: o.turns,
      idleTimeoutSeconds: o.idleTimeoutMs / 1000,
      maxSessionSeconds: MAX_SESSION_MS / 1000,
      startedAt: new Date(started),
    }),
  );
  if (o.shutdown?.aborted) onShutdown();
  else o.shutdown?.addEventListener('abort', onShutdown, { once: true });
  if (o.revoked?.aborted) onRevoked();
  else o.revoked?.addEventListener('abort', onRevoked, { once: true });
}
