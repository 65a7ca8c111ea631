// POST /v1/responses (OpenAI's Responses API; what the Vercel AI SDK's default `openai(model)`
// calls). Per upstream:
// - an engine that serves it (protocol `openai`) gets the client's bytes (only `model` rewritten
//   when the upstream knows the model by another name) and its answer is relayed as it is,
//   streamed event by event; usage is read from `usage` (input_tokens / output_tokens) of the
//   body, or of the stream's final response.completed / response.incomplete / response.failed;
// - an engine without it (the local llama.cpp engine, an OpenAI-compatible server that answers
//   404 on /responses) gets the request translated to a chat completion, and its answer is
//   translated back (gateway/llm/responses-via-chat.ts).
// Either way the request is metered like chat: credit reserved before the engine runs, the
// engine's own token counts settled after, the same errors (401, 402, 429, 404 model_not_found).
// Chat's own route (chat-completions.ts) is untouched: this one only reuses its helpers.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { llmCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { setSpendHeaders, type CreditHold } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { parseJsonObject, type JsonObject } from '../json-body.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import { SseSplitter, sseData } from '../sse.ts';
import type { ChatResponse } from '../upstreams/contract.ts';
import { isTimeout, statusError } from '../upstreams/engine-http.ts';
import { clientErrorFor, tryUpstreams, upstreamCall } from '../core/try-upstreams.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { onResponseClose, type EngineCall } from '../client-gone.ts';
import { envelope } from '../errors.ts';
import { sendStream } from '../metrics/metrics-http.ts';
import { LLM_BODY_LIMIT, estimateTokens, patchTopLevelMembers, reservationFor } from './chat-completions.ts';
import {
  ResponsesStreamTranslator,
  chatRequestFor,
  responseFromChat,
  responseMeta,
  responsesUsage,
  streamErrorEvent,
  type ChatUsage,
  type ResponseMeta,
} from '../llm/responses-via-chat.ts';
import { ResponseItemStore } from '../llm/response-item-store.ts';

/** How an engine without the Responses API answers POST /responses: no such route (or method). */
const NO_SUCH_ROUTE = new Set([404, 405, 501]);

interface Answer {
  res: ChatResponse;
  upstream: UpstreamEntry;
  /** Set when the engine was asked through chat completions: the answer is translated back. */
  via: ResponseMeta | null;
}

interface ResponsesUsage {
  input_tokens?: number;
  output_tokens?: number;
}

export function registerResponsesRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // The items of translated answers, for item_reference (bounded; see response-item-store.ts).
  const items = new ResponseItemStore();
  // Upstreams (id and URL: a new URL is asked again) seen answering 404 on /responses and then
  // answering chat: asked through chat directly from then on. As many as the registry has
  // upstreams; cleared should that ever pass a bound.
  const chatOnly = new Set<string>();
  const chatOnlyKey = (u: UpstreamEntry) => `${u.id} ${u.url}`;

  // Registered in chat's scope, whose JSON parser keeps the raw bytes (forwarded as they are).
  app.post('/v1/responses', { bodyLimit: LLM_BODY_LIMIT, config: { metered: true } }, async (request, reply) => {
    const raw = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
    const body = parseJsonObject(raw);
    const model = ctx.registry.resolve(body.model, 'llm');
    request.modelId = model.id;
    // max_output_tokens plays max_tokens' part in the reservation.
    const hold = await ctx.core.reserve(
      request.auth,
      reservationFor(model, { max_tokens: body.max_output_tokens }, raw.length, ctx.config.limits.llmReserveMaxTokens),
    );
    const settling = { byStream: false };
    onResponseClose(reply, () => settling.byStream || hold.release());

    const engine = upstreamCall(ctx, reply, request.ticket, { deadline: false });
    let chatBody: JsonObject | undefined; // translated once, for whichever upstream needs it
    let answer: Answer;
    try {
      answer = await tryUpstreams(ctx, model, engine, async (upstream): Promise<Answer> => {
        const runtime = ctx.protocols.get(upstream.protocol);
        if (runtime?.responses && !chatOnly.has(chatOnlyKey(upstream))) {
          const res = await runtime.responses(upstream, {
            raw: forwardedBytes(raw, body, upstream, model),
            body,
            signal: engine.signal,
            timeoutMs: engine.timeoutMs,
          });
          if (!NO_SUCH_ROUTE.has(res.statusCode)) return { res, upstream, via: null };
          await res.text().catch(() => '');
          const viaChat = await askThroughChat(upstream);
          if (viaChat.res.statusCode < 300) {
            if (chatOnly.size >= 10_000) chatOnly.clear();
            chatOnly.add(chatOnlyKey(upstream));
          }
          return viaChat;
        }
        return askThroughChat(upstream);
      });
    } catch (e) {
      if (engine.clientGone) return reply; // the client left before the engine answered
      throw e;
    }

    async function askThroughChat(upstream: UpstreamEntry): Promise<Answer> {
      const chat = ctx.protocols.get(upstream.protocol)?.chat;
      if (!chat) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot chat.`);
      chatBody ??= chatRequestFor(body, (id) => items.get(request.auth.orgId, id));
      const sent = { ...chatBody, model: upstream.upstreamModel };
      const res = await chat(upstream, { raw: Buffer.from(JSON.stringify(sent)), body: sent, signal: engine.signal, timeoutMs: engine.timeoutMs });
      return { res, upstream, via: responseMeta(body, model.id) };
    }

    const { res, upstream, via } = answer;
    if (res.statusCode >= 300) {
      // An engine refusing a bad request is the caller's error; anything else is the engine's.
      const failure = statusError(res.statusCode, await res.text().catch(() => ''), upstream.apiKey);
      if (![400, 413, 422].includes(res.statusCode)) {
        ctx.metrics.upstreamError(upstream, 'http_status');
        ctx.upstreamStats?.failedAfterAnswer(upstream.id);
      }
      throw upstreamEnvelope(failure, engine.timeoutMs);
    }

    const bill = (input: number, output: number) => {
      const cost = llmCostMicros(model.prices, input, output);
      return {
        cost,
        charged: ctx.core.charge(
          request.auth,
          request.id,
          cost,
          { modelId: model.id, modality: 'llm', route: 'responses', inputTokens: input, outputTokens: output },
          hold,
        ),
      };
    };

    if (!res.contentType.includes('text/event-stream')) {
      let text: string;
      try {
        text = await res.text();
      } catch (e) {
        if (engine.clientGone) return reply;
        throw clientErrorFor(e, engine);
      }
      const parsed = parseEngineJson(text);
      if (via) {
        const chatUsage = (parsed as { usage?: ChatUsage } | null)?.usage;
        const input = chatUsage?.prompt_tokens ?? estimateTokens(raw.length);
        const output = chatUsage?.completion_tokens ?? 0;
        const response = responseFromChat(via, parsed, responsesUsage(input, output, chatUsage));
        if (via.stored) items.put(request.auth.orgId, response.output as JsonObject[]);
        const { cost, charged } = bill(input, output);
        setSpendHeaders(reply, cost, await charged);
        return reply.code(200).type('application/json').send(JSON.stringify(response));
      }
      const usage = (parsed as { usage?: ResponsesUsage } | null)?.usage;
      const { cost, charged } = bill(usage?.input_tokens ?? estimateTokens(raw.length), usage?.output_tokens ?? 0);
      setSpendHeaders(reply, cost, await charged);
      return reply
        .code(200)
        .type(res.contentType || 'application/json')
        .send(text);
    }

    // Streaming: the spend header is the pre-request balance (the cost is unknown until the end).
    setSpendHeaders(reply, null, request.auth.balanceMicros);
    reply.code(200).headers({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    const run: StreamRun = {
      ctx,
      request,
      model,
      upstream,
      engine,
      hold,
      promptBytes: raw.length,
      firstToken: () => ctx.metrics.firstOutput('llm_first_token', model.id, reply.elapsedTime / 1000),
      // From its first step the stream settles the hold itself, after its debit.
      started: () => (settling.byStream = true),
      bill,
    };
    return sendStream(reply, ctx.metrics, via ? translatedStream(run, res, via, items) : relayedStream(run, res));
  });
}

/** The client's bytes for an engine that serves /responses; `model` rewritten when the upstream knows it by another name. */
function forwardedBytes(raw: Buffer, body: JsonObject, upstream: UpstreamEntry, model: ModelEntry): Buffer {
  if (upstream.upstreamModel === model.id) return raw;
  // Only that member is rewritten: the rest stays the client's (numbers, key order).
  return patchTopLevelMembers(raw, { model: JSON.stringify(upstream.upstreamModel) });
}

function parseEngineJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ServiceError('upstream_error', 'The model upstream returned a response that is not JSON.');
  }
}

interface StreamRun {
  ctx: GatewayContext;
  request: FastifyRequest;
  model: ModelEntry;
  upstream: UpstreamEntry;
  engine: EngineCall;
  hold: CreditHold;
  promptBytes: number;
  firstToken: () => void;
  started: () => void;
  bill: (input: number, output: number) => { cost: bigint; charged: Promise<bigint> };
}

/** Events of the Responses stream that carry output (text, tool-call arguments...). */
const OUTPUT_EVENT = /^response\.[a-z_.]*\.delta$/;
/** The events that end a Responses stream with the response (and its usage). */
const FINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** An engine's Responses stream relayed event by event; billed from its final response's usage. */
async function* relayedStream(run: StreamRun, res: ChatResponse): AsyncGenerator<string> {
  run.started();
  const splitter = new SseSplitter();
  let usage: ResponsesUsage | undefined;
  let deltas = 0;
  let sequence = 0;
  try {
    for await (const chunk of res.body) {
      for (const event of splitter.push(chunk as Buffer)) {
        const data = sseData(event);
        if (data !== null) {
          const parsed = safeJson(data) as { type?: string; sequence_number?: number; response?: { usage?: ResponsesUsage | null } } | undefined;
          if (typeof parsed?.sequence_number === 'number') sequence = parsed.sequence_number + 1;
          if (parsed?.type && FINAL_EVENTS.has(parsed.type) && parsed.response?.usage) usage = parsed.response.usage;
          if (parsed?.type && OUTPUT_EVENT.test(parsed.type) && ++deltas === 1) run.firstToken();
        }
        yield event;
      }
    }
    const rest = splitter.rest();
    if (rest.trim()) yield rest;
  } catch (e) {
    const ending = streamEnding(run, e);
    if (ending) yield streamErrorEvent(ending.code, ending.message, sequence);
  } finally {
    // Billed once, for what was delivered: the engine's count, else one token per output delta.
    await settle(run, usage?.input_tokens ?? estimateTokens(run.promptBytes), usage?.output_tokens ?? deltas);
  }
}

/** A chat completion stream answered as the Responses stream; billed from the engine's usage chunk. */
async function* translatedStream(run: StreamRun, res: ChatResponse, meta: ResponseMeta, items: ResponseItemStore): AsyncGenerator<string> {
  run.started();
  const translator = new ResponsesStreamTranslator(meta);
  const splitter = new SseSplitter();
  let finished = false;
  const counts = () => {
    const u = translator.chatUsage;
    return { input: u?.prompt_tokens ?? estimateTokens(run.promptBytes), output: u?.completion_tokens ?? translator.deltas };
  };
  try {
    yield translator.start().join('');
    for await (const chunk of res.body) {
      let out = '';
      for (const event of splitter.push(chunk as Buffer)) {
        const data = sseData(event);
        if (data === null || data === '[DONE]') continue;
        const parsed = safeJson(data) as { error?: { code?: unknown; message?: unknown } } | undefined;
        if (parsed?.error) {
          // The engine ended its stream with an error event (a gateway behind a gateway does):
          // the answer is not complete, so it ends with the Responses error event, not response.completed.
          finished = true;
          const { code, message } = parsed.error;
          yield (
            out +
            translator.errorEvent(
              typeof code === 'string' ? code : 'upstream_error',
              typeof message === 'string' ? message : 'The model upstream failed mid-stream.',
            )
          );
          return;
        }
        const before = translator.deltas;
        out += translator.push(parsed).join('');
        if (before === 0 && translator.deltas > 0) run.firstToken();
      }
      if (out) yield out;
    }
    const { input, output } = counts();
    const events = translator.finishEvents(responsesUsage(input, output, translator.chatUsage));
    finished = true;
    if (meta.stored) items.put(run.request.auth.orgId, translator.output());
    yield events.join('');
  } catch (e) {
    if (!finished) {
      const ending = streamEnding(run, e);
      if (ending) yield translator.errorEvent(ending.code, ending.message);
    }
  } finally {
    const { input, output } = counts();
    await settle(run, input, output);
  }
}

/**
 * How a stream that broke ends for its client: a shutdown or a revoked key with their own error,
 * a dead or stalled engine with upstream_error / upstream_timeout; nothing when the client left.
 */
function streamEnding(run: StreamRun, e: unknown): { code: string; message: string } | null {
  const { engine } = run;
  if (engine.clientGone) return null;
  const stopped = engine.signal.aborted ? (engine.signal.reason as unknown) : undefined;
  if (isServiceError(stopped)) {
    const { error } = envelope(stopped).body;
    return { code: error.code, message: error.message };
  }
  run.ctx.metrics.upstreamError(run.upstream, isTimeout(e) ? 'timeout' : 'stream_broken');
  run.request.log.warn({ err: e }, 'upstream stream ended abnormally');
  return isTimeout(e)
    ? { code: 'upstream_timeout', message: 'The model upstream stopped sending within the deadline.' }
    : { code: 'upstream_error', message: 'The model upstream closed the stream unexpectedly.' };
}

async function settle(run: StreamRun, input: number, output: number): Promise<void> {
  await run
    .bill(input, output)
    .charged.catch((err: unknown) => run.request.log.error({ err }, 'failed to record usage of a stream'))
    .finally(run.hold.release);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
