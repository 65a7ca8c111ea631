// POST /v1/chat/completions: the body goes to the engine as sent (only `model` is rewritten
// when the upstream knows the model by another name, and `stream_options.include_usage` is
// added to streams so that usage is always metered); the answer comes back as the engine
// produced it, streamed chunk by chunk.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { llmCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { setSpendHeaders, type CreditHold } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { parseJsonObject, type JsonObject } from '../json-body.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import { SseSplitter, sseData } from '../sse.ts';
import type { ChatRequest, ChatResponse } from '../upstreams/contract.ts';
import { isTimeout, statusError } from '../upstreams/engine-http.ts';
import { clientErrorFor, tryUpstreams, upstreamCall, type UpstreamCall } from '../core/try-upstreams.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { onResponseClose, type EngineCall } from '../client-gone.ts';
import { envelope } from '../errors.ts';
import { sendStream } from '../metrics/metrics-http.ts';

export const LLM_BODY_LIMIT = 10 * 1024 * 1024;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** Rough token count for text whose usage the engine never reported (about 4 bytes a token). */
export const estimateTokens = (bytes: number) => Math.ceil(bytes / 4);

export function registerChatCompletionRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Keep the raw bytes: they are forwarded as they are.
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: LLM_BODY_LIMIT }, (_req, body, done) => done(null, body));

  const chatCompletion = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const raw = request.body as Buffer | undefined;
    const body = parseJsonObject(raw ?? '');
    const model = ctx.registry.resolve(body.model, 'llm');
    request.modelId = model.id;
    const stream = body.stream === true;
    const clientWantsUsage = stream && (body.stream_options as JsonObject | undefined)?.include_usage === true;
    // The most the request can cost, reserved before the engine runs (402 if the balance, less
    // what the org's running requests reserved, cannot cover it); the debit settles it.
    const hold = await ctx.core.reserve(request.auth, reservationFor(model, body, raw?.length ?? 0, ctx.config.limits.llmReserveMaxTokens));
    // Given back when the response closes, unless a stream has started: the stream settles it
    // itself after its debit (released before that debit, its credit would be free for a moment).
    const settling = { byStream: false };
    onResponseClose(reply, () => settling.byStream || hold.release());

    // No overall deadline here: a long stream is fine as long as the engine keeps sending.
    // The 300 s deadline is the engine's silence (undici's headers and body timeouts). A
    // shutdown whose grace period is over ends the engine request too.
    const engine = upstreamCall(ctx, reply, request.ticket, { deadline: false });
    let res: ChatResponse;
    let answered: UpstreamEntry | undefined;
    try {
      res = await tryUpstreams(ctx, model, engine, (upstream) => {
        const chat = ctx.protocols.get(upstream.protocol)?.chat;
        if (!chat) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot chat.`);
        answered = upstream;
        return chat(upstream, requestFor(upstream, model, raw!, body, stream && !clientWantsUsage, engine));
      });
    } catch (e) {
      if (engine.clientGone) return reply; // the client left before the engine answered
      throw e;
    }

    if (res.statusCode >= 300) {
      // An engine refusing a bad request is the caller's error; anything else is the engine's.
      const failure = statusError(res.statusCode, await res.text().catch(() => ''), answered!.apiKey);
      if (![400, 413, 422].includes(res.statusCode)) {
        ctx.metrics.upstreamError(answered!, 'http_status');
        ctx.upstreamStats?.failedAfterAnswer(answered!.id);
      }
      throw upstreamEnvelope(failure, engine.timeoutMs);
    }
    const promptBytes = raw?.length ?? 0;
    const contentType = res.contentType;

    if (!contentType.includes('text/event-stream')) {
      // Kept as the decoded text: parsed once for the usage and sent as it is.
      let text: string;
      try {
        text = await res.text();
      } catch (e) {
        // The engine stalled or dropped the connection after sending its headers.
        if (engine.clientGone) return reply;
        throw clientErrorFor(e, engine);
      }
      let usage: Usage | undefined;
      try {
        usage = (JSON.parse(text) as { usage?: Usage }).usage;
      } catch {
        throw new ServiceError('upstream_error', 'The model upstream returned a response that is not JSON.');
      }
      const input = usage?.prompt_tokens ?? estimateTokens(promptBytes);
      const output = usage?.completion_tokens ?? 0;
      const cost = llmCostMicros(model.prices, input, output);
      const remaining = await ctx.core.charge(
        request.auth,
        request.id,
        cost,
        {
          modelId: model.id,
          modality: 'llm',
          route: 'chat.completions',
          inputTokens: input,
          outputTokens: output,
        },
        hold,
      );
      setSpendHeaders(reply, cost, remaining);
      return reply
        .code(200)
        .type(contentType || 'application/json')
        .send(text);
    }

    // Streaming: relay events as they arrive. The spend header is the pre-request balance
    // (the cost is unknown until the stream ends).
    setSpendHeaders(reply, null, request.auth.balanceMicros);
    reply.code(200).headers({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    const observed = {
      upstream: answered!,
      firstToken: () => ctx.metrics.firstOutput('llm_first_token', model.id, reply.elapsedTime / 1000),
      started: () => (settling.byStream = true),
    };
    return sendStream(reply, ctx.metrics, relayStream(ctx, request, model, res, clientWantsUsage, promptBytes, engine, observed, hold));
  };

  app.post('/v1/chat/completions', { bodyLimit: LLM_BODY_LIMIT, config: { metered: true } }, (request, reply) => {
    // Held by the lifecycle until it is done: once its client has gone, its connection no longer
    // keeps a shutdown from closing the database under a debit still being written.
    const handled = chatCompletion(request, reply);
    ctx.lifecycle.track(handled);
    return handled;
  });
}

/**
 * What goes to an upstream: the client's bytes, unless the upstream knows the model by another
 * name or the gateway must ask for the usage chunk the client did not ask for (`addUsage`).
 */
function requestFor(upstream: UpstreamEntry, model: ModelEntry, raw: Buffer, body: JsonObject, addUsage: boolean, call: UpstreamCall): ChatRequest {
  const renamed = upstream.upstreamModel !== model.id;
  if (!renamed && !addUsage) return { raw, body, signal: call.signal, timeoutMs: call.timeoutMs };
  const copy: JsonObject = { ...body, model: upstream.upstreamModel };
  if (addUsage) copy.stream_options = { ...plainObject(body.stream_options), include_usage: true };
  // Only the changed members are rewritten in the bytes; everything else stays the client's
  // (a re-serialisation would round a 20-digit seed and respell numbers).
  const patch: Record<string, string> = {};
  if (renamed) patch.model = JSON.stringify(copy.model);
  if (addUsage) patch.stream_options = JSON.stringify(copy.stream_options);
  return { raw: patchTopLevelMembers(raw, patch), body: copy, signal: call.signal, timeoutMs: call.timeoutMs };
}

async function* relayStream(
  ctx: GatewayContext,
  request: FastifyRequest,
  model: ModelEntry,
  res: ChatResponse,
  clientWantsUsage: boolean,
  promptBytes: number,
  engine: EngineCall,
  observed: { upstream: UpstreamEntry; firstToken: () => void; started: () => void },
  hold: CreditHold,
): AsyncGenerator<string> {
  observed.started();
  // The stream outlives its handler: the lifecycle holds it until its debit is written.
  let billed!: () => void;
  ctx.lifecycle.track(new Promise<void>((resolve) => (billed = resolve)));
  const splitter = new SseSplitter();
  let usage: Usage | undefined;
  let deltas = 0;
  try {
    for await (const chunk of res.body) {
      for (const event of splitter.push(chunk as Buffer)) {
        const data = sseData(event);
        if (data !== null && data !== '[DONE]') {
          const parsed = safeJson(data) as { choices?: unknown[]; usage?: Usage | null } | undefined;
          if (parsed?.usage) usage = parsed.usage;
          if (Array.isArray(parsed?.choices) && parsed.choices.some(carriesOutput) && ++deltas === 1) observed.firstToken();
          // The usage chunk we asked for on the client's behalf is not the client's to see.
          if (!clientWantsUsage && parsed?.usage && Array.isArray(parsed.choices) && parsed.choices.length === 0) continue;
        }
        yield event;
      }
    }
    const rest = splitter.rest();
    if (rest.trim()) yield rest;
  } catch (e) {
    const stopped = engine.signal.aborted ? (engine.signal.reason as unknown) : undefined;
    if (!engine.clientGone && isServiceError(stopped)) {
      // The gateway's shutdown grace period is over, or the key was revoked: the same clean
      // ending, saying so.
      yield `data: ${JSON.stringify(envelope(stopped).body)}\n\n`;
      yield 'data: [DONE]\n\n';
    } else if (!engine.clientGone) {
      // The engine died or stalled mid-stream: end the client's stream with an error event
      // it can recognise, then [DONE], instead of cutting the connection.
      ctx.metrics.upstreamError(observed.upstream, isTimeout(e) ? 'timeout' : 'stream_broken');
      const message = isTimeout(e) ? 'The model upstream stopped sending within the deadline.' : 'The model upstream closed the stream unexpectedly.';
      request.log.warn({ err: e }, 'upstream stream ended abnormally');
      yield `data: ${JSON.stringify({ error: { message, type: 'api_error', code: isTimeout(e) ? 'upstream_timeout' : 'upstream_error', param: null } })}\n\n`;
      yield 'data: [DONE]\n\n';
    }
  } finally {
    // Billed once, for what was delivered: the engine's own count when it reported one,
    // otherwise one token per content chunk relayed (not role-only or finish chunks) and an
    // estimate of the prompt.
    const input = usage?.prompt_tokens ?? estimateTokens(promptBytes);
    const output = usage?.completion_tokens ?? deltas;
    const cost = llmCostMicros(model.prices, input, output);
    await ctx.core
      .charge(request.auth, request.id, cost, { modelId: model.id, modality: 'llm', route: 'chat.completions', inputTokens: input, outputTokens: output }, hold)
      .catch((err: unknown) => request.log.error({ err }, 'failed to record usage of a stream'))
      .finally(hold.release);
    billed();
  }
}

/**
 * What a chat request reserves: its prompt (estimated from its size) and all the output it may
 * ask for (max_completion_tokens or max_tokens, else the model's or the gateway's ceiling) for
 * each of its `n` choices. The engine's own count settles it; a prompt that tokenizes to more
 * than the estimate is the one way a chat request can cost more than it reserved.
 */
export function reservationFor(model: ModelEntry, body: JsonObject, promptBytes: number, defaultMaxTokens: number): bigint {
  const asked = positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens);
  const maxOutput = asked ?? model.maxOutputTokens ?? defaultMaxTokens;
  const choices = positiveInt(body.n) ?? 1;
  return llmCostMicros(model.prices, estimateTokens(promptBytes), maxOutput * choices);
}

const positiveInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);

/** A streamed choice that delivers output (text, tool-call arguments...), not only a role or a finish reason. */
function carriesOutput(choice: unknown): boolean {
  const delta = (choice as { delta?: unknown } | null)?.delta;
  if (delta === null || typeof delta !== 'object') return false;
  return Object.entries(delta).some(([k, v]) => k !== 'role' && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0));
}

function plainObject(value: unknown): JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as JsonObject) : {};
}

/**
 * The client's JSON object text with the given top-level members' values replaced (appended
 * when absent; values are JSON texts), every other byte unchanged. `raw` has already been
 * parsed as a JSON object, so the scan below can trust its syntax.
 */
export function patchTopLevelMembers(raw: Buffer, patch: Record<string, string>): Buffer {
  const text = raw.toString('utf8');
  const spans = new Map<string, [number, number]>();
  let i = skipWs(text, 0) + 1; // past '{'
  for (;;) {
    i = skipWs(text, i);
    if (text[i] === ',') i = skipWs(text, i + 1);
    if (i >= text.length || text[i] === '}') break;
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipWs(text, skipWs(text, keyEnd) + 1); // past ':'
    i = valueEnd(text, start);
    spans.set(key, [start, i]); // a repeated key: the last one counts, as in JSON.parse
  }
  const edits: { start: number; end: number; text: string }[] = [];
  const added: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    const span = spans.get(key);
    if (span) edits.push({ start: span[0], end: span[1], text: value });
    else added.push(`${JSON.stringify(key)}:${value}`);
  }
  if (added.length > 0) edits.push({ start: i, end: i, text: (spans.size > 0 ? ',' : '') + added.join(',') });
  let out = text;
  for (const e of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return Buffer.from(out, 'utf8');
}

const isJsonWs = (c: string | undefined) => c === ' ' || c === '\n' || c === '\r' || c === '\t';

function skipWs(text: string, i: number): number {
  while (isJsonWs(text[i])) i++;
  return i;
}

/** End (exclusive) of the string literal that starts at i. */
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '"') return j + 1;
  }
  return text.length;
}

/** End (exclusive) of the JSON value that starts at i. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    for (let j = i; j < text.length;) {
      const d = text[j];
      if (d === '"') {
        j = stringEnd(text, j);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if ((d === '}' || d === ']') && --depth === 0) return j + 1;
      j++;
    }
    return text.length;
  }
  let j = i;
  while (j < text.length && !isJsonWs(text[j]) && text[j] !== ',' && text[j] !== '}' && text[j] !== ']') j++;
  return j;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
