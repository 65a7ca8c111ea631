// A realtime session's conversation: its items in order (user messages, heard or typed; the
// assistant's answers; function calls and their outputs), as the client sees them in
// conversation.item.* events, and as chat messages for the LLM. Bounded: past MAX_ITEMS or
// MAX_TEXT the oldest items are dropped (OpenAI's truncation "auto" drops the oldest too).
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

export const MAX_ITEMS = 1_000;
/** Characters of text held over all items. */
export const MAX_TEXT = 1_000_000;

const textOf = (item: ConversationItem): string => {
  if (item.type === 'function_call') return item.arguments;
  if (item.type === 'function_call_output') return item.output;
  return item.content.map((c) => ('text' in c ? c.text : (c.transcript ?? ''))).join(' ');
};

export class Conversation {
  private items: ConversationItem[] = [];
  private textLength = 0;

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
    this.textLength += textOf(item).length;
    while (this.items.length > MAX_ITEMS || (this.textLength > MAX_TEXT && this.items.length > 1)) this.textLength -= textOf(this.items.shift()!).length;
    return at === 0 ? null : (this.items[at - 1]?.id ?? null);
  }

  /** Called after an item's text changed in place (an answer growing, a truncation). */
  recount(): void {
    this.textLength = this.items.reduce((n, i) => n + textOf(i).length, 0);
  }

  delete(id: string): boolean {
    const i = this.items.findIndex((x) => x.id === id);
    if (i < 0) return false;
    this.textLength -= textOf(this.items[i]!).length;
    this.items.splice(i, 1);
    return true;
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

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const bad = (param: string, message: string) => new ServiceError('invalid_request', `${param}: ${message}`, param);

/** A client's conversation.item.create item (or a response's input item), checked. */
export function parseClientItem(v: unknown, newId: () => string, path = 'item'): ConversationItem {
  if (!isObj(v)) throw bad(path, 'must be an object');
  const id = v.id === undefined || v.id === null ? newId() : v.id;
  if (typeof id !== 'string' || id.length === 0 || id.length > 64) throw bad(`${path}.id`, 'must be a string of 1 to 64 characters');
  const type = v.type ?? 'message';
  if (type === 'message') {
    const role = v.role;
    if (role !== 'user' && role !== 'assistant' && role !== 'system') throw bad(`${path}.role`, 'must be user, assistant or system');
    if (!Array.isArray(v.content)) throw bad(`${path}.content`, 'must be an array');
    const content = v.content.map((c, i): ContentPart => {
      const p = `${path}.content[${i}]`;
      if (!isObj(c)) throw bad(p, 'must be an object');
      const text = typeof c.text === 'string' ? c.text : typeof c.transcript === 'string' ? c.transcript : undefined;
      if (c.type === 'input_text' || c.type === 'text' || c.type === 'output_text') {
        if (text === undefined) throw bad(`${p}.text`, 'must be a string');
        return role === 'assistant' ? { type: 'output_text', text } : { type: 'input_text', text };
      }
      if (c.type === 'input_audio' || c.type === 'audio' || c.type === 'output_audio') {
        // Audio in an item is not transcribed: its transcript (if given) stands for it.
        return role === 'assistant' ? { type: 'output_audio', transcript: text ?? '' } : { type: 'input_audio', transcript: text ?? null };
      }
      throw bad(`${p}.type`, 'must be input_text, output_text, input_audio or output_audio');
    });
    return { id, object: 'realtime.item', type: 'message', role, status: 'completed', content };
  }
  if (type === 'function_call') {
    if (typeof v.call_id !== 'string' || typeof v.name !== 'string') throw bad(path, 'a function_call needs call_id and name');
    return {
      id,
      object: 'realtime.item',
      type,
      status: 'completed',
      call_id: v.call_id,
      name: v.name,
      arguments: typeof v.arguments === 'string' ? v.arguments : '',
    };
  }
  if (type === 'function_call_output') {
    if (typeof v.call_id !== 'string') throw bad(`${path}.call_id`, 'must be a string');
    if (typeof v.output !== 'string') throw bad(`${path}.output`, 'must be a string');
    return { id, object: 'realtime.item', type, status: 'completed', call_id: v.call_id, output: v.output };
  }
  throw bad(`${path}.type`, 'must be message, function_call or function_call_output');
}
