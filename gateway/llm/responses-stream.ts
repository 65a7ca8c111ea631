// The Responses stream of an engine that only has chat completions (responses-via-chat.ts
// translates the request and a whole answer): chat completion chunks in, Responses stream
// events out. No I/O here (create-response.ts calls it).
import { newId } from '../../server/db/ids.ts';
import type { ChatDelta, ChatUsage } from './chat-stream.ts';
import { functionCallItem, messageItem, responseObject, statusFor, type JsonObject, type ResponseMeta, type Usage } from './responses-via-chat.ts';

interface OpenItem {
  outputIndex: number;
  id: string;
  kind: 'message' | 'function_call';
  text: string;
  callId: string;
  name: string;
}

/**
 * Turns a chat completion stream into the Responses stream, in the order of OpenAI's reference:
 * response.created, response.in_progress; per output item output_item.added, (content_part.added,
 * output_text.delta..., output_text.done, content_part.done | function_call_arguments.delta...,
 * function_call_arguments.done), output_item.done; then response.completed (or
 * response.incomplete when the engine stopped at the token limit). Every event carries its
 * sequence_number and is sent with its `event:` line.
 */
export class ResponsesStreamTranslator {
  private sequence = 0;
  private readonly items: OpenItem[] = [];
  private message: OpenItem | null = null;
  private readonly calls = new Map<number, OpenItem>();
  private finish: string | null = null;
  /** The engine's usage chunk, if it sent one (its cached and reasoning token counts are shown). */
  chatUsage: ChatUsage | null = null;

  constructor(private readonly meta: ResponseMeta) {}

  private event(type: string, payload: JsonObject): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload, sequence_number: this.sequence++ })}\n\n`;
  }

  start(): string[] {
    const initial = responseObject(this.meta, 'in_progress', [], null, null);
    return [this.event('response.created', { response: initial }), this.event('response.in_progress', { response: initial })];
  }

  /** The events for one chat stream event's deltas (chat-stream.ts). */
  push(deltas: readonly ChatDelta[]): string[] {
    const out: string[] = [];
    let text = '';
    for (const d of deltas) if (d.type === 'text' || d.type === 'refusal') text += d.text;
    if (text) {
      const m = this.openMessage(out);
      m.text += text;
      out.push(this.event('response.output_text.delta', { item_id: m.id, output_index: m.outputIndex, content_index: 0, delta: text, logprobs: [] }));
    }
    for (const d of deltas) {
      if (d.type === 'tool_call') this.toolCall(d, out);
      else if (d.type === 'finish') this.finish = d.reason;
      else if (d.type === 'usage') this.chatUsage = d.usage;
    }
    return out;
  }

  private toolCall(tc: ChatDelta & { type: 'tool_call' }, out: string[]): void {
    let call = this.calls.get(tc.index);
    if (!call) {
      call = { outputIndex: this.items.length, id: newId('fc'), kind: 'function_call', text: '', callId: tc.id ?? newId('call'), name: tc.name ?? '' };
      this.calls.set(tc.index, call);
      this.items.push(call);
      out.push(
        this.event('response.output_item.added', {
          output_index: call.outputIndex,
          item: functionCallItem(call.id, call.callId, call.name, '', 'in_progress'),
        }),
      );
    }
    if (tc.arguments) {
      call.text += tc.arguments;
      out.push(this.event('response.function_call_arguments.delta', { item_id: call.id, output_index: call.outputIndex, delta: tc.arguments }));
    }
  }

  private openMessage(out: string[]): OpenItem {
    if (this.message) return this.message;
    const m: OpenItem = { outputIndex: this.items.length, id: newId('msg'), kind: 'message', text: '', callId: '', name: '' };
    this.message = m;
    this.items.push(m);
    out.push(this.event('response.output_item.added', { output_index: m.outputIndex, item: messageItem(m.id, '', 'in_progress') }));
    out.push(
      this.event('response.content_part.added', {
        item_id: m.id,
        output_index: m.outputIndex,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
      }),
    );
    return m;
  }

  /** The output items as they stand (complete once finish() has run). */
  output(): JsonObject[] {
    const status = statusFor(this.finish) === 'completed' ? 'completed' : 'incomplete';
    return this.items.map((it) =>
      it.kind === 'message' ? messageItem(it.id, it.text, status) : functionCallItem(it.id, it.callId, it.name, it.text, 'completed'),
    );
  }

  /** Closes every item and ends with response.completed / response.incomplete carrying `usage` (what is billed). */
  finishEvents(usage: Usage): string[] {
    const out: string[] = [];
    // An answer with nothing in it is still one (empty) message, as OpenAI's is.
    if (this.items.length === 0) this.openMessage(out);
    const items = this.output();
    for (const it of this.items) {
      const item = items[it.outputIndex]!;
      if (it.kind === 'message') {
        out.push(this.event('response.output_text.done', { item_id: it.id, output_index: it.outputIndex, content_index: 0, text: it.text, logprobs: [] }));
        out.push(
          this.event('response.content_part.done', {
            item_id: it.id,
            output_index: it.outputIndex,
            content_index: 0,
            part: { type: 'output_text', text: it.text, annotations: [], logprobs: [] },
          }),
        );
      } else {
        out.push(this.event('response.function_call_arguments.done', { item_id: it.id, output_index: it.outputIndex, arguments: it.text }));
      }
      out.push(this.event('response.output_item.done', { output_index: it.outputIndex, item }));
    }
    const status = statusFor(this.finish);
    out.push(
      this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', {
        response: responseObject(this.meta, status, items, usage, this.finish),
      }),
    );
    return out;
  }

  /** The stream's end when the engine failed: OpenAI's `error` event. */
  errorEvent(code: string, message: string): string {
    return streamErrorEvent(code, message, this.sequence++);
  }
}

/** OpenAI's Responses stream `error` event (also used when a forwarded stream breaks). */
export function streamErrorEvent(code: string, message: string, sequence: number): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param: null, sequence_number: sequence })}\n\n`;
}
