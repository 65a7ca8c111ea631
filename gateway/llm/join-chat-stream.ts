// A chat answer streamed by an engine that was asked for JSON (`stream: false`), joined into the
// one chat.completion object OpenAI clients expect. Bounded like any whole answer: past
// CHAT_ANSWER_MAX_BYTES of events the engine's stream is abandoned and the request is a 502.
import { answerTooLarge } from '../upstreams/contract.ts';
import type { ChatStreamEvent, ChatUsage } from './chat-stream.ts';
import type { JsonObject } from '../json-body.ts';

interface JoinedToolCall {
  id: string | undefined;
  type: 'function';
  function: { name: string; arguments: string };
}

/** Reads `events` to their end (or throws past `maxBytes`), counting each with `count`; the completion's JSON text. */
export async function joinChatStream(
  events: AsyncIterable<ChatStreamEvent>,
  maxBytes: number,
  count: (event: ChatStreamEvent) => void,
): Promise<{ text: string; usage: ChatUsage | undefined }> {
  let bytes = 0;
  let meta: JsonObject | null = null;
  let content = '';
  let refusal: string | null = null;
  let finishReason: string | null = null;
  let usage: ChatUsage | undefined;
  const toolCalls: JoinedToolCall[] = [];
  for await (const event of events) {
    bytes += event.raw.length;
    if (bytes > maxBytes) throw answerTooLarge(maxBytes);
    count(event);
    meta ??= chunkMeta(event);
    for (const d of event.deltas) {
      if (d.type === 'text') content += d.text;
      else if (d.type === 'refusal') refusal = (refusal ?? '') + d.text;
      else if (d.type === 'finish') finishReason = d.reason;
      else if (d.type === 'usage') usage = d.usage;
      else if (d.type === 'tool_call') {
        const call = (toolCalls[d.index] ??= { id: d.id, type: 'function', function: { name: '', arguments: '' } });
        call.id ??= d.id;
        call.function.name += d.name ?? '';
        call.function.arguments += d.arguments;
      }
    }
  }
  const calls = toolCalls.filter(Boolean);
  const message = { role: 'assistant', content: calls.length > 0 && !content ? null : content, refusal, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
  const completion = {
    id: meta?.id ?? null,
    object: 'chat.completion',
    created: meta?.created ?? null,
    model: meta?.model ?? null,
    choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null }],
    ...(usage ? { usage } : {}),
  };
  return { text: JSON.stringify(completion), usage };
}

/** id, created and model from the first chunk that carries them. */
function chunkMeta(event: ChatStreamEvent): JsonObject | null {
  const data = /^data: ?(.*)$/m.exec(event.raw)?.[1];
  if (!data || data === '[DONE]') return null;
  try {
    const chunk = JSON.parse(data) as JsonObject;
    return typeof chunk.id === 'string' ? { id: chunk.id, created: chunk.created, model: chunk.model } : null;
  } catch {
    return null;
  }
}
