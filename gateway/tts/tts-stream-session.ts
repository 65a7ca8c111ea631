// A streaming TTS session, whatever carries it: contexts (one utterance each, several side by
// side), text in (TtsCommand), audio and the contexts' progress out (TtsEvent) through an Outbox.
// WS /tts/websocket (gateway/routes/tts-websocket.ts) binds it to a socket with Cartesia's wire
// shapes; a test drives it with an in-memory outbox.
//
// Each context's text goes to its own span speaker (span-speaker.ts) once its voice is
// resolved: cut into spans as soon as one can be spoken, each span through the pipeline of
// POST /tts/sse, its audio out in order. The life cycle (idle, maximum duration, shutdown, the
// key's revocation) is the shared one (gateway/sessions/session-life.ts), on the gateway's clock.
//
// Metering: the session's spans are paid from one CreditHold (span-credit.ts), each reserved
// before its engine starts and debited at its first audio, per character synthesized. Once the
// balance is spent, paid spans finish, every context then ends (insufficient_quota, or done if
// nothing unpaid was left) and the session closes with 1008.
import { randomBytes } from 'node:crypto';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { SessionLife, type SessionLimits } from '../sessions/session-life.ts';
import { ContextFirstOutputs, SessionFirstOutputs } from './first-outputs.ts';
import { SpanCredit } from './span-credit.ts';
import { SpanSpeaker } from './span-speaker.ts';
import { billedCharacters, resolveTtsModel, resolveVoice, type ResolvedVoice } from './synthesize.ts';
import type { TtsRequest } from './tts-request.ts';

export interface TtsSessionLimits extends SessionLimits {
  /** Contexts open at once in one session. */
  maxContexts: number;
  /** Text a context holds that is not synthesized yet (code points): received, waiting to be cut or spoken. */
  maxPendingChars: number;
}

/**
 * Read when each session starts. Idle close as Cartesia documents it ("We close idle WebSocket
 * connections after 5 minutes", docs.cartesia.ai/use-the-api/concurrency-limits-and-timeouts).
 * Tests lower them; they are not settings of their own yet (server/config/env.ts would hold them).
 */
export const ttsSessionLimits: TtsSessionLimits = {
  idleMs: 5 * 60_000,
  maxDurationMs: 60 * 60_000,
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
/** Voices resolved on one socket (by model, voice and dictionary), the most recent kept. */
const VOICES_KEPT = 16;
/**
 * How long a socket uses a voice (and dictionary) it resolved before it looks it up again: a
 * voice deleted, re-prepared or a dictionary edited meanwhile is seen by contexts opened after
 * that. Each lookup is a database read, too costly to make for every context of a busy socket.
 */
export const VOICE_KEPT_MS = 30_000;

/** A context's text, as one generation request carries it. */
export interface TtsInput {
  transcript: string;
  /** More text follows (false: this is the context's last input). */
  continue: boolean;
  /** What waits is spoken now; a `flushed` event follows its audio. */
  flush: boolean;
  /** A new max_buffer_delay_ms from now on. */
  maxBufferDelayMs: number | undefined;
}

/** What the session is told, as the transport's adapter parsed it. */
export type TtsCommand =
  /** Text for a context (opening it, with `settings`, when it is not open); no id: a new context of its own. */
  | { type: 'generate'; contextId: string | undefined; input: TtsInput; settings: () => TtsRequest }
  | { type: 'cancel'; contextId: string | undefined }
  /** A message the adapter refused: its error, on the context it named if that is open. */
  | { type: 'invalid'; contextId: string | undefined; error: unknown };

export interface TtsError {
  code: string;
  message: string;
  status: number;
  param: string | null;
}

/** What the session sends. `part`: Cartesia's flush_id, 1 and then one more after each flush. */
export type TtsEvent =
  | { type: 'audio'; contextId: string; audio: Buffer; part: number; stepMs: number }
  | { type: 'flushed'; contextId: string; part: number }
  | { type: 'done'; contextId: string }
  | { type: 'error'; contextId: string | undefined; error: TtsError };

export interface TtsStreamSessionOptions {
  ctx: GatewayContext;
  auth: RequestAuth;
  /** Every debit of the session carries it. */
  requestId: string;
  /** The usage rows' route (default tts.websocket): each vendor's socket is counted under its own. */
  route?: string;
  /** Credit reserved for the spans being synthesized (extended span by span), released once the session is billed. */
  hold: CreditHold;
  limits: TtsSessionLimits;
  outbox: Outbox<TtsEvent>;
  /** Aborted (reason: a ServiceError such as api_key_disabled) when the session must end at once. */
  revoked: AbortSignal;
  log: { warn(obj: unknown, msg: string): void; error(obj: unknown, msg: string): void };
  /** When the request (the upgrade) arrived, on performance.now(): the request log's firstAudioMs and firstAudibleMs count from it. */
  arrivedAt?: number;
}

/**
 * resolving: its voice is being resolved (inputs wait in `early`); open: its speaker takes text;
 * ended: its last input came (continue: false), what is left is being spoken; gone: removed from
 * the session (done, error, cancel, session over), nothing more is sent for it.
 */
type ContextState = 'resolving' | 'open' | 'ended' | 'gone';

interface StreamContext {
  id: string;
  state: ContextState;
  tts: TtsRequest;
  model: ModelEntry;
  /** Speaks the context's text once its voice is resolved. */
  speaker: SpanSpeaker | null;
  /** Inputs that came while the voice was being resolved, applied in order once it is. */
  early: TtsInput[];
  earlyChars: number;
  delayMs: number;
  lastChunkAt: number;
  /** Its first audio and first audible sample (metrics, and the session's log row). */
  firstOutputs: ContextFirstOutputs;
}

/** open: takes commands; closing: the session asked its transport to close; closed: the transport is gone. */
export type TtsSessionState = 'open' | 'closing' | 'closed';

const fromServiceError = (e: ServiceError): TtsError => ({ code: e.code, message: e.message, status: ERROR_TABLE[e.code].status, param: e.param });

export class TtsStreamSession {
  private current: TtsSessionState = 'open';
  private readonly contexts = new Map<string, StreamContext>();
  private readonly endedIds: string[] = [];
  private readonly endedIdSet = new Set<string>();
  /** The voices resolved on this socket, by model, voice and dictionary, each kept VOICE_KEPT_MS. */
  private readonly voices = new Map<string, { voice: Promise<ResolvedVoice>; at: number }>();
  private readonly credit: SpanCredit;
  private readonly life: SessionLife;
  private billed: () => void = () => {};
  private readonly firstOutputs: SessionFirstOutputs;

  constructor(private readonly o: TtsStreamSessionOptions) {
    const { ctx, limits } = o;
    ctx.lifecycle.track(new Promise<void>((resolve) => (this.billed = resolve)));
    this.firstOutputs = new SessionFirstOutputs(ctx, () => this.logRef, o.arrivedAt);
    this.credit = new SpanCredit({
      ctx,
      auth: o.auth,
      requestId: o.requestId,
      hold: o.hold,
      refusal: () => o.hold.refusal(OUT_OF_CREDIT),
      onBalance: (remaining) => remaining <= 0n && this.outOfCredit(),
      onRefused: () => this.outOfCredit(),
    });
    this.life = new SessionLife(
      ctx.clock,
      limits,
      { shutdown: ctx.lifecycle.streamsEnded, revoked: o.revoked },
      {
        idle: () => this.onIdle(),
        maxDuration: () =>
          this.close(1000, 'max_duration', {
            code: 'max_duration',
            status: 408,
            message: `Sessions last at most ${limits.maxDurationMs / 60_000} minutes; reconnect to continue.`,
            param: null,
          }),
        shutdown: (e) => this.close(1001, 'shutdown', { ...fromServiceError(e), status: 503 }),
        revoked: (e) => this.close(1008, e.code, fromServiceError(e)),
      },
    );
  }

  private get route(): string {
    return this.o.route ?? 'tts.websocket';
  }

  private get logRef() {
    return { orgId: this.o.auth.orgId, requestId: this.o.requestId };
  }

  get state(): TtsSessionState {
    return this.current;
  }

  // ------------------------------------------------------------------------------------------
  // Commands in

  receive(command: TtsCommand): void {
    if (this.current !== 'open') return;
    this.life.touch();
    if (command.type === 'invalid') {
      // On an open context, a bad message ends it, as every error on a context does.
      const open = command.contextId === undefined ? undefined : this.contexts.get(command.contextId);
      return open ? this.fail(open, command.error) : this.failMessage(command.contextId, command.error);
    }
    if (command.type === 'cancel') return this.cancel(command.contextId);
    const id = command.contextId ?? `ctx_${randomBytes(8).toString('hex')}`;
    const existing = this.contexts.get(id);
    if (existing) return this.receiveInput(existing, command.input);
    try {
      this.openContext(id, command);
    } catch (e) {
      this.failMessage(id, e);
    }
  }

  /** The transport is gone (whoever closed it): nothing more runs; the session is billed once every debit is written. */
  transportClosed(): void {
    if (this.current === 'closed') return;
    this.current = 'closed';
    this.life.dispose();
    for (const c of [...this.contexts.values()]) this.remove(c);
    // Give back the credit no debit took; nothing keeps running for a gone client.
    void this.credit.settle().finally(() => this.billed());
  }

  private sendError(contextId: string | undefined, error: TtsError): void {
    this.o.outbox.send({ type: 'error', contextId, error });
  }

  /** A message refused before it opened a context: its error event (naming the context it meant to open, if it said). */
  private failMessage(contextId: string | undefined, e: unknown): void {
    this.sendError(contextId, isServiceError(e) ? fromServiceError(e) : this.internal(e));
  }

  private internal(e: unknown): TtsError {
    this.o.log.error({ err: e }, 'tts websocket failed');
    return {
      code: 'internal_error',
      status: 500,
      message: 'The server had an error while processing this context. Retry once; if it persists, report the request id.',
      param: null,
    };
  }

  private openContext(id: string, command: Extract<TtsCommand, { type: 'generate' }>): void {
    const { ctx, auth, limits } = this.o;
    if (this.credit.exhausted) throw this.credit.refusal();
    if (this.contexts.size >= limits.maxContexts) {
      throw new ServiceError(
        'rate_limit_exceeded',
        `This socket already has ${limits.maxContexts} contexts open; end one (continue: false) or cancel it first.`,
        'context_id',
      );
    }
    // The first request of a context carries its settings, checked as POST /tts/sse checks them.
    const tts = command.settings();
    const model = resolveTtsModel(ctx, tts.modelId, this.route, auth);
    const c: StreamContext = {
      id,
      state: 'resolving',
      tts,
      model,
      speaker: null,
      early: [],
      earlyChars: 0,
      delayMs: command.input.maxBufferDelayMs ?? DEFAULT_BUFFER_DELAY_MS,
      lastChunkAt: performance.now(),
      firstOutputs: new ContextFirstOutputs(this.firstOutputs, model.id, tts.output.encoding ?? 'pcm_s16le', tts.output.sampleRate),
    };
    this.contexts.set(id, c);
    this.receiveInput(c, command.input);
    this.voiceFor(model, tts).then(
      (voice) => {
        if (c.state === 'gone') return;
        c.speaker = this.speakerFor(c, voice);
        c.state = 'open';
        const early = c.early.splice(0);
        for (const input of early) this.apply(c, input);
      },
      (e: unknown) => this.fail(c, e),
    );
  }

  private voiceFor(model: ModelEntry, tts: TtsRequest): Promise<ResolvedVoice> {
    const key = JSON.stringify([model.id, tts.voiceId, tts.dictId]);
    const cached = this.voices.get(key);
    const now = this.o.ctx.clock.now();
    if (cached && now - cached.at <= VOICE_KEPT_MS) return cached.voice;
    this.voices.delete(key);
    if (this.voices.size >= VOICES_KEPT) this.voices.delete(this.voices.keys().next().value!);
    const entry = { voice: resolveVoice(this.o.ctx, this.o.auth.orgId, model, tts, this.route), at: now };
    this.voices.set(key, entry);
    // A refusal is not kept: the next context asks again.
    entry.voice.catch(() => this.voices.get(key) === entry && this.voices.delete(key));
    return entry.voice;
  }

  /** A context's input (kept in order while its voice is being resolved). */
  private receiveInput(c: StreamContext, input: TtsInput): void {
    if (c.state !== 'resolving') return this.apply(c, input);
    c.earlyChars += billedCharacters(input.transcript);
    if (c.early.length >= MAX_EARLY_MESSAGES) {
      return this.fail(
        c,
        new ServiceError('invalid_request', `More than ${MAX_EARLY_MESSAGES} messages arrived for context '${c.id}' before it was ready.`, 'context_id'),
      );
    }
    if (c.earlyChars > this.o.limits.maxPendingChars) return this.fail(c, tooMuchText(this.o.limits.maxPendingChars));
    c.early.push(input);
  }

  /** The input's text goes to the context's speaker, with its flush or its end. */
  private apply(c: StreamContext, input: TtsInput): void {
    if (c.state === 'gone') return; // an earlier input ended it
    if (this.credit.exhausted) return this.fail(c, this.credit.refusal());
    if (c.state === 'ended') {
      return this.fail(
        c,
        new ServiceError('invalid_request', `Context '${c.id}' already received its last input (continue: false); use a new context_id.`, 'context_id'),
      );
    }
    const speaker = c.speaker!;
    if (speaker.pendingCharacters + billedCharacters(input.transcript) > this.o.limits.maxPendingChars) {
      return this.fail(c, tooMuchText(this.o.limits.maxPendingChars));
    }
    if (!input.continue) c.state = 'ended';
    speaker.push(input.transcript, { flush: input.flush, last: !input.continue, delayMs: input.maxBufferDelayMs });
  }

  private speakerFor(c: StreamContext, voice: ResolvedVoice): SpanSpeaker {
    const { ctx, outbox } = this.o;
    const speaker = new SpanSpeaker({
      ctx,
      model: c.model,
      voice,
      language: c.tts.language,
      speed: c.tts.speed,
      output: { ...c.tts.output, container: 'raw' },
      volume: c.tts.volume,
      route: this.route,
      credit: this.credit,
      failover: { ref: this.logRef, log: this.o.log },
      cutting: { delayMs: c.delayMs, wholeAfterDelay: true, joinUpToChars: MAX_JOINED_CHARS, trim: false },
      sink: {
        started: (span) => {
          if (span.index === 0) c.firstOutputs.firstAudio(span.waitedMs);
        },
        audio: (audio, _ms, span) => {
          if (c.state === 'gone' || !outbox.open) return;
          const now = performance.now();
          c.firstOutputs.sent(audio, now);
          outbox.send({ type: 'audio', contextId: c.id, audio, part: span.part, stepMs: Math.round(now - c.lastChunkAt) });
          c.lastChunkAt = now;
          // The next chunk waits while the client has not taken what was sent.
          return outbox.drained();
        },
        flushed: (part) => outbox.send({ type: 'flushed', contextId: c.id, part }),
      },
    });
    speaker.finished.then(
      () => {
        if (c.state === 'gone') return;
        outbox.send({ type: 'done', contextId: c.id });
        this.remove(c);
      },
      (e: unknown) => this.fail(c, e),
    );
    return speaker;
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
  // Endings

  /** A context's error: its error event, and the context is over. */
  private fail(c: StreamContext, e: unknown): void {
    if (c.state === 'gone') return;
    const error = isServiceError(e) ? fromServiceError(e) : this.internal(e);
    // Engine failures are worth a line (internal errors were logged by internal()); the client's own mistakes are not.
    if (isServiceError(e) && ERROR_TABLE[e.code].status >= 500) this.o.log.warn({ err: e, code: error.code }, 'tts websocket context failed');
    this.sendError(c.id, error);
    this.remove(c);
  }

  /** Ends a context: its speaker stops (engine call and text dropped); nothing more is sent for it. */
  private remove(c: StreamContext): void {
    if (c.state === 'gone') return;
    c.state = 'gone';
    c.speaker?.cancel();
    c.early.length = 0;
    this.contexts.delete(c.id);
    this.endedIds.push(c.id);
    this.endedIdSet.add(c.id);
    if (this.endedIds.length > ENDED_IDS_KEPT) this.endedIdSet.delete(this.endedIds.shift()!);
    if (this.credit.exhausted && this.contexts.size === 0) this.close(1008, this.credit.refusal().code);
  }

  /**
   * The balance (or the key's spend limit) is spent: spans already paid for finish; every context
   * then ends with insufficient_quota or key_budget_exceeded (or done, if nothing unpaid was
   * left), and the session closes with 1008.
   */
  private outOfCredit(): void {
    if (this.credit.exhausted || this.current !== 'open') return;
    this.credit.exhaust();
    if (this.contexts.size === 0) this.close(1008, this.credit.refusal().code);
  }

  private onIdle(): void {
    // Audio still being made is not idle.
    for (const c of this.contexts.values()) if (c.state === 'resolving' || c.speaker?.busy) return this.life.touch();
    this.close(1000, 'idle_timeout', {
      code: 'idle_timeout',
      status: 408,
      message: `Nothing was sent on this socket for ${this.o.limits.idleMs / 1000} s.`,
      param: null,
    });
  }

  /** Ends the session: an error event for each open context (when there is an error), then the transport's close. */
  private close(code: number, reason: string, error?: TtsError): void {
    if (this.current !== 'open') return;
    this.current = 'closing';
    for (const c of [...this.contexts.values()]) {
      if (error) this.sendError(c.id, error);
      this.remove(c);
    }
    this.o.outbox.close(code, reason);
  }
}

const OUT_OF_CREDIT = "The organization's credit ran out: this text cannot be paid for; add credits to continue.";
const tooMuchText = (max: number) =>
  new ServiceError(
    'transcript_too_long',
    `A context may hold at most ${max} characters not yet synthesized; send text no faster than it is spoken, or end the context and start another.`,
    'transcript',
  );
