// A realtime session's conversation: its items in order (user messages, heard or typed; the
// assistant's answers; function calls and their outputs), as the client sees them in
// conversation.item.* events, and as chat messages for the LLM; and where the words of each
// spoken answer lie in its audio (to cut its transcript where the user stopped listening).
// Bounded: past MAX_ITEMS or MAX_TEXT the oldest items are dropped (OpenAI's truncation "auto"
// drops the oldest too); every string an item holds counts (a function call's name and call id
// too).
import { ServiceError } from '../../server/services/errors.ts';
import type { RealtimeTool } from './session-config.ts';

export type ContentPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_audio'; transcript: string | null }
  | { type: 'output_text'; text: string }
  | { type: 'output_audio'; transcript: string };

export type ConversationItem =
  | {
      id: string;
      object: 'realtime.item';
      type: 'message';
      role: 'user' | 'assistant' | 'system';
      status: 'completed' | 'incomplete' | 'in_progress';
      content: ContentPart[];
    }
  | { id: string; object: 'realtime.item'; type: 'function_call'; status: 'completed' | 'in_progress'; call_id: string; name: string; arguments: string }
  | { id: string; object: 'realtime.item'; type: 'function_call_output'; status: 'completed'; call_id: string; output: string };

/** One spoken span of an answer: its text and where its audio lies in the item's audio (ms). */
export interface SpokenSpan {
  text: string;
  startMs: number;
  endMs: number;
}

export const MAX_ITEMS = 1_000;
/** Characters of text held over all items. */
export const MAX_TEXT = 1_000_000;

/** The characters an item holds: its text, and a function call's name, call id and arguments (no string is built). */
export function charactersOf(item: ConversationItem): number {
  if (item.type === 'function_call') return item.name.length + item.call_id.length + item.arguments.length;
  if (item.type === 'function_call_output') return item.call_id.length + item.output.length;
  let n = 0;
  for (const c of item.content) n += 'text' in c ? c.text.length : (c.transcript?.length ?? 0);
  return n;
}

/** The UTF-8 bytes of an item's text as a chat message carries it (the LLM's reservation is estimated from them). */
export function bytesOf(item: ConversationItem): number {
  if (item.type === 'function_call') return Buffer.byteLength(item.name) + Buffer.byteLength(item.call_id) + Buffer.byteLength(item.arguments);
  if (item.type === 'function_call_output') return Buffer.byteLength(item.call_id) + Buffer.byteLength(item.output);
  let n = 0;
  for (const c of item.content) n += Buffer.byteLength('text' in c ? c.text : (c.transcript ?? ''));
  return n;
}

export class Conversation {
  private items: ConversationItem[] = [];
  private textLength = 0;
  /** The spoken spans of the assistant's audio items. */
  private readonly spans = new Map<string, readonly SpokenSpan[]>();

  get(id: string): ConversationItem | undefined {
    return this.items.find((i) => i.id === id);
  }

  lastId(): string | null {
    return this.items.at(-1)?.id ?? null;
  }

  /** Adds `item` after `previousId` (null: first; undefined: last); returns the id of the item before it. */
  add(item: ConversationItem, previousId?: string | null): string | null {
    let at = this.items.length;
    if (previousId === null) at = 0;
    else if (previousId !== undefined) {
      const i = this.items.findIndex((x) => x.id === previousId);
      if (i < 0) throw new ServiceError('invalid_request', `previous_item_id: no item with id '${previousId}' in the conversation.`, 'previous_item_id');
      at = i + 1;
    }
    if (this.get(item.id)) throw new ServiceError('invalid_request', `item.id: an item with id '${item.id}' is already in the conversation.`, 'item.id');
    this.items.splice(at, 0, item);
    this.textLength += charactersOf(item);
    while (this.items.length > MAX_ITEMS || (this.textLength > MAX_TEXT && this.items.length > 1)) {
      const dropped = this.items.shift()!;
      this.textLength -= charactersOf(dropped);
      this.spans.delete(dropped.id);
    }
    return at === 0 ? null : (this.items[at - 1]?.id ?? null);
  }

  /** Called after an item's text changed in place (an answer growing, a truncation). */
  recount(): void {
    this.textLength = this.items.reduce((n, i) => n + charactersOf(i), 0);
  }

  delete(id: string): boolean {
    const i = this.items.findIndex((x) => x.id === id);
    if (i < 0) return false;
    this.textLength -= charactersOf(this.items[i]!);
    this.items.splice(i, 1);
    this.spans.delete(id);
    return true;
  }

  /** Where the words of a spoken answer lie in its audio (kept while the item is). */
  setSpans(id: string, spans: readonly SpokenSpan[]): void {
    if (this.get(id)) this.spans.set(id, spans);
  }

  /**
   * An assistant's audio item cut at `ms` of its audio (what the user heard): its transcript
   * keeps the words spoken by then, and it is incomplete.
   */
  cutAudio(item: ConversationItem & { type: 'message' }, ms: number, spans = this.spans.get(item.id) ?? []): void {
    const part = item.content[0];
    if (part?.type !== 'output_audio') return;
    part.transcript = transcriptUpTo(spans, ms);
    item.status = 'incomplete';
    this.recount();
  }

  /** Milliseconds of audio an assistant's item has (its last span's end). */
  audioMs(id: string): number {
    return this.spans.get(id)?.at(-1)?.endMs ?? 0;
  }

  all(): readonly ConversationItem[] {
    return this.items;
  }
}

type ChatMessage = Record<string, unknown>;

/** The conversation (or a response's own input) as chat messages, after the instructions. */
export function chatMessages(instructions: string, items: readonly ConversationItem[]): ChatMessage[] {
  const messages: ChatMessage[] = instructions ? [{ role: 'system', content: instructions }] : [];
  for (const item of items) {
    if (item.type === 'message') {
      const text = item.content
        .map((c) => ('text' in c ? c.text : (c.transcript ?? '')))
        .join(' ')
        .trim();
      if (text) messages.push({ role: item.role, content: text });
    } else if (item.type === 'function_call') {
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
      const last = messages.at(-1);
      // Calls of one answer go in one assistant message, as chat has them.
      if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) (last.tool_calls as unknown[]).push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else {
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: item.output });
    }
  }
  return messages;
}

export function chatTools(tools: RealtimeTool[]): object[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: t.name, ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { parameters: t.parameters } : {}) },
  }));
}

/** Realtime's tool_choice (`auto`, `none`, `required`, `{type: "function", name}`) as chat's. */
export function chatToolChoice(choice: unknown): unknown {
  if (choice !== null && typeof choice === 'object' && (choice as { name?: unknown }).name)
    return { type: 'function', function: { name: (choice as { name: string }).name } };
  return choice;
}

/** The words of the spans heard by `ms`: whole spans, and of the span being played the share of its words its played audio is. */
export function transcriptUpTo(spans: readonly SpokenSpan[], ms: number): string {
  const heard: string[] = [];
  for (const s of spans) {
    if (s.startMs >= ms) break;
    if (s.endMs <= ms) {
      heard.push(s.text);
      continue;
    }
    const words = s.text.split(/\s+/);
    const share = Math.floor((words.length * (ms - s.startMs)) / Math.max(1, s.endMs - s.startMs));
    if (share > 0) heard.push(words.slice(0, share).join(' '));
    break;
  }
  return heard.join(' ');
}
