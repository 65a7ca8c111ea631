// One WS /tts/websocket session, Cartesia's TTS WebSocket protocol: JSON generation requests
// in, JSON events out, several contexts (one utterance each) in parallel on one socket.
//
// A context's text may arrive in pieces (`continue: true`, e.g. LLM tokens). It is cut into
// spans as soon as one can be spoken (gateway/tts/text-spans.ts: a sentence, a long enough
// clause, or the words waiting once `max_buffer_delay_ms` has passed), and each span goes
// through the same pipeline as POST /tts/sse (gateway/tts/synthesize.ts): dictionary, engine,
// conversion. A context's spans are synthesized one after the other, so its audio is sent in
// order; contexts run side by side.
//
// Metering: each span is paid for before its engine starts (its cost reserved in the session's
// CreditHold; none left: the session winds down and closes with 1008) and debited at its first
// audio, per character synthesized, like the HTTP streams. Text never synthesized (cancelled,
// whitespace or punctuation alone) is not billed.
import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import { randomBytes } from 'node:crypto';
import { perUnitCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { refuseNul } from '../../server/services/parse-input.ts';
import { createAudioConverter } from '../audio/convert.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { allChunks, billedCharacters, resolveTtsModel, resolveVoice, startEngine, type ResolvedVoice } from './synthesize.ts';
import { isSpeakable, takeSpans, takeWords } from './text-spans.ts';
import { parseTtsRequest, type TtsRequest } from './tts-request.ts';

export interface TtsSocketLimits {
  /** Nothing received and nothing being synthesized for this long: the socket is closed (Cartesia: 5 minutes). */
  idleMs: number;
  /** The longest a session lasts. */
  maxSessionMs: number;
  /** Contexts open at once on one socket. */
  maxContexts: number;
  /** Text a context holds that is not synthesized yet (code points): received, waiting to be cut or spoken. */
  maxPendingChars: number;
}

/**
 * Read when each session starts. Idle close as Cartesia documents it ("We close idle WebSocket
 * connections after 5 minutes", docs.cartesia.ai/use-the-api/concurrency-limits-and-timeouts).
 * Tests lower them; they are not settings of their own yet (server/config/env.ts would hold them).
 */
export const ttsSocketLimits: TtsSocketLimits = {
  idleMs: 5 * 60_000,
  maxSessionMs: 60 * 60_000,
  maxContexts: 16,
  maxPendingChars: 5000,
};

/** Cartesia's default when a request does not say (its API reference: 0-5000 ms, default 3000). */
export const DEFAULT_BUFFER_DELAY_MS = 3000;
/** Spans waiting behind a running one are spoken together up to this many code points (fewer engine calls, better prosody). */
const MAX_JOINED_CHARS = 1000;
/** Messages for a context still resolving its voice wait, up to this many. */
const MAX_EARLY_MESSAGES = 256;
/** Remembered ids of ended contexts: a cancel that comes after the end is not an error. */
const ENDED_IDS_KEPT = 256;
/** Audio not yet taken by the client beyond this: the relay waits (backpressure). */
const HIGH_WATER_BYTES = 1024 * 1024;
const PING_INTERVAL_MS = 20_000;

const codePoints = billedCharacters;
const optionalBool = (name: string) => z.boolean({ message: `${name} must be true or false` }).nullish();

/** The socket's own fields of a generation request (the rest is a TtsRequest, read at a context's first request). */
const ControlSchema = z.object({
  context_id: z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters').optional(),
  cancel: optionalBool('cancel'),
  continue: optionalBool('continue'),
  flush: optionalBool('flush'),
  add_timestamps: optionalBool('add_timestamps'),
  add_phoneme_timestamps: optionalBool('add_phoneme_timestamps'),
  use_normalized_timestamps: optionalBool('use_normalized_timestamps'),
  max_buffer_delay_ms: z.number().int('must be an integer').min(0, 'must be between 0 and 5000').max(5000, 'must be between 0 and 5000').nullish(),
  transcript: z
    .string()
    .refine((t) => codePoints(t) <= 5000, 'must be at most 5000 characters')
    .optional(),
});
type Control = z.infer<typeof ControlSchema>;

/** A span (with the flush_id of the part it belongs to), a flush, or the context's end. */
type Item = { kind: 'text'; text: string; chars: number; flushId: number } | { kind: 'flush'; id: number } | { kind: 'end' };

interface SocketContext {
  id: string;
  tts: TtsRequest;
  model: ModelEntry;
  voice: ResolvedVoice | null;
  /** Messages that came while the voice was being resolved, handled in order once it is. */
  early: Control[] | null;
  earlyChars: number;
  /** Text received but not cut into spans yet. */
  buffer: string;
  /** Code points received and not synthesized yet (buffer and queued spans). */
  pendingChars: number;
  delayMs: number;
  timer: NodeJS.Timeout | undefined;
  queue: Item[];
  running: boolean;
  /** `continue: false` received: nothing more will come. */
  ended: boolean;
  /** Removed from the session (done, error, cancel, session over): nothing more is sent for it. */
  gone: boolean;
  /** Cartesia's flush_id of the text now arriving: starts at 1, +1 per flush; carried by the chunks of that part. */
  flushId: number;
  /** The engine call of the span being synthesized. */
  call: AbortController | null;
  lastChunkAt: number;
  firstAudioSent: boolean;
}

export interface TtsSocketOptions {
  ctx: GatewayContext;
  auth: RequestAuth;
  /** The upgrade's request id: every debit of the session carries it. */
  requestId: string;
  /** Credit reserved for the spans being synthesized (extended span by span), released when the session is billed. */
  hold: CreditHold;
  limits: TtsSocketLimits;
  /** Aborted (reason: a ServiceError such as api_key_disabled) when the session must end at once. */
  revoked: AbortSignal;
  log: { warn(obj: unknown, msg: string): void; error(obj: unknown, msg: string): void };
}

interface SessionError {
  code: string;
  message: string;
  status: number;
  param?: string | null;
}

const fromServiceError = (e: ServiceError): SessionError => ({ code: e.code, message: e.message, status: ERROR_TABLE[e.code].status, param: e.param });

export function runTtsSocketSession(socket: WebSocket, o: TtsSocketOptions): void {
  new TtsSocketSession(socket, o).start();
}

class TtsSocketSession {
  private readonly contexts = new Map<string, SocketContext>();
  private readonly endedIds: string[] = [];
  private readonly endedIdSet = new Set<string>();
  /** Credit in the hold that no span has claimed yet (a span that failed before its debit gives its share back here). */
  private spare = 0n;
  /** Debits on their way: the session is billed once they are all written. */
  private readonly debits = new Set<Promise<unknown>>();
  private closed = false;
  /** The balance ran out: paid spans finish, then every context ends with insufficient_quota and the socket closes (1008). */
  private creditOut = false;
  private idle: NodeJS.Timeout | undefined;
  private maxLength: NodeJS.Timeout | undefined;
  private ping: NodeJS.Timeout | undefined;
  private billed: () => void = () => {};

  constructor(
    private readonly socket: WebSocket,
    private readonly o: TtsSocketOptions,
  ) {}

  start(): void {
    const { socket, o } = this;
    o.ctx.lifecycle.track(new Promise<void>((resolve) => (this.billed = resolve)));
    socket.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    socket.on('close', () => this.onSocketClose());
    socket.on('error', () => {});
    this.touch();
    this.maxLength = setTimeout(
      () =>
        this.close(1000, 'max_duration', {
          code: 'max_duration',
          status: 408,
          message: `Sessions last at most ${o.limits.maxSessionMs / 60_000} minutes; reconnect to continue.`,
        }),
      o.limits.maxSessionMs,
    );
    this.ping = setInterval(() => socket.readyState === socket.OPEN && socket.ping(), PING_INTERVAL_MS);
    const shutdown = o.ctx.lifecycle.streamsEnded;
    const onShutdown = () => {
      const reason = shutdown.reason as Partial<ServiceError> | undefined;
      this.close(1001, 'shutdown', {
        code: reason?.code ?? 'temporarily_unavailable',
        status: 503,
        message: reason?.message ?? 'The gateway is shutting down; reconnect.',
      });
    };
    const onRevoked = () => {
      const reason = isServiceError(o.revoked.reason) ? o.revoked.reason : new ServiceError('api_key_disabled', 'This API key has been disabled.');
      this.close(1008, reason.code, fromServiceError(reason));
    };
    if (shutdown.aborted) onShutdown();
    else shutdown.addEventListener('abort', onShutdown, { once: true });
    if (o.revoked.aborted) onRevoked();
    else o.revoked.addEventListener('abort', onRevoked, { once: true });
    socket.once('close', () => {
      shutdown.removeEventListener('abort', onShutdown);
      o.revoked.removeEventListener('abort', onRevoked);
    });
  }

  // ------------------------------------------------------------------------------------------
  // Events out

  private send(event: Record<string, unknown>): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(event));
  }

  /** Cartesia's error fields (type, error, title, message, error_code, status_code, done, context_id) and our envelope's (code, message, param). */
  private sendError(contextId: string | undefined, e: SessionError): void {
    this.send({
      type: 'error',
      ...(contextId === undefined ? {} : { context_id: contextId }),
      status_code: e.status,
      done: true,
      error: e.message,
      title: e.code,
      error_code: e.code,
      code: e.code,
      message: e.message,
      param: e.param ?? null,
      request_id: this.o.requestId,
    });
  }

  /** A chunk of a context's audio; waits while the client has not taken the megabyte before it. */
  private async sendChunk(c: SocketContext, audio: Buffer, flushId: number): Promise<void> {
    if (c.gone || this.socket.readyState !== this.socket.OPEN) return;
    const now = performance.now();
    const event = JSON.stringify({
      type: 'chunk',
      data: audio.toString('base64'),
      done: false,
      status_code: 206,
      step_time: Math.round(now - c.lastChunkAt),
      context_id: c.id,
      flush_id: flushId,
    });
    c.lastChunkAt = now;
    if (this.socket.bufferedAmount < HIGH_WATER_BYTES) return this.socket.send(event);
    // The callback runs once this message (and so all before it) is handed to the OS, or the socket closed.
    await new Promise<void>((resolve) => this.socket.send(event, () => resolve()));
  }

  // ------------------------------------------------------------------------------------------
  // Messages in

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    this.touch();
    if (isBinary) {
      this.sendError(undefined, {
        code: 'invalid_request',
        status: 400,
        message: 'Send generation requests as JSON text messages; this socket takes no binary frames.',
      });
      return;
    }
    const text = (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)).toString('utf8');
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      msg = undefined;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      this.sendError(undefined, {
        code: 'invalid_json',
        status: 400,
        message: 'Each message must be a JSON object: a generation request {"context_id", "transcript", "continue", ...} or {"context_id", "cancel": true}.',
      });
      return;
    }
    const rawId = (msg as { context_id?: unknown }).context_id;
    const knownId = typeof rawId === 'string' && rawId.length > 0 && rawId.length <= 256 ? rawId : undefined;
    let control: Control;
    try {
      refuseNul(msg);
      const parsed = ControlSchema.safeParse(msg);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        const param = issue.path.join('.') || null;
        throw new ServiceError('invalid_request', `${param ?? 'message'}: ${issue.message}`, param);
      }
      control = parsed.data;
    } catch (e) {
      // On an open context, a bad message ends it, as every error on a context does.
      const open = knownId === undefined ? undefined : this.contexts.get(knownId);
      return open ? this.fail(open, e) : this.failMessage(knownId, e);
    }
    if (control.cancel === true) return this.cancel(control.context_id);
    const id = control.context_id ?? `ctx_${randomBytes(8).toString('hex')}`;
    const existing = this.contexts.get(id);
    if (existing) return this.receive(existing, control);
    try {
      this.openContext(id, msg, control);
    } catch (e) {
      this.failMessage(id, e);
    }
  }

  /** A message refused before it opened a context: its error event (naming the context it meant to open, if it said). */
  private failMessage(contextId: string | undefined, e: unknown): void {
    const error = isServiceError(e) ? fromServiceError(e) : this.internal(e);
    this.sendError(contextId, error);
  }

  private internal(e: unknown): SessionError {
    this.o.log.error({ err: e }, 'tts websocket failed');
    return {
      code: 'internal_error',
      status: 500,
      message: 'The server had an error while processing this context. Retry once; if it persists, report the request id.',
    };
  }

  private openContext(id: string, msg: object, control: Control): void {
    if (this.creditOut) throw insufficientQuota();
    if (this.contexts.size >= this.o.limits.maxContexts) {
      throw new ServiceError(
        'rate_limit_exceeded',
        `This socket already has ${this.o.limits.maxContexts} contexts open; end one (continue: false) or cancel it first.`,
        'context_id',
      );
    }
    // The first request of a context carries its settings, checked as POST /tts/sse checks them.
    const tts = parseTtsRequest(msg, 'websocket');
    const model = resolveTtsModel(this.o.ctx, tts.modelId, 'tts.websocket');
    const c: SocketContext = {
      id,
      tts,
      model,
      voice: null,
      early: [],
      earlyChars: 0,
      buffer: '',
      pendingChars: 0,
      delayMs: control.max_buffer_delay_ms ?? DEFAULT_BUFFER_DELAY_MS,
      timer: undefined,
      queue: [],
      running: false,
      ended: false,
      gone: false,
      flushId: 1,
      call: null,
      lastChunkAt: performance.now(),
      firstAudioSent: false,
    };
    this.contexts.set(id, c);
    this.receive(c, control);
    resolveVoice(this.o.ctx, this.o.auth.orgId, model, tts, 'tts.websocket').then(
      (voice) => {
        if (c.gone) return;
        c.voice = voice;
        const early = c.early!;
        c.early = null;
        for (const m of early) if (!c.gone) this.apply(c, m);
        this.pump(c);
      },
      (e: unknown) => this.fail(c, e),
    );
  }

  /** A generation request on an open context (kept in order while its voice is being resolved). */
  private receive(c: SocketContext, control: Control): void {
    if (!c.early) return this.apply(c, control);
    c.earlyChars += codePoints(control.transcript ?? '');
    if (c.early.length >= MAX_EARLY_MESSAGES) {
      return this.fail(
        c,
        new ServiceError('invalid_request', `More than ${MAX_EARLY_MESSAGES} messages arrived for context '${c.id}' before it was ready.`, 'context_id'),
      );
    }
    if (c.earlyChars > this.o.limits.maxPendingChars) return this.fail(c, tooMuchText(this.o.limits.maxPendingChars));
    c.early.push(control);
  }

  /** The request's text joins the buffer; spans are cut; a flush or the end are queued after them; the runner is woken. */
  private apply(c: SocketContext, control: Control): void {
    if (this.creditOut) return this.fail(c, insufficientQuota());
    if (c.ended) {
      return this.fail(
        c,
        new ServiceError('invalid_request', `Context '${c.id}' already received its last input (continue: false); use a new context_id.`, 'context_id'),
      );
    }
    const text = control.transcript ?? '';
    const chars = codePoints(text);
    if (c.pendingChars + chars > this.o.limits.maxPendingChars) return this.fail(c, tooMuchText(this.o.limits.maxPendingChars));
    c.pendingChars += chars;
    if (control.max_buffer_delay_ms !== undefined && control.max_buffer_delay_ms !== null) c.delayMs = control.max_buffer_delay_ms;
    if (text && c.buffer === '') this.armDelay(c);
    c.buffer += text;
    if (control.flush === true) {
      this.cutAll(c);
      c.queue.push({ kind: 'flush', id: c.flushId });
      c.flushId++;
    }
    if (control.continue !== true) {
      this.cutAll(c);
      c.queue.push({ kind: 'end' });
      c.ended = true;
    } else if (control.flush !== true) this.cutSpans(c);
    this.pump(c);
  }

  private cancel(contextId: string | undefined): void {
    if (contextId === undefined) {
      return this.sendError(undefined, {
        code: 'invalid_request',
        status: 400,
        param: 'context_id',
        message: 'A cancel request needs the context_id of the context to cancel.',
      });
    }
    const c = this.contexts.get(contextId);
    if (c) return this.remove(c);
    // Ended already (done, or an error): a cancel that crossed the end is nothing to report.
    if (this.endedIdSet.has(contextId)) return;
    this.sendError(contextId, {
      code: 'not_found',
      status: 404,
      param: 'context_id',
      message: `No context '${contextId}' is open on this socket; nothing to cancel.`,
    });
  }

  // ------------------------------------------------------------------------------------------
  // Spans

  private queueSpan(c: SocketContext, span: string): void {
    if (!span) return;
    const chars = codePoints(span);
    if (isSpeakable(span)) c.queue.push({ kind: 'text', text: span, chars, flushId: c.flushId });
    // Whitespace or punctuation alone is not spoken, nor billed.
    else c.pendingChars -= chars;
  }

  /** The spans that can be spoken now; with no buffering asked (0 ms), every complete word too. */
  private cutSpans(c: SocketContext): void {
    const { spans, rest } = takeSpans(c.buffer);
    for (const s of spans) this.queueSpan(c, s);
    c.buffer = rest;
    if (c.delayMs === 0 && rest) {
      const words = takeWords(rest, false);
      this.queueSpan(c, words.span);
      c.buffer = words.rest;
    }
    if (spans.length > 0) this.armDelay(c);
    if (!c.buffer) this.disarmDelay(c);
  }

  /** Flush or end: everything buffered is one last span. */
  private cutAll(c: SocketContext): void {
    this.queueSpan(c, c.buffer);
    c.buffer = '';
    this.disarmDelay(c);
  }

  /** max_buffer_delay_ms after text starts waiting, the complete words waiting are spoken anyway. */
  private armDelay(c: SocketContext): void {
    this.disarmDelay(c);
    if (c.delayMs === 0) return;
    c.timer = setTimeout(() => {
      c.timer = undefined;
      if (c.gone || !c.buffer) return;
      const words = takeWords(c.buffer, true);
      this.queueSpan(c, words.span);
      c.buffer = words.rest;
      if (c.buffer) this.armDelay(c);
      this.pump(c);
    }, c.delayMs);
  }

  private disarmDelay(c: SocketContext): void {
    clearTimeout(c.timer);
    c.timer = undefined;
  }

  // ------------------------------------------------------------------------------------------
  // The runner: one per context, spans in order

  private pump(c: SocketContext): void {
    if (c.running || c.gone || c.voice === null) return;
    if (c.queue.length === 0 && !this.creditOut) return;
    c.running = true;
    void this.run(c).finally(() => {
      c.running = false;
      if (!c.gone && c.queue.length > 0) this.pump(c);
    });
  }

  private async run(c: SocketContext): Promise<void> {
    try {
      while (!c.gone && c.queue.length > 0) {
        const item = c.queue[0]!;
        if (item.kind === 'flush') {
          c.queue.shift();
          this.send({ type: 'flush_done', done: false, flush_done: true, flush_id: item.id, status_code: 200, context_id: c.id });
          continue;
        }
        if (item.kind === 'end') {
          c.queue.shift();
          this.send({ type: 'done', done: true, status_code: 200, context_id: c.id });
          this.remove(c);
          return;
        }
        if (this.creditOut) throw insufficientQuota();
        // Spans that waited behind the last one are spoken together.
        const flushId = item.flushId;
        let text = '';
        let chars = 0;
        while (c.queue[0]?.kind === 'text' && (chars === 0 || chars + c.queue[0].chars <= MAX_JOINED_CHARS)) {
          const next = c.queue.shift() as Extract<Item, { kind: 'text' }>;
          text += next.text;
          chars += next.chars;
        }
        await this.speak(c, text, chars, flushId);
      }
      // Open, nothing left it may say: a session out of credit ends it.
      if (!c.gone && this.creditOut) throw insufficientQuota();
    } catch (e) {
      this.fail(c, e);
    }
  }

  /** Reserves a span's cost: first from credit the session holds already, then by extending the hold. */
  private async reserve(cost: bigint): Promise<boolean> {
    const fromSpare = this.spare < cost ? this.spare : cost;
    this.spare -= fromSpare;
    const more = cost - fromSpare;
    let ok: boolean;
    try {
      ok = more === 0n || (await this.o.hold.extend(more));
    } catch (e) {
      this.spare += fromSpare;
      throw e;
    }
    if (!ok) this.spare += fromSpare;
    return ok;
  }

  private async speak(c: SocketContext, text: string, chars: number, flushId: number): Promise<void> {
    const { ctx } = this.o;
    const model = c.model;
    const cost = perUnitCostMicros(model.prices.picoPerChar, chars);
    const readyAt = performance.now();
    if (!(await this.reserve(cost))) {
      this.outOfCredit();
      throw insufficientQuota();
    }
    // Claimed until the debit takes it out of the hold; given back to `spare` if none comes.
    let claimed = true;
    const call = new AbortController();
    c.call = call;
    const timeoutMs = ctx.config.upstreamTimeoutMs;
    const deadline = setTimeout(() => call.abort(new DOMException('The engine call reached its deadline.', 'TimeoutError')), timeoutMs);
    const upstreamCall = { signal: call.signal, timeoutMs };
    try {
      if (c.gone || this.closed) return;
      const engine = await startEngine(ctx, model, c.voice!, c.tts, text, upstreamCall);
      // Cancelled (or the session ended) while the engine started: nothing was sent, nothing is billed.
      if (c.gone || this.closed) return;
      if (!c.firstAudioSent) ctx.metrics.firstOutput('tts_first_audio', model.id, (performance.now() - readyAt) / 1000);
      // Billed once its first audio is ready, as the HTTP streams are (whether or not the client
      // stays for the rest). The debit is written after the first chunk is sent (the credit is
      // reserved already, and no header waits for the balance) and awaited before the next span.
      claimed = false;
      c.pendingChars -= chars;
      let debit: Promise<void> | undefined;
      const startDebit = () => (debit ??= this.debit(c, cost, chars));
      const converter = createAudioConverter({ inputSampleRate: engine.sampleRate, output: c.tts.output, volume: c.tts.volume });
      let converted = false;
      try {
        for await (const pcm of allChunks({ ...engine, call: upstreamCall })) {
          if (c.gone) return;
          const out = converter.push(pcm);
          if (out.length) await this.sendChunk(c, out, flushId);
          startDebit();
        }
        converted = true;
        const tail = converter.end();
        if (tail.length) await this.sendChunk(c, tail, flushId);
        c.firstAudioSent = true;
      } finally {
        if (!converted) converter.close();
        await startDebit();
      }
    } catch (e) {
      if (c.gone || this.closed) return;
      throw e;
    } finally {
      clearTimeout(deadline);
      if (c.call === call) c.call = null;
      if (claimed) this.spare += cost;
    }
  }

  /** The debit of one span (settling its share of the hold); a zero balance after it winds the session down. */
  private debit(c: SocketContext, cost: bigint, characters: number): Promise<void> {
    const { ctx, auth, hold, requestId } = this.o;
    const written = ctx.core
      .charge(auth, requestId, cost, { modelId: c.model.id, modality: 'tts', route: 'tts.websocket', characters }, hold, cost)
      .then((remaining) => {
        if (remaining <= 0n) this.outOfCredit();
      });
    this.debits.add(written);
    void written.catch(() => {}).finally(() => this.debits.delete(written));
    return written;
  }

  // ------------------------------------------------------------------------------------------
  // Endings

  /** A context's error: its error event, and the context is over. */
  private fail(c: SocketContext, e: unknown): void {
    if (c.gone) return;
    const error = isServiceError(e) ? fromServiceError(e) : this.internal(e);
    // Engine failures are worth a line (internal errors were logged by internal()); the client's own mistakes are not.
    if (isServiceError(e) && ERROR_TABLE[e.code].status >= 500) this.o.log.warn({ err: e, code: error.code }, 'tts websocket context failed');
    this.sendError(c.id, error);
    this.remove(c);
  }

  /** Ends a context: its engine call is stopped, its text dropped; nothing more is sent for it. */
  private remove(c: SocketContext): void {
    if (c.gone) return;
    c.gone = true;
    this.disarmDelay(c);
    c.call?.abort();
    c.queue.length = 0;
    c.buffer = '';
    this.contexts.delete(c.id);
    this.endedIds.push(c.id);
    this.endedIdSet.add(c.id);
    if (this.endedIds.length > ENDED_IDS_KEPT) this.endedIdSet.delete(this.endedIds.shift()!);
    if (this.creditOut && this.contexts.size === 0) {
      this.close(1008, 'insufficient_quota');
    }
  }

  /**
   * The balance is spent: spans already paid for finish; every context then ends with
   * insufficient_quota (or done, if nothing unpaid was left), and the socket closes with 1008.
   */
  private outOfCredit(): void {
    if (this.creditOut || this.closed) return;
    this.creditOut = true;
    if (this.contexts.size === 0) return this.close(1008, 'insufficient_quota');
    for (const c of this.contexts.values()) this.pump(c);
  }

  private touch(): void {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.onIdle(), this.o.limits.idleMs);
  }

  private onIdle(): void {
    // Audio still being made is not idle.
    for (const c of this.contexts.values()) if (c.running || c.early) return this.touch();
    this.close(1000, 'idle_timeout', { code: 'idle_timeout', status: 408, message: `Nothing was sent on this socket for ${this.o.limits.idleMs / 1000} s.` });
  }

  /** Ends the session: an error event for each open context (when there is an error), then the close frame. */
  private close(code: number, reason: string, error?: SessionError): void {
    if (this.closed) return;
    this.closed = true;
    const open = [...this.contexts.values()];
    for (const c of open) {
      if (error) this.sendError(c.id, error);
      this.remove(c);
    }
    this.socket.close(code, reason.slice(0, 120));
  }

  private onSocketClose(): void {
    this.closed = true;
    clearTimeout(this.idle);
    clearTimeout(this.maxLength);
    clearInterval(this.ping);
    for (const c of [...this.contexts.values()]) this.remove(c);
    // Give back the credit no debit took, once every debit is written; nothing keeps running for a gone client.
    void Promise.allSettled([...this.debits])
      .then(() => this.o.hold.release())
      .finally(() => this.billed());
  }
}

const insufficientQuota = () =>
  new ServiceError('insufficient_quota', "The organization's credit ran out: this text cannot be paid for; add credits to continue.");
const tooMuchText = (max: number) =>
  new ServiceError(
    'transcript_too_long',
    `A context may hold at most ${max} characters not yet synthesized; send text no faster than it is spoken, or end the context and start another.`,
    'transcript',
  );
