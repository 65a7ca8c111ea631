// A chat completion (POST /v1/chat/completions) through the LLM pipeline: the client's body goes
// to the engine as sent (only `model` rewritten when the upstream knows the model by another
// name, and `stream_options.include_usage` added to streams so that usage is always metered);
// the answer comes back as the engine produced it, streamed event by event.
import type { FastifyBaseLogger } from 'fastify';
import type { EngineCall } from '../client-gone.ts';
import { CHAT_ANSWER_MAX_BYTES } from '../upstreams/engine-http.ts';
import { isUpstreamError } from '../upstreams/contract.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { ChatFailover } from './chat-failover.ts';
import { joinChatStream } from './join-chat-stream.ts';
import type { JsonObject } from '../json-body.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import type { ChatStreamEvent, ChatUsage } from './chat-stream.ts';
import { parseEngineJson, streamEnding, type LlmRun } from './llm-run.ts';
import { patchTopLevelMembers } from './patch-json-members.ts';

/** What a route sends: a whole body, already debited (its cost and the balance after), or a stream that debits itself when it ends. */
export type LlmAnswer =
  { kind: 'whole'; contentType: string; body: string; cost: bigint; remaining: bigint } | { kind: 'stream'; events: AsyncIterable<string> };

export interface LlmAsk {
  /** The client's bytes and their parse. */
  raw: Buffer;
  body: JsonObject;
  engine: EngineCall;
  log: FastifyBaseLogger;
  /** Called at the first output (the first-token latency metric). */
  firstOutput: () => void;
}

/** Asks the model's engines; null when the client left before the answer was read. */
export async function completeChat(run: LlmRun, ask: LlmAsk): Promise<LlmAnswer | null> {
  const { raw, body, engine } = ask;
  const stream = body.stream === true;
  const clientWantsUsage = stream && (body.stream_options as JsonObject | undefined)?.include_usage === true;
  const failover = new ChatFailover(run, engine, ask.log, (u) => requestFor(u, run.model.id, raw, body, stream && !clientWantsUsage), stream);
  const first = await failover.open();
  const { res } = first;

  if (!res.contentType.includes('text/event-stream')) {
    // Kept as the decoded text: parsed once for the usage and sent as it is.
    const text = await failover.wholeText(first, CHAT_ANSWER_MAX_BYTES);
    if (text === null) return null;
    const usage = (parseEngineJson(text) as { usage?: ChatUsage } | null)?.usage;
    run.engineInput = usage?.prompt_tokens;
    run.engineOutput = usage?.completion_tokens ?? 0;
    const { cost, remaining } = await run.debit();
    return { kind: 'whole', contentType: res.contentType || 'application/json', body: text, cost, remaining };
  }
  if (!stream) {
    // Asked for JSON, the engine streamed: joined into one completion, bounded as a whole answer is.
    let joined;
    try {
      joined = await joinChatStream(failover.events(first), CHAT_ANSWER_MAX_BYTES, (event) => run.countChat(event));
    } catch (e) {
      if (engine.clientGone) return null;
      throw isUpstreamError(e) ? upstreamEnvelope(e, engine.timeoutMs) : e;
    }
    const { cost, remaining } = await run.debit();
    return { kind: 'whole', contentType: 'application/json', body: joined.text, cost, remaining };
  }
  return { kind: 'stream', events: relayChatStream(run, ask, failover.events(first), failover, clientWantsUsage) };
}

/**
 * What goes to an upstream: the client's bytes, unless the upstream knows the model by another
 * name or the gateway must ask for the usage chunk the client did not ask for (`addUsage`).
 */
function requestFor(upstream: UpstreamEntry, modelId: string, raw: Buffer, body: JsonObject, addUsage: boolean): { raw: Buffer; body: JsonObject } {
  const renamed = upstream.upstreamModel !== modelId;
  if (!renamed && !addUsage) return { raw, body };
  const copy: JsonObject = { ...body, model: upstream.upstreamModel };
  if (addUsage) copy.stream_options = { ...plainObject(body.stream_options), include_usage: true };
  // Only the changed members are rewritten in the bytes; everything else stays the client's.
  const patch: Record<string, string> = {};
  if (renamed) patch.model = JSON.stringify(copy.model);
  if (addUsage) patch.stream_options = JSON.stringify(copy.stream_options);
  return { raw: patchTopLevelMembers(raw, patch), body: copy };
}

/** The engines' events relayed as they arrive (chat-failover.ts); billed once at the end, for what was delivered. */
async function* relayChatStream(
  run: LlmRun,
  ask: LlmAsk,
  events: AsyncIterable<ChatStreamEvent>,
  failover: ChatFailover,
  clientWantsUsage: boolean,
): AsyncGenerator<string> {
  run.streamStarted();
  try {
    for await (const event of events) {
      if (run.countChat(event)) ask.firstOutput();
      // The usage chunk asked for on the client's behalf is not the client's to see.
      if (event.usageOnly && !clientWantsUsage) continue;
      yield event.raw;
    }
  } catch (e) {
    // The engine died or stalled mid-stream, the gateway's shutdown grace period is over, or the
    // key was revoked: the client's stream ends with an error event it can recognise, then
    // [DONE], instead of a cut connection.
    const error = streamEnding(run.ctx, ask.engine, failover.upstream!, ask.log, e);
    if (error) yield `data: ${JSON.stringify({ error })}\n\ndata: [DONE]\n\n`;
  } finally {
    await run.settleStream(ask.log);
  }
}

function plainObject(value: unknown): JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as JsonObject) : {};
}
