// An engine's chat completion stream (OpenAI's chat.completion.chunk objects as server-sent
// events, ending with `data: [DONE]`), read here once for every caller: the chat relay, the
// Responses translation and a realtime response. Each event keeps its bytes (the relay forwards
// them unchanged) and says what it carries as typed deltas.
// Reference: platform.openai.com/docs/api-reference/chat-streaming.
import { SseSplitter, sseData } from '../sse.ts';

/** An engine's token counts (`usage`), as chat completions report them. */
export interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}

export type ChatDelta =
  | { type: 'text'; text: string }
  | { type: 'refusal'; text: string }
  /** A piece of tool call `index`: its id and name come with its first piece, its arguments in pieces. */
  | { type: 'tool_call'; index: number; id: string | undefined; name: string | undefined; arguments: string }
  | { type: 'finish'; reason: string }
  | { type: 'usage'; usage: ChatUsage }
  /** The engine ended its stream with an error object (a gateway behind a gateway does). */
  | { type: 'error'; code: string | undefined; message: string | undefined };

export interface ChatStreamEvent {
  /** The event as the engine sent it, its blank line included. */
  raw: string;
  /**
   * What it carries, in the chunk's order. Read from the first choice only: the gateway's own
   * requests ask for one (a client's `n` is relayed, not read). Empty for `[DONE]`, comments
   * and data that is not JSON.
   */
  deltas: readonly ChatDelta[];
  /**
   * It delivers output in some choice (text, tool-call arguments, reasoning...), not only a
   * role or a finish reason: what first-token latency waits for, and what a stream whose
   * engine reports no usage is billed by, one token each.
   */
  output: boolean;
  /** The usage chunk alone (no choices), which `stream_options.include_usage` adds at the end. */
  usageOnly: boolean;
  /** `data: [DONE]`: the engine finished its stream. */
  done?: boolean;
  /** Data that is not a JSON object: the engine broke the protocol (a failover reason: chat-failover.ts). */
  malformed?: boolean;
}

const NOTHING: readonly ChatDelta[] = Object.freeze([]);

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
const stringOr = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Bytes in, events out, as they complete. */
export class ChatStreamParser {
  private readonly splitter = new SseSplitter();

  push(bytes: Uint8Array): ChatStreamEvent[] {
    return this.splitter.push(bytes).map(parseEvent);
  }

  /** The last event when the stream ended without its blank line. */
  end(): ChatStreamEvent[] {
    const rest = this.splitter.rest();
    return rest.trim() ? [parseEvent(rest)] : [];
  }
}

/** An engine's chat stream as its events; the body's failures (the engine died or stalled) are thrown as they are. */
export async function* chatStreamEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<ChatStreamEvent> {
  const parser = new ChatStreamParser();
  for await (const bytes of body) yield* parser.push(bytes);
  yield* parser.end();
}

function parseEvent(raw: string): ChatStreamEvent {
  const data = sseData(raw);
  if (data === null) return { raw, deltas: NOTHING, output: false, usageOnly: false };
  if (data === '[DONE]') return { raw, deltas: NOTHING, output: false, usageOnly: false, done: true };
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    return { raw, deltas: NOTHING, output: false, usageOnly: false, malformed: true };
  }
  if (!isObject(chunk)) return { raw, deltas: NOTHING, output: false, usageOnly: false, malformed: true };
  const { choices, usage, error } = chunk;
  const deltas: ChatDelta[] = [];
  if (isObject(error)) deltas.push({ type: 'error', code: stringOr(error.code), message: stringOr(error.message) });
  const first = Array.isArray(choices) ? choices[0] : undefined;
  if (isObject(first)) readChoice(first, deltas);
  if (isObject(usage)) deltas.push({ type: 'usage', usage: usage as ChatUsage });
  return {
    raw,
    deltas,
    output: Array.isArray(choices) && choices.some(carriesOutput),
    usageOnly: isObject(usage) && Array.isArray(choices) && choices.length === 0,
  };
}

function readChoice(choice: JsonObject, deltas: ChatDelta[]): void {
  const delta = choice.delta;
  if (isObject(delta)) {
    if (typeof delta.content === 'string' && delta.content) deltas.push({ type: 'text', text: delta.content });
    if (typeof delta.refusal === 'string' && delta.refusal) deltas.push({ type: 'refusal', text: delta.refusal });
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) {
        if (!isObject(call)) continue;
        const fn = isObject(call.function) ? call.function : {};
        deltas.push({
          type: 'tool_call',
          index: typeof call.index === 'number' ? call.index : 0,
          id: stringOr(call.id),
          name: stringOr(fn.name),
          arguments: stringOr(fn.arguments) ?? '',
        });
      }
    }
  }
  if (typeof choice.finish_reason === 'string' && choice.finish_reason) deltas.push({ type: 'finish', reason: choice.finish_reason });
}

function carriesOutput(choice: unknown): boolean {
  const delta = (choice as { delta?: unknown } | null)?.delta;
  if (delta === null || typeof delta !== 'object') return false;
  return Object.entries(delta).some(([k, v]) => k !== 'role' && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0));
}
