// A chat answer that survives its engine (docs/failover.md, "LLM streams"): the model's engines
// asked in turn, and a stream that fails moves to the next healthy upstream under the client.
// Before the first token (an error, a 5xx, a dropped connection, a malformed chunk, no token within
// SVC_LLM_FIRST_TOKEN_SECONDS) the next engine answers from the start and the client sees nothing
// of it. After tokens went out (the same faults, or SVC_LLM_STALL_SECONDS between chunks) the next
// engine is asked to continue: the text already sent is appended as a trailing assistant message,
// which OpenAI-compatible engines continue rather than answer (vLLM and transformers with
// `continue_final_message` and `add_generation_prompt: false`; llama.cpp's server prefills a
// trailing assistant message by default and accepts the same flags), and only its continuation is
// relayed. What cannot be continued (tool calls, a refusal, several choices) ends with the stream's
// error event as before. With `capabilities.hedge` the first token is asked of two engines at once.
import { isServiceError } from '../../server/services/errors.ts';
import type { Timer } from '../../server/clock.ts';
import { recordFailover, recordHedge, type Failover, type FailoverReason } from '../core/failover.ts';
import { clientErrorFor, type UpstreamCall } from '../core/try-upstreams.ts';
import { childController } from '../client-gone.ts';
import type { JsonObject } from '../json-body.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import type { AttemptOutcome } from '../tracing/gateway-tracing.ts';
import { UpstreamError, type ChatResponse } from '../upstreams/contract.ts';
import { asUpstreamError, errorText, statusError } from '../upstreams/engine-http.ts';
import { chatStreamEvents, type ChatStreamEvent } from './chat-stream.ts';
import { askChat, type LlmRun } from './llm-run.ts';

/** The request made for an upstream on the first attempt: its bytes and their parse. */
export type RequestFor = (upstream: UpstreamEntry) => { raw: Buffer; body: JsonObject };

/** Why an attempt was given up: what it was, and the error to show if no engine is left. */
class EngineFault extends Error {
  constructor(
    readonly reason: FailoverReason,
    override readonly cause: unknown,
  ) {
    super(`engine failed (${reason})`);
  }
}

/** The watchdog's reason for aborting an engine that sent nothing in time. */
class Silence extends Error {
  override readonly name = 'TimeoutError';
}

/** One engine asked, its answer open. */
export type ChatAttempt = Attempt;

interface Attempt {
  upstream: UpstreamEntry;
  res: ChatResponse;
  controller: AbortController;
  events: AsyncIterator<ChatStreamEvent>;
  /** Read while racing (hedging) and not yet relayed. */
  pending: ChatStreamEvent[];
  watchdog: Timer | null;
  /** Its answer was read to the end: nothing left to cancel. */
  over?: boolean;
  /** From the first token on: when the last chunk came, and whether the stall watch is set (one timer, moved on only when it fires). */
  lastChunkAt?: number;
  stallWatched?: boolean;
}

/** A client's refusal by the engine (its bad request): the client's error, not the engine's fault. */
const CLIENT_FAULT = new Set([400, 413, 422]);

export class ChatFailover {
  /** The upstream serving now (for the stream's error ending and its metrics). */
  upstream: UpstreamEntry | undefined;
  /** True once the stream moved to another engine after output went out. */
  continued = false;
  private readonly tried = new Set<string>();
  private order: UpstreamEntry[] | null = null;
  /** The text the client was sent: the continuation's assistant prefix. */
  private sentText = '';
  /** False once the client was sent output a continuation cannot carry (tool calls, a refusal...). */
  private continuable = true;
  private lastFault: EngineFault | null = null;

  constructor(
    private readonly run: LlmRun,
    private readonly call: UpstreamCall,
    private readonly log: Failover['log'],
    private readonly requestFor: RequestFor,
    /** Streams: the first-token and stall watchdogs apply, and a stream is continued. */
    private readonly streaming: boolean,
  ) {}

  private get ctx() {
    return this.run.ctx;
  }

  /** The next upstream to ask: in the weighted order taken at the start, still healthy, its circuit letting the call through. */
  private next(): UpstreamEntry | undefined {
    const { registry } = this.ctx;
    this.order ??= registry.upstreamOrder(this.run.model);
    for (const u of this.order) {
      if (this.tried.has(u.id) || !registry.isHealthy(u)) continue;
      this.tried.add(u.id);
      if (registry.circuits.admits(u.id)) return u;
    }
    return undefined;
  }

  /**
   * The first engine that answers (2xx): engines that fail to connect, answer 5xx, or stay silent
   * past the first-token time before their headers are left for the next. None: the client's
   * error as one engine's failure would have been.
   */
  async open(): Promise<Attempt> {
    const hedged = this.streaming && this.run.model.hedge;
    for (;;) {
      const upstream = this.next();
      if (!upstream) throw this.noEngineLeft();
      const second = hedged ? this.next() : undefined;
      try {
        return second ? await this.race(upstream, second) : await this.attempt(upstream);
      } catch (e) {
        this.failed(e, upstream);
      }
    }
  }

  /**
   * A stream an engine already answered (a Responses request asked through chat completions:
   * create-response.ts), taken over from its first event on; `controller` cancels that request.
   */
  adopt(upstream: UpstreamEntry, res: ChatResponse, controller: AbortController): Attempt {
    this.order ??= this.ctx.registry.upstreamOrder(this.run.model);
    this.tried.add(upstream.id);
    this.upstream = upstream;
    const watchdog = this.streaming ? this.watch(controller, this.ctx.config.llmFailover.firstTokenMs) : null;
    return { upstream, res, controller, events: chatStreamEvents(res.body)[Symbol.asyncIterator](), pending: [], watchdog };
  }

  /**
   * An engine asked elsewhere (create-response.ts) that answered with a failure not of the
   * client's making: recorded and left behind when another upstream may take the request (true);
   * false, and the answer left unread, otherwise.
   */
  async leftBehind(upstream: UpstreamEntry, res: ChatResponse): Promise<boolean> {
    if (res.statusCode < 300 || CLIENT_FAULT.has(res.statusCode)) return false;
    this.order ??= this.ctx.registry.upstreamOrder(this.run.model);
    this.tried.add(upstream.id);
    if (!this.anotherLeft()) return false;
    this.failed(new EngineFault('http_status', statusError(res.statusCode, await errorText(res.body), upstream.apiKey)), upstream);
    return true;
  }

  /** One engine asked; resolves with its answer's headers. */
  private async attempt(upstream: UpstreamEntry): Promise<Attempt> {
    const controller = childController(this.call.signal);
    const signal = controller.signal;
    const watchdog = this.streaming ? this.watch(controller, this.ctx.config.llmFailover.firstTokenMs) : null;
    const started = performance.now();
    const traced = this.ctx.tracing?.startAttempt(upstream);
    try {
      const { raw, body } = this.continuation(upstream);
      const ask = () => askChat(this.ctx, this.run.model, upstream, { raw, body, signal, timeoutMs: this.call.timeoutMs });
      const res = await (traced ? traced.run(ask) : ask());
      if (res.statusCode >= 300) {
        const failure = statusError(res.statusCode, await errorText(res.body), upstream.apiKey);
        if (CLIENT_FAULT.has(res.statusCode) && this.run.outputEvents === 0) throw upstreamEnvelope(failure, this.call.timeoutMs);
        throw new EngineFault('http_status', failure);
      }
      traced?.answered();
      this.ctx.upstreamStats?.record(upstream.id, true);
      this.ctx.registry.circuits.success(upstream.id);
      this.logAttempt(upstream, 'ok', started);
      this.upstream = upstream;
      return { upstream, res, controller, events: chatStreamEvents(res.body)[Symbol.asyncIterator](), pending: [], watchdog };
    } catch (e) {
      watchdog?.cancel();
      const fault = this.classify(e, controller);
      controller.abort(ATTEMPT_CANCELLED);
      traced?.failed(traceOutcome(fault), e);
      this.logAttempt(upstream, fault instanceof EngineFault ? fault.reason : 'error', started);
      throw fault;
    }
  }

  /**
   * Hedging: two engines asked at once; the first to send output is kept and the other
   * cancelled (it bills nothing: only the kept stream is counted). Both failing: the first's fault.
   */
  private async race(a: UpstreamEntry, b: UpstreamEntry): Promise<Attempt> {
    const live: Attempt[] = [];
    let decided = false;
    const faults: [UpstreamEntry, EngineFault][] = [];
    const contenders = [a, b].map(async (u) => {
      const attempt = await this.attempt(u).catch((e: unknown) => {
        if (e instanceof EngineFault) faults.push([u, e]);
        throw e;
      });
      if (decided) {
        cancel(attempt);
        throw new Error('lost the race');
      }
      live.push(attempt);
      try {
        for (;;) {
          const next = await this.read(attempt);
          if (next.done) throw new EngineFault('closed', new UpstreamError('broken', 'The engine ended its stream before any output.'));
          attempt.pending.push(next.value);
          if (next.value.output || next.value.done) return attempt;
        }
      } catch (e) {
        const fault = this.classify(e, attempt.controller);
        if (fault instanceof EngineFault && !decided) faults.push([u, fault]);
        throw fault;
      }
    });
    let winner: Attempt | undefined;
    try {
      winner = await Promise.any(contenders);
      this.upstream = winner.upstream;
      recordHedge(this.ctx, { won: winner.upstream, lost: winner.upstream === a ? b : a });
      // The one that failed before the winner's first output is recorded like any engine left behind.
      for (const [u, fault] of faults) this.failed(fault, u);
      return winner;
    } catch (e) {
      const [first, second] = (e as AggregateError).errors as unknown[];
      if (second instanceof EngineFault) this.failed(second, b);
      throw first;
    } finally {
      decided = true;
      // The other engine is cancelled: it bills nothing (only the kept stream is counted).
      for (const attempt of live) if (attempt !== winner) cancel(attempt);
    }
  }

  /** The request for an upstream: the client's, or after output went out, the continuation of what was sent. */
  private continuation(upstream: UpstreamEntry): { raw: Buffer; body: JsonObject } {
    const first = this.requestFor(upstream);
    if (this.run.outputEvents === 0) return first;
    const messages = Array.isArray(first.body.messages) ? first.body.messages : [];
    const body: JsonObject = {
      ...first.body,
      messages: [...messages, { role: 'assistant', content: this.sentText }],
      continue_final_message: true,
      add_generation_prompt: false,
    };
    // The continuation may say only what is left of the request's limit.
    const sent = this.run.tokens().output;
    for (const limit of ['max_tokens', 'max_completion_tokens'] as const) {
      const asked = body[limit];
      if (typeof asked === 'number') body[limit] = Math.max(1, asked - sent);
    }
    return { raw: Buffer.from(JSON.stringify(body)), body };
  }

  /**
   * The stream's events, across engines: an engine that fails is replaced (before the first
   * token from the start, after it with a continuation) until the answer is complete or no
   * engine is left, when the last failure is thrown for the stream's error ending.
   */
  async *events(first: Attempt): AsyncGenerator<ChatStreamEvent> {
    let attempt: Attempt | null = first;
    try {
      for (;;) {
        try {
          yield* this.relay(attempt);
          return;
        } catch (e) {
          const fault = this.classify(e, attempt.controller);
          cancel(attempt);
          attempt = null;
          const before = this.run.outputEvents === 0;
          if (!before && !this.continuable) throw unwrap(fault);
          this.failed(fault, this.upstream!, before ? 'before_first_output' : 'mid_stream');
          if (!before) this.run.switchedEngine();
          attempt = await this.reopen();
          if (!before) this.continued = true;
        }
      }
    } finally {
      if (attempt) cancel(attempt);
    }
  }

  /** The next engine for a stream already under way; none left: the last fault, as the engine's error. */
  private async reopen(): Promise<Attempt> {
    try {
      return await this.open();
    } catch (e) {
      throw unwrap(this.lastFault ?? e);
    }
  }

  /** One engine's events relayed; returns when its answer is complete, throws its fault otherwise. */
  private async *relay(attempt: Attempt): AsyncGenerator<ChatStreamEvent> {
    let finished = false;
    let done = false;
    for (;;) {
      let next: ChatStreamEvent | undefined;
      try {
        next = attempt.pending.shift() ?? (await this.read(attempt)).value;
      } catch (e) {
        // An engine that gave its finish reason and then failed has answered: only [DONE] is missing.
        if (!finished || this.call.signal.aborted) throw e;
      }
      if (next === undefined) {
        // The body ended: complete only if the engine said so ([DONE] or a finish reason).
        if (!finished) throw new EngineFault('closed', new UpstreamError('broken', 'The engine closed its stream before the end of the answer.'));
        attempt.over = true;
        cancel(attempt);
        if (!done) yield { raw: 'data: [DONE]\n\n', deltas: [], output: false, usageOnly: false, done: true };
        return;
      }
      const error = next.deltas.find((d) => d.type === 'error');
      if (error) throw new EngineFault('error', new UpstreamError('broken', error.message ?? 'The engine ended its stream with an error.'));
      if (next.malformed) throw new EngineFault('protocol', new UpstreamError('protocol', 'The engine sent a chunk that is not JSON.'));
      if (next.output) {
        for (const d of next.deltas) {
          if (d.type === 'text') this.sentText += d.text;
          else if (d.type === 'tool_call' || d.type === 'refusal') this.continuable = false;
        }
        if (!next.deltas.some((d) => d.type === 'text')) this.continuable = false;
        // Several choices cannot be continued as one assistant message.
        if (next.raw.includes('"index":1')) this.continuable = false;
      }
      // From the first token on, the engine may stay silent only so long between chunks.
      if (next.output || this.run.outputEvents > 0) this.stallWatch(attempt);
      if (next.deltas.some((d) => d.type === 'finish')) finished = true;
      if (next.done) finished = done = true;
      yield this.continued && next.deltas.some((d) => d.type === 'usage') ? this.withBilledUsage(next) : next;
    }
  }

  /**
   * A whole (not streamed) answer's text, read from the engine that answered; an engine that
   * fails while it is read is replaced by the next (nothing was sent yet). Null: the client left.
   */
  async wholeText(first: Attempt, maxBytes: number): Promise<string | null> {
    let attempt = first;
    for (;;) {
      try {
        const text = await attempt.res.text(maxBytes);
        attempt.over = true;
        return text;
      } catch (e) {
        if ((this.call as { clientGone?: boolean }).clientGone) return null;
        this.failed(this.classify(e, attempt.controller), attempt.upstream);
      } finally {
        cancel(attempt);
      }
      attempt = await this.open();
    }
  }

  private async read(attempt: Attempt): Promise<IteratorResult<ChatStreamEvent>> {
    return attempt.events.next();
  }

  /** After a continuation, the usage chunk the client sees counts what it received: the output of every engine. */
  private withBilledUsage(event: ChatStreamEvent): ChatStreamEvent {
    const data = JSON.parse(event.raw.replace(/^data: ?/m, '').trim()) as {
      usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
    };
    const input = data.usage?.prompt_tokens ?? 0;
    const output = this.run.carriedOutput + (data.usage?.completion_tokens ?? 0);
    data.usage = { ...data.usage, prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
    return { ...event, raw: `data: ${JSON.stringify(data)}\n\n` };
  }

  private stallWatch(attempt: Attempt): void {
    const clock = this.ctx.clock;
    attempt.lastChunkAt = clock.now();
    if (attempt.stallWatched) return;
    attempt.stallWatched = true;
    attempt.watchdog?.cancel();
    attempt.watchdog = null;
    if (!this.anotherLeft()) return;
    const ms = this.ctx.config.llmFailover.stallMs;
    const arm = (delay: number) => {
      attempt.watchdog = clock.after(delay, () => {
        const idle = clock.now() - (attempt.lastChunkAt ?? 0);
        if (idle < ms) arm(ms - idle);
        else attempt.controller.abort(new Silence(`The engine sent nothing for ${ms / 1000} s.`));
      });
    };
    arm(ms);
  }

  /** Silence is a fault only when another engine could take over: alone, an engine may be slow (its own timeout still applies). */
  private watch(controller: AbortController, ms: number): Timer | null {
    if (!this.anotherLeft()) return null;
    return this.ctx.clock.after(ms, () => controller.abort(new Silence(`The engine sent nothing for ${ms / 1000} s.`)));
  }

  /** What an attempt's failure is: the client's end or error rethrown as it is, else the engine's fault. */
  private classify(e: unknown, controller: AbortController): unknown {
    if (e instanceof EngineFault || isServiceError(e)) return e;
    if (this.call.signal.aborted) return e;
    if (controller.signal.reason instanceof Silence) return new EngineFault('stall', new UpstreamError('timeout', controller.signal.reason.message));
    const failure = asUpstreamError(e, true);
    const reason: FailoverReason =
      failure.kind === 'connect' ? 'connect' : failure.kind === 'timeout' ? 'timeout' : failure.kind === 'protocol' ? 'protocol' : 'closed';
    return new EngineFault(reason, failure);
  }

  /**
   * An engine fault is recorded and the next engine tried; anything else ends the request. With
   * no other engine to move to, the fault is the client's error as before, and the upstream is
   * not taken out of a model it alone serves (nor counted toward its circuit: model-registry.ts `callFailed`).
   */
  private failed(e: unknown, upstream: UpstreamEntry, phase: 'before_first_output' | 'mid_stream' = 'before_first_output'): void {
    if (!(e instanceof EngineFault)) throw this.call.signal.aborted ? clientErrorFor(e, this.call) : e;
    this.lastFault = e;
    if (this.anotherLeft()) recordFailover(this.ctx, { from: upstream, reason: e.reason, phase, ref: this.call.ref, log: this.log, error: e.cause });
    else {
      this.ctx.upstreamStats?.record(upstream.id, false);
      this.ctx.registry.callFailed(upstream);
      if (e.reason === 'connect' || e.reason === 'http_status') this.ctx.metrics.upstreamError(upstream, e.reason);
      // An engine that cannot be reached is out until a good health check, as for every route (try-upstreams.ts).
      if (e.reason === 'connect') this.ctx.health.record(upstream, { ok: false, error: `connection failed: ${asUpstreamError(e.cause, false).message}` });
    }
  }

  /** Whether an upstream not yet tried could still take the request. */
  private anotherLeft(): boolean {
    const { registry } = this.ctx;
    return registry.healthyUpstreams(this.run.model).some((u) => !this.tried.has(u.id) && registry.circuits.stateOf(u.id) === 'closed');
  }

  /** No engine left before anything was sent: the client's error, as the last engine's failure. */
  private noEngineLeft(): unknown {
    const fault = this.lastFault;
    if (!fault) return upstreamEnvelope(new UpstreamError('connect', 'no upstream tried'), this.call.timeoutMs);
    return upstreamEnvelope(asUpstreamError(fault.cause, true), this.call.timeoutMs);
  }

  private logAttempt(upstream: UpstreamEntry, outcome: string, started: number): void {
    if (this.call.ref) this.ctx.requestLog?.attempt(this.call.ref, { upstreamId: upstream.id, outcome, ms: Math.round(performance.now() - started) });
  }
}

/** The engine's error inside a fault, for the stream's error ending (llm-run.ts streamEnding). */
function unwrap(e: unknown): unknown {
  return e instanceof EngineFault ? e.cause : e;
}

/**
 * An attempt ended: its watchdog stopped and, unless its answer was read to the end, its request
 * aborted. (An abort on every request cost an AbortError with its stack and an event dispatch, on
 * the LLM proxy's hot path, for requests already over.)
 */
function cancel(attempt: Attempt): void {
  attempt.watchdog?.cancel();
  if (attempt.over) return;
  attempt.over = true;
  attempt.controller.abort(ATTEMPT_CANCELLED);
  void attempt.events.return?.(undefined).catch(() => {});
}

/** The reason an attempt is cancelled with: made once (an AbortError made per abort captures a stack). */
const ATTEMPT_CANCELLED = new DOMException('The engine request was cancelled.', 'AbortError');

/** An attempt's outcome in its trace span, named as `tryUpstreams` names it. */
function traceOutcome(fault: unknown): AttemptOutcome {
  if (!(fault instanceof EngineFault)) return isServiceError(fault) ? 'error' : 'cancelled';
  if (fault.reason === 'connect') return 'connect_failed';
  if (fault.reason === 'http_status') return 'http_error';
  if (fault.reason === 'timeout' || fault.reason === 'stall') return 'timeout';
  return 'broken';
}
