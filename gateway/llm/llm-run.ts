// The LLM pipeline every chat-backed answer goes through (POST /v1/chat/completions,
// POST /v1/responses, a /v1/realtime response): the most the request can cost reserved before
// the engine runs, the model's engines asked in turn, the tokens counted (the engine's own count
// where it gave one, estimates where not) and one debit that settles the reservation.
import type { FastifyBaseLogger } from 'fastify';
import { llmCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { EngineCall } from '../client-gone.ts';
import type { GatewayContext } from '../context.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import { envelope, type ErrorEnvelope } from '../errors.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import { isUpstreamError, type ChatRequest, type ChatResponse } from '../upstreams/contract.ts';
import { CHAT_ANSWER_MAX_BYTES, errorText, isTimeout, statusError } from '../upstreams/engine-http.ts';
import { clientErrorFor, tryUpstreams, type UpstreamCall } from '../core/try-upstreams.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import type { ChatStreamEvent } from './chat-stream.ts';

/** The route a debit is recorded under. */
export type LlmRoute = 'chat.completions' | 'responses' | 'realtime';

/** Who pays, and the id the ledger and the usage rows carry. */
export interface LlmPayer {
  auth: RequestAuth;
  requestId: string;
}

/** Rough token count for text whose usage the engine never reported (about 4 bytes a token). */
export const estimateTokens = (bytes: number) => Math.ceil(bytes / 4);

/**
 * What a chat request reserves: its prompt (estimated from its size) and all the output it may
 * ask for (max_completion_tokens or max_tokens, else the model's or the gateway's ceiling) for
 * each of its `n` choices. The engine's own count settles it; a prompt that tokenizes to more
 * than the estimate is the one way a chat request can cost more than it reserved.
 */
export function reservationFor(model: ModelEntry, body: Record<string, unknown>, promptBytes: number, defaultMaxTokens: number): bigint {
  const asked = positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens);
  const maxOutput = asked ?? model.maxOutputTokens ?? defaultMaxTokens;
  const choices = positiveInt(body.n) ?? 1;
  return llmCostMicros(model.prices, estimateTokens(promptBytes), maxOutput * choices);
}

const positiveInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);

/** One metered LLM request: its reservation, its token count and its one debit. */
export class LlmRun {
  /** The engine's own counts, once it reported them. */
  engineInput: number | undefined;
  engineOutput: number | undefined;
  /** Output events delivered (chunks or stream events that carry output): one token each when the engine reports no count. */
  outputEvents = 0;
  /** What earlier engines of a stream that failed over delivered (chat-failover.ts): their tokens and their output events. */
  private carried = 0;
  private carriedEvents = 0;
  private streaming = false;
  /** Resolves what the lifecycle holds for a stream, once its debit is written. */
  private streamSettled: () => void = () => {};

  private constructor(
    readonly ctx: GatewayContext,
    readonly payer: LlmPayer,
    readonly model: ModelEntry,
    private readonly route: LlmRoute,
    private readonly promptBytes: number,
    private readonly hold: CreditHold,
  ) {}

  /**
   * Reserves what the request may cost (402 if the balance, less what the org's running
   * requests reserved, cannot cover it). `limits` holds the request's max_completion_tokens /
   * max_tokens and `n` (reservationFor); `promptBytes` is the size of what the engine is sent.
   */
  static async reserve(
    ctx: GatewayContext,
    payer: LlmPayer,
    model: ModelEntry,
    route: LlmRoute,
    limits: Record<string, unknown>,
    promptBytes: number,
  ): Promise<LlmRun> {
    const hold = await ctx.core.reserve(payer.auth, reservationFor(model, limits, promptBytes, ctx.config.limits.llmReserveMaxTokens));
    return new LlmRun(ctx, payer, model, route, promptBytes, hold);
  }

  /**
   * Gives the reservation back when the request ends before its stream started (client gone,
   * engine failed); from its first step a stream settles it itself, after its debit (released
   * before that debit, its credit would be free for a moment).
   */
  readonly releaseUnlessStreaming = (): void => {
    if (!this.streaming) this.hold.release();
  };

  release(): void {
    this.hold.release();
  }

  /** Counts a chat stream's event; true for its first output (the first-token latency). */
  countChat(event: ChatStreamEvent): boolean {
    for (const d of event.deltas) {
      if (d.type !== 'usage') continue;
      this.engineInput = d.usage.prompt_tokens;
      this.engineOutput = d.usage.completion_tokens;
    }
    return event.output && ++this.outputEvents === 1;
  }

  /**
   * A stream moves to the next engine: what the failed one delivered is kept (one token per
   * output event, as it never gave its count); the next engine's counts are its own.
   */
  switchedEngine(): void {
    this.carried += this.engineOutput ?? this.outputEvents - this.carriedEvents;
    this.carriedEvents = this.outputEvents;
    this.engineInput = undefined;
    this.engineOutput = undefined;
  }

  /** The output tokens of the engines a stream failed over from. */
  get carriedOutput(): number {
    return this.carried;
  }

  /**
   * The tokens billed: the engine's counts, else an estimate of the prompt and one token per
   * output event; after a failover the prompt of the engine that finished and the output of all.
   */
  tokens(): { input: number; output: number } {
    return {
      input: this.engineInput ?? estimateTokens(this.promptBytes),
      output: this.carried + (this.engineOutput ?? this.outputEvents - this.carriedEvents),
    };
  }

  /** What the tokens billed cost at the model's price. */
  cost(): bigint {
    const { input, output } = this.tokens();
    return llmCostMicros(this.model.prices, input, output);
  }

  /** The one debit, settling the reservation; returns its cost and the balance after it. */
  async debit(): Promise<{ cost: bigint; remaining: bigint }> {
    const { input, output } = this.tokens();
    const cost = llmCostMicros(this.model.prices, input, output);
    const usage = { modelId: this.model.id, modality: 'llm' as const, route: this.route, inputTokens: input, outputTokens: output };
    const remaining = await this.ctx.core.charge(this.payer.auth, this.payer.requestId, cost, usage, this.hold);
    return { cost, remaining };
  }

  /**
   * A stream's first step: it owns the reservation from now on, and the process waits for its
   * debit before closing the database (the stream outlives its route handler).
   */
  streamStarted(): void {
    this.streaming = true;
    this.ctx.lifecycle.track(new Promise<void>((resolve) => (this.streamSettled = resolve)));
  }

  /** A stream's end, however it ended: billed once, for what was delivered; a debit that fails is logged. */
  async settleStream(log: Pick<FastifyBaseLogger, 'error'>): Promise<void> {
    await this.debit()
      .catch((err: unknown) => log.error({ err }, 'failed to record usage of a stream'))
      .finally(() => this.hold.release());
    this.streamSettled();
  }
}

/** An engine's answer and the upstream that gave it. */
export interface EngineAnswer {
  res: ChatResponse;
  upstream: UpstreamEntry;
}

/** Asks one upstream for a chat completion (model_offline when its protocol cannot chat). */
export function askChat(ctx: GatewayContext, model: ModelEntry, upstream: UpstreamEntry, request: ChatRequest): Promise<ChatResponse> {
  const chat = ctx.protocols.get(upstream.protocol)?.chat;
  if (!chat) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot chat.`);
  return chat(upstream, request);
}

/**
 * The model's chat engines asked in turn (gateway/core/try-upstreams.ts), each with the
 * request made for it; an engine answering with an HTTP failure is thrown as the client's error.
 */
export async function callChat(
  ctx: GatewayContext,
  model: ModelEntry,
  call: UpstreamCall,
  requestFor: (upstream: UpstreamEntry) => ChatRequest,
): Promise<EngineAnswer> {
  let upstream!: UpstreamEntry; // the last one asked is the one that answered
  const res = await tryUpstreams(ctx, model, call, (u) => {
    upstream = u;
    return askChat(ctx, model, u, requestFor(u));
  });
  if (res.statusCode >= 300) await refuseFailedAnswer(ctx, { res, upstream }, call.timeoutMs);
  return { res, upstream };
}

/** An engine that answered with an HTTP failure: an engine refusing a bad request is the caller's error; anything else is the engine's. */
export async function refuseFailedAnswer(ctx: GatewayContext, { res, upstream }: EngineAnswer, timeoutMs: number): Promise<void> {
  if (res.statusCode < 300) return;
  const failure = statusError(res.statusCode, await errorText(res.body), upstream.apiKey);
  if (![400, 413, 422].includes(res.statusCode)) {
    ctx.metrics.upstreamError(upstream, 'http_status');
    ctx.upstreamStats?.failedAfterAnswer(upstream.id);
  }
  throw upstreamEnvelope(failure, timeoutMs);
}

/** A whole (not streamed) answer's text; null when the client left while it was read. */
export async function wholeAnswer(res: ChatResponse, engine: EngineCall): Promise<string | null> {
  try {
    return await res.text(CHAT_ANSWER_MAX_BYTES);
  } catch (e) {
    // The engine stalled or dropped the connection after sending its headers.
    if (engine.clientGone) return null;
    throw clientErrorFor(e, engine);
  }
}

export function parseEngineJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ServiceError('upstream_error', 'The model upstream returned a response that is not JSON.');
  }
}

/**
 * How a stream that broke ends for its client: a shutdown or a revoked key with their own error,
 * a dead or stalled engine with upstream_error / upstream_timeout (counted in the metrics);
 * null when the client left.
 */
export function streamEnding(
  ctx: GatewayContext,
  engine: EngineCall,
  upstream: UpstreamEntry,
  log: Pick<FastifyBaseLogger, 'warn'>,
  e: unknown,
): ErrorEnvelope['error'] | null {
  if (engine.clientGone) return null;
  const stopped = engine.signal.aborted ? (engine.signal.reason as unknown) : undefined;
  if (isServiceError(stopped)) return envelope(stopped).body.error;
  ctx.metrics.upstreamError(upstream, isTimeout(e) ? 'timeout' : 'stream_broken');
  log.warn({ err: e }, 'upstream stream ended abnormally');
  // The engine broke the protocol (an event too long): its reason is the client's message.
  if (isUpstreamError(e) && e.kind === 'protocol') return envelope(upstreamEnvelope(e, engine.timeoutMs)).body.error;
  return isTimeout(e)
    ? { message: 'The model upstream stopped sending within the deadline.', type: 'api_error', code: 'upstream_timeout', param: null }
    : { message: 'The model upstream closed the stream unexpectedly.', type: 'api_error', code: 'upstream_error', param: null };
}
