// A response of OpenAI's Responses API (POST /v1/responses) through the LLM pipeline. Per upstream:
// - an engine that serves it (protocol `openai`) gets the client's bytes (only `model` rewritten
//   when the upstream knows the model by another name) and its answer is relayed as it is,
//   streamed event by event; usage is read from `usage` (input_tokens / output_tokens) of the
//   body, or of the stream's final response.completed / response.incomplete / response.failed;
// - an engine without it (the local llama.cpp engine, an OpenAI-compatible server that answers
//   404 on /responses) gets the request translated to a chat completion, and its answer is
//   translated back (responses-via-chat.ts).
// Either way it is metered like chat (llm-run.ts).
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { JsonObject } from '../json-body.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import { SseSplitter, sseData } from '../sse.ts';
import type { ChatResponse } from '../upstreams/contract.ts';
import { tryUpstreams } from '../core/try-upstreams.ts';
import { childController } from '../client-gone.ts';
import { errorText } from '../upstreams/engine-http.ts';
import type { LlmAnswer, LlmAsk } from './chat-completion.ts';
import { ChatFailover, type ChatAttempt } from './chat-failover.ts';
import type { ChatStreamEvent, ChatUsage } from './chat-stream.ts';
import { askChat, LlmRun, parseEngineJson, refuseFailedAnswer, streamEnding, wholeAnswer, type EngineAnswer, type LlmPayer } from './llm-run.ts';
import { patchTopLevelMembers } from './patch-json-members.ts';
import { ResponseItemStore } from './response-item-store.ts';
import { chatRequestFor, referencedItemIds, responseFromChat, responseMeta, responsesUsage, type ResponseMeta } from './responses-via-chat.ts';
import { ResponsesStreamTranslator, streamErrorEvent } from './responses-stream.ts';

/** Item references one request may make (each expands to a stored item). */
export const MAX_ITEM_REFERENCES = 1000;

const REFERENCE_TYPE = Buffer.from('"item_reference"');

/**
 * Refuses a body with more than MAX_ITEM_REFERENCES item references before it is parsed: a
 * 10 MiB body of small references would otherwise build a few hundred thousand objects only to be
 * refused. Counts the JSON string "item_reference" in the raw bytes (inside another string its
 * quotes would be escaped), so it never counts fewer references than there are; one written
 * with escapes is counted after the parse (promptBytes).
 */
export function refuseManyReferences(raw: Buffer): void {
  let count = 0;
  for (let at = raw.indexOf(REFERENCE_TYPE); at !== -1; at = raw.indexOf(REFERENCE_TYPE, at + REFERENCE_TYPE.length)) {
    if (++count > MAX_ITEM_REFERENCES) {
      throw new ServiceError(
        'invalid_request',
        `input: at most ${MAX_ITEM_REFERENCES} item references per request (more given, counted before the body is parsed); send the items themselves.`,
        'input',
      );
    }
  }
}

/** How an engine without the Responses API answers POST /responses: no such route (or method). */
const NO_SUCH_ROUTE = new Set([404, 405, 501]);

interface ResponsesUsage {
  input_tokens?: number;
  output_tokens?: number;
}

interface Answer extends EngineAnswer {
  /** Set when the engine was asked through chat completions: the answer is translated back. */
  via: ResponseMeta | null;
  /** Cancels the request to this engine alone (a chat stream that fails over: chat-failover.ts). */
  controller?: AbortController;
}

/** Responses for one gateway: the items of translated answers, and which upstreams are asked through chat. */
export class ResponseCreator {
  /** The items of translated answers, for item_reference (bounded; see response-item-store.ts). */
  private readonly items = new ResponseItemStore();
  /**
   * Upstreams (id and URL: a new URL is asked again) seen answering 404 on /responses and then
   * answering chat: asked through chat directly from then on. As many as the registry has
   * upstreams; cleared should that ever pass a bound.
   */
  private readonly chatOnly = new Set<string>();

  /**
   * The bytes of what the request sends an engine once its item references are expanded: its own
   * bytes plus each item of this org's that a reference names, counted before anything is built,
   * so the request reserves by what it will cost. More than MAX_ITEM_REFERENCES references is 400;
   * more than `maxBytes` expanded is 413.
   */
  promptBytes(orgId: string, body: JsonObject, rawBytes: number, maxBytes: number): number {
    const ids = referencedItemIds(body);
    if (ids.length > MAX_ITEM_REFERENCES) {
      throw new ServiceError(
        'invalid_request',
        `input: at most ${MAX_ITEM_REFERENCES} item references per request (${ids.length} given); send the items themselves.`,
        'input',
      );
    }
    let bytes = rawBytes;
    for (const id of ids) {
      bytes += typeof id === 'string' ? (this.items.bytesOf(orgId, id) ?? 0) : 0;
      if (bytes > maxBytes) {
        throw new ServiceError('body_too_large', `input: with its item references expanded, the request is larger than ${maxBytes} bytes.`, 'input');
      }
    }
    return bytes;
  }

  /**
   * What a response reserves before its engines are asked, the same for POST /v1/responses and a
   * response.create on the Responses socket: its prompt with its item references expanded
   * (counted and sized first: promptBytes), and `max_output_tokens` in max_tokens' part.
   */
  reserve(ctx: GatewayContext, payer: LlmPayer, model: ModelEntry, raw: Buffer, body: JsonObject, maxBytes: number): Promise<LlmRun> {
    const promptBytes = this.promptBytes(payer.auth.orgId, body, raw.length, maxBytes);
    return LlmRun.reserve(ctx, payer, model, 'responses', { max_tokens: body.max_output_tokens }, promptBytes);
  }

  /** Asks the model's engines; null when the client left before the answer was read. */
  async create(run: LlmRun, ask: LlmAsk): Promise<LlmAnswer | null> {
    const { ctx, model } = run;
    const { raw, body, engine } = ask;
    const orgId = run.payer.auth.orgId;
    const chatOnlyKey = (u: UpstreamEntry) => `${u.id} ${u.url}`;
    let chatBody: JsonObject | undefined; // translated once, for whichever upstream needs it

    const chatRequest = (upstream: UpstreamEntry) => {
      chatBody ??= chatRequestFor(body, (id) => this.items.get(orgId, id));
      const sent = { ...chatBody, model: upstream.upstreamModel };
      return { raw: Buffer.from(JSON.stringify(sent)), body: sent };
    };
    const askThroughChat = async (upstream: UpstreamEntry): Promise<Answer> => {
      const controller = childController(engine.signal);
      const res = await askChat(ctx, model, upstream, { ...chatRequest(upstream), signal: controller.signal, timeoutMs: engine.timeoutMs });
      return { res, upstream, via: responseMeta(body, model.id), controller };
    };

    let answer = await tryUpstreams(ctx, model, engine, async (upstream): Promise<Answer> => {
      const runtime = ctx.protocols.get(upstream.protocol);
      if (runtime?.responses && !this.chatOnly.has(chatOnlyKey(upstream))) {
        const res = await runtime.responses(upstream, { raw: forwardedBytes(raw, upstream, model), body, signal: engine.signal, timeoutMs: engine.timeoutMs });
        if (!NO_SUCH_ROUTE.has(res.statusCode)) return { res, upstream, via: null };
        await errorText(res.body);
        const viaChat = await askThroughChat(upstream);
        if (viaChat.res.statusCode < 300) {
          if (this.chatOnly.size >= 10_000) this.chatOnly.clear();
          this.chatOnly.add(chatOnlyKey(upstream));
        }
        return viaChat;
      }
      return askThroughChat(upstream);
    });
    // An engine that failed (5xx...) before answering is left for the next, asked through chat
    // completions like any engine a stream moves to (chat-failover.ts); none left: its error.
    const failover = new ChatFailover(run, engine, ask.log, chatRequest, body.stream === true);
    let first: ChatAttempt | undefined;
    if (await failover.leftBehind(answer.upstream, answer.res)) {
      first = await failover.open();
      answer = { res: first.res, upstream: first.upstream, via: responseMeta(body, model.id), controller: first.controller };
    }
    await refuseFailedAnswer(ctx, answer, engine.timeoutMs);
    const { res, upstream, via } = answer;

    if (res.contentType.includes('text/event-stream')) {
      if (!via) return { kind: 'stream', events: relayedStream(run, ask, res, upstream) };
      // Through chat completions the stream fails over like a chat stream: the next engine is asked through chat too.
      first ??= failover.adopt(upstream, res, answer.controller ?? new AbortController());
      return { kind: 'stream', events: this.translatedStream(run, ask, failover.events(first), failover, via) };
    }
    const text = await wholeAnswer(res, engine);
    if (text === null) return null;
    const parsed = parseEngineJson(text);
    if (via) {
      const chatUsage = (parsed as { usage?: ChatUsage } | null)?.usage;
      run.engineInput = chatUsage?.prompt_tokens;
      run.engineOutput = chatUsage?.completion_tokens ?? 0;
      const { input, output } = run.tokens();
      const response = responseFromChat(via, parsed, responsesUsage(input, output, chatUsage));
      if (via.stored) this.items.put(orgId, response.output as JsonObject[]);
      const { cost, remaining } = await run.debit();
      return { kind: 'whole', contentType: 'application/json', body: JSON.stringify(response), cost, remaining };
    }
    const usage = (parsed as { usage?: ResponsesUsage } | null)?.usage;
    run.engineInput = usage?.input_tokens;
    run.engineOutput = usage?.output_tokens ?? 0;
    const { cost, remaining } = await run.debit();
    return { kind: 'whole', contentType: res.contentType || 'application/json', body: text, cost, remaining };
  }

  /** A chat completion stream answered as the Responses stream; billed from the engine's usage chunk. */
  private async *translatedStream(
    run: LlmRun,
    ask: LlmAsk,
    chatEvents: AsyncIterable<ChatStreamEvent>,
    failover: ChatFailover,
    meta: ResponseMeta,
  ): AsyncGenerator<string> {
    run.streamStarted();
    const translator = new ResponsesStreamTranslator(meta);
    let finished = false;
    try {
      yield translator.start().join('');
      for await (const event of chatEvents) {
        if (run.countChat(event)) ask.firstOutput();
        const error = event.deltas.find((d) => d.type === 'error');
        if (error) {
          // The engine ended its stream with an error event (a gateway behind a gateway does):
          // the answer is not complete, so it ends with the Responses error event, not response.completed.
          finished = true;
          yield translator.errorEvent(error.code ?? 'upstream_error', error.message ?? 'The model upstream failed mid-stream.');
          return;
        }
        const out = translator.push(event.deltas);
        if (out.length > 0) yield out.join('');
      }
      const { input, output } = run.tokens();
      const events = translator.finishEvents(responsesUsage(input, output, translator.chatUsage));
      finished = true;
      if (meta.stored) this.items.put(run.payer.auth.orgId, translator.output());
      yield events.join('');
    } catch (e) {
      if (!finished) {
        const ending = streamEnding(run.ctx, ask.engine, failover.upstream!, ask.log, e);
        if (ending) yield translator.errorEvent(ending.code, ending.message);
      }
    } finally {
      await run.settleStream(ask.log);
    }
  }
}

/** The client's bytes for an engine that serves /responses; `model` rewritten when the upstream knows it by another name. */
function forwardedBytes(raw: Buffer, upstream: UpstreamEntry, model: ModelEntry): Buffer {
  if (upstream.upstreamModel === model.id) return raw;
  // Only that member is rewritten: the rest stays the client's (numbers, key order).
  return patchTopLevelMembers(raw, { model: JSON.stringify(upstream.upstreamModel) });
}

/** Events of the Responses stream that carry output (text, tool-call arguments...). */
const OUTPUT_EVENT = /^response\.[a-z_.]*\.delta$/;
/** The events that end a Responses stream with the response (and its usage). */
const FINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** An engine's Responses stream relayed event by event; billed from its final response's usage. */
async function* relayedStream(run: LlmRun, ask: LlmAsk, res: ChatResponse, upstream: UpstreamEntry): AsyncGenerator<string> {
  run.streamStarted();
  const splitter = new SseSplitter();
  let sequence = 0;
  try {
    for await (const chunk of res.body) {
      for (const event of splitter.push(chunk)) {
        const data = sseData(event);
        if (data !== null) {
          const parsed = safeJson(data) as { type?: string; sequence_number?: number; response?: { usage?: ResponsesUsage | null } } | undefined;
          if (typeof parsed?.sequence_number === 'number') sequence = parsed.sequence_number + 1;
          const usage = parsed?.type && FINAL_EVENTS.has(parsed.type) ? parsed.response?.usage : undefined;
          if (usage) {
            run.engineInput = usage.input_tokens;
            run.engineOutput = usage.output_tokens;
          }
          if (parsed?.type && OUTPUT_EVENT.test(parsed.type) && ++run.outputEvents === 1) ask.firstOutput();
        }
        yield event;
      }
    }
    const rest = splitter.rest();
    if (rest.trim()) yield rest;
  } catch (e) {
    const ending = streamEnding(run.ctx, ask.engine, upstream, ask.log, e);
    if (ending) yield streamErrorEvent(ending.code, ending.message, sequence);
  } finally {
    await run.settleStream(ask.log);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
