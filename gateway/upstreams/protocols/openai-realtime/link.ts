// The socket to a Realtime engine, shared by the dialects: opening it (the handshake, the session
// configuration, the engine's confirmation, all within the call's deadline and signal), sending
// audio as `input_audio_buffer.append` events, and every way it can end as an UpstreamError.
import { floatToS16, s16leBytes, s16ToFloat } from '../../../audio/pcm.ts';
import { createResampler, type Resampler } from '../../../audio/resample.ts';
import { AsyncQueue } from '../../async-queue.ts';
import { UpstreamError, type StreamingTranscriptionOptions, type TranscriptionEvent, type Word } from '../../contract.ts';
import { engineFailure, redactKey } from '../../engine-http.ts';
import { closeError, connectEngine, type WebSocket } from '../../engine-ws.ts';
import { readInTurns, type ReadTurns } from '../../loop-turns.ts';
import type { SessionPlan } from './dialects.ts';

/**
 * Audio goes out in appends of at least this much: 10 ms, so the usual 20 ms client frames go out
 * as they come (a frame held back for the next one delays the engine's end of speech by a frame).
 */
const APPEND_MS = 10;
/** After close(), how long the engine gets to answer the closing handshake before the socket is cut. */
const CLOSE_GRACE_MS = 1000;

export type ServerEvent = Record<string, unknown> & { type?: unknown };

/** The message of an `error` event: OpenAI's `{error:{message,code,param}}` or vLLM's `{error:"…", code}`. */
export function eventError(event: ServerEvent): { message: string; code: string | null; param: string | null } {
  const error = event.error;
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  if (error && typeof error === 'object') {
    const e = error as Record<string, unknown>;
    return { message: str(e.message) ?? 'no message', code: str(e.code), param: str(e.param) };
  }
  return { message: str(error) ?? 'no message', code: str(event.code), param: null };
}

export function errorEventFailure(event: ServerEvent, apiKey: string | undefined, during: string): UpstreamError {
  const { message, param } = eventError(event);
  const engineMessage = redactKey(message, apiKey).slice(0, 500);
  return new UpstreamError('status', `The engine refused ${during}: ${engineMessage}`, { engineMessage, param });
}

/**
 * The words of a transcript spread evenly over the audio they were heard in. Realtime engines
 * give no word times (`completed` carries text, usage and at most logprobs), only the span of
 * the item's audio (server VAD's audio_start_ms → audio_end_ms, or what a commit covered): an
 * even spread keeps every word inside the audio it came from.
 */
export function spreadWords(text: string, startMs: number, endMs: number): Word[] {
  const tokens = text.split(/\s+/).filter(Boolean);
  const step = Math.max(0, endMs - startMs) / Math.max(1, tokens.length);
  const seconds = (ms: number) => Math.round(ms) / 1000;
  return tokens.map((word, i) => ({ word, start: seconds(startMs + i * step), end: seconds(startMs + (i + 1) * step) }));
}

export class EngineLink {
  readonly events = new AsyncQueue<TranscriptionEvent>();
  /** The dialect's handler of server events once the session is set up. */
  onEvent: (event: ServerEvent) => void = () => {};
  private closed = false;
  private readonly resampler: Resampler;
  private batch: Int16Array[] = [];
  private batchSamples = 0;
  private sentSamples = 0;
  private readonly minAppend: number;
  private owedAnswer: NodeJS.Timeout | null = null;
  /** Set while the session is being set up: a failure then rejects the opening. */
  whileOpening: ((error: UpstreamError) => void) | null = null;
  /** The engine's messages, in turns of the event loop, each to `receive`; its close after them. */
  private readonly reading: ReadTurns;

  constructor(
    private readonly socket: WebSocket,
    private readonly plan: SessionPlan,
    private readonly options: StreamingTranscriptionOptions,
    apiKey: string | undefined,
  ) {
    this.resampler = createResampler(options.sampleRate, plan.engineRate);
    this.minAppend = (plan.engineRate * APPEND_MS) / 1000;
    // A socket error (a bad frame, a reset) is followed by its close, which reports it.
    socket.on('error', () => {});
    // Messages come from I/O (or connectEngine's replay, a turn later): openLink sets onEvent before the first.
    this.reading = readInTurns(socket, (data, isBinary) => this.receive(data, isBinary));
    socket.on('close', (code, reason) =>
      this.reading.after(() => this.fail(closeError(code, reason, apiKey) ?? new UpstreamError('broken', 'The engine ended the session.'))),
    );
  }

  /** Audio sent to the engine so far, in ms of the session's audio. */
  get sentMs(): number {
    return (this.sentSamples * 1000) / this.plan.engineRate;
  }

  /** Samples (at the written rate) not yet on the wire: batched, or queued in the socket (base64 JSON, ~8/3 bytes a sample). */
  get pendingSamples(): number {
    const engineSamples = this.batchSamples + (this.socket.bufferedAmount * 3) / 8;
    return Math.round((engineSamples * this.options.sampleRate) / this.plan.engineRate);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  send(event: Record<string, unknown>): void {
    if (!this.closed) this.socket.send(JSON.stringify(event));
  }

  append(samples: Int16Array): void {
    if (this.closed || samples.length === 0) return;
    const out = this.options.sampleRate === this.plan.engineRate ? samples.slice() : floatToS16(this.resampler.push(s16ToFloat(samples)));
    this.batch.push(out);
    this.batchSamples += out.length;
    if (this.batchSamples >= this.minAppend) this.flush();
  }

  /** Sends what is batched (before a commit, so that the commit covers all audio written). */
  flush(): void {
    if (this.closed || this.batchSamples === 0) return;
    const pcm = Buffer.concat(this.batch.map(s16leBytes));
    this.sentSamples += this.batchSamples;
    this.batch = [];
    this.batchSamples = 0;
    this.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
  }

  /**
   * The engine owes an answer (a finalize): while it does, it may stay silent at most the call's
   * timeoutMs; every message from it restarts the wait.
   */
  expectAnswer(owed: boolean): void {
    if (this.owedAnswer) clearTimeout(this.owedAnswer);
    this.owedAnswer = null;
    if (!owed || this.closed) return;
    const seconds = this.options.timeoutMs / 1000;
    this.owedAnswer = setTimeout(
      () => this.fail(new UpstreamError('timeout', `The engine did not finish the utterance within ${seconds} s.`)),
      this.options.timeoutMs,
    );
  }

  /** Ends the stream with the engine's failure (after the events already queued). */
  fail(error: UpstreamError): void {
    if (this.closed) return;
    this.shut();
    this.events.end(error);
    this.whileOpening?.(error);
  }

  close(): void {
    if (this.closed) return;
    this.shut();
    this.events.end();
  }

  /** Handles one raw message from the socket. */
  private receive(data: Buffer, isBinary: boolean): void {
    if (this.closed || isBinary) return;
    let event: ServerEvent;
    try {
      event = JSON.parse(data.toString('utf8')) as ServerEvent;
    } catch {
      return this.fail(new UpstreamError('protocol', 'The engine sent a message that is not JSON.'));
    }
    if (event === null || typeof event !== 'object') return this.fail(new UpstreamError('protocol', 'The engine sent a message that is not a JSON object.'));
    if (this.owedAnswer) this.expectAnswer(true);
    this.onEvent(event);
  }

  private shut(): void {
    this.closed = true;
    this.expectAnswer(false);
    this.resampler.close();
    this.batch = [];
    this.batchSamples = 0;
    const socket = this.socket;
    this.reading.stop();
    socket.removeAllListeners('message');
    socket.removeAllListeners('close');
    if (socket.readyState === socket.CLOSED) return;
    socket.close(1000);
    const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
  }
}

/**
 * Connects, sends the session configuration and resolves once the engine confirmed it
 * (`plan.readyEvent`; without one, at once); from then on, server events go to the handler `make` built. An
 * `error` event instead rejects with the engine's message; so do a deadline (`timeout`), the
 * signal (its reason) and a close. The signal bounds the opening only: once open, close() ends
 * the stream (the gateway's call signal also carries the opening deadline).
 */
export async function openLink<T>(
  plan: SessionPlan,
  options: StreamingTranscriptionOptions,
  apiKey: string | undefined,
  make: (link: EngineLink) => T & { onEvent(event: ServerEvent): void },
): Promise<T> {
  const socket = await connectEngine(plan.url, { headers: plan.headers, apiKey }, options);
  const link = new EngineLink(socket, plan, options, apiKey);
  const stream = make(link);
  return new Promise<T>((resolve, reject) => {
    const settle = (error: unknown | null) => {
      clearTimeout(deadline);
      options.signal.removeEventListener('abort', onAbort);
      link.whileOpening = null;
      if (error === null) return resolve(stream);
      link.close();
      socket.terminate();
      reject(error);
    };
    const deadline = setTimeout(
      () => settle(new UpstreamError('timeout', `The engine did not set up the session within ${options.timeoutMs / 1000} s.`)),
      options.timeoutMs,
    );
    const onAbort = () => settle(engineFailure(options.signal.reason, options, false));
    options.signal.addEventListener('abort', onAbort, { once: true });
    if (options.signal.aborted) return onAbort();
    link.whileOpening = settle;
    const deliver = (event: ServerEvent) => stream.onEvent(event);
    link.onEvent =
      plan.readyEvent === null
        ? deliver
        : (event) => {
            if (event.type === 'error') return settle(errorEventFailure(event, apiKey, 'the session'));
            if (event.type !== plan.readyEvent) return;
            // Switched here, not after the promise settles: events in the same read must not be lost.
            link.onEvent = deliver;
            settle(null);
          };
    for (const message of plan.configure) link.send(message);
    if (plan.readyEvent === null) settle(null);
  });
}
