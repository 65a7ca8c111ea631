// OpenAI's Responses API answered by an engine that only has chat completions (the local
// llama.cpp engine, OpenAI-compatible servers without /responses): the request translated to a
// chat completion, the engine's answer translated back, whole or as the Responses stream events.
// Pure functions and one stream translator: no I/O here (create-response.ts calls them).
//
// References: platform.openai.com/docs/api-reference/responses/create (request and Response
// object), .../responses-streaming (events), .../chat/create (the chat side). What the Vercel AI
// SDK sends and reads (@ai-sdk/openai, src/responses/) was checked against this.
//
// What a chat completion can express is translated; what it cannot (stored responses,
// hosted tools, log-probabilities) is refused with a 400 naming the field. Bookkeeping fields
// that change nothing the engine does (store, metadata, include, reasoning...) are not sent.
import { ServiceError } from '../../server/services/errors.ts';
import { newId } from '../../server/db/ids.ts';
import type { ChatUsage } from './chat-stream.ts';

export type JsonObject = Record<string, unknown>;

const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
const invalid = (message: string, param: string) => new ServiceError('invalid_request', message, param);

// ---------------------------------------------------------------------------------------------
// Request: Responses -> chat completions

/** Finds an output item of an earlier response by id (`item_reference`); undefined when unknown. */
export type ItemLookup = (id: string) => JsonObject | undefined;

/** The ids the request's `item_reference`s name, in `instructions` and `input`: what chatRequestFor would look up. */
export function referencedItemIds(body: JsonObject): unknown[] {
  const ids: unknown[] = [];
  for (const items of [body.instructions, body.input]) {
    if (!Array.isArray(items)) continue;
    for (const item of items) if (isObject(item) && item.type === 'item_reference') ids.push(item.id);
  }
  return ids;
}

/** Responses features a chat completion has no way to carry. */
const UNSUPPORTED: Record<string, string> = {
  previous_response_id: 'responses are not stored by this engine: send the whole conversation in `input`',
  conversation: 'conversations are not stored by this engine: send the whole conversation in `input`',
  prompt: 'prompt templates are not stored here: send the prompt text in `input`',
  top_logprobs: 'this engine is reached through chat completions, which the gateway does not translate log-probabilities from',
};

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | JsonObject[] | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/**
 * The chat completion request for a Responses request (`model` left for the caller to set).
 * Streams ask for the usage chunk: the route meters from it.
 */
export function chatRequestFor(body: JsonObject, lookup: ItemLookup): JsonObject {
  for (const [field, why] of Object.entries(UNSUPPORTED)) {
    const v = body[field];
    if (v !== undefined && v !== null && v !== 0) throw invalid(`${field} is not supported for this model: ${why}.`, field);
  }
  if (body.background === true) throw invalid('background is not supported: responses are answered while the request is open.', 'background');
  // Other fields (store, metadata, include, truncation, user, reasoning, caching hints...)
  // change nothing a chat engine does and are not sent to it.

  const messages: ChatMessage[] = [];
  if (typeof body.instructions === 'string' && body.instructions) messages.push({ role: 'system', content: body.instructions });
  else if (Array.isArray(body.instructions)) addItems(messages, body.instructions, 'instructions', lookup);
  else if (body.instructions !== undefined && body.instructions !== null && body.instructions !== '')
    throw invalid('instructions must be a string.', 'instructions');

  const input = body.input;
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) addItems(messages, input, 'input', lookup);
  else throw invalid('input must be a string or an array of input items.', 'input');
  if (messages.length === 0) throw invalid('input must contain at least one message.', 'input');

  const chat: JsonObject = { messages };
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null) chat.max_tokens = body.max_output_tokens;
  for (const field of ['temperature', 'top_p'] as const) if (body[field] !== undefined && body[field] !== null) chat[field] = body[field];
  Object.assign(chat, toolsFor(body));
  const format = isObject(body.text) ? body.text.format : undefined;
  if (format !== undefined && format !== null) chat.response_format = responseFormatFor(format);
  if (body.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return chat;
}

function addItems(messages: ChatMessage[], items: unknown[], param: string, lookup: ItemLookup): void {
  items.forEach((raw, i) => {
    const at = `${param}[${i}]`;
    let item = raw;
    if (isObject(item) && item.type === 'item_reference') {
      const id = item.id;
      const found = typeof id === 'string' ? lookup(id) : undefined;
      if (!found) {
        throw invalid(
          `${at}: item '${String(id)}' is not known here (this engine keeps the items of its answers for an hour, on this gateway replica): send the item itself (Vercel AI SDK: providerOptions.openai.store = false).`,
          at,
        );
      }
      item = found;
    }
    if (!isObject(item)) throw invalid(`${at} must be an object.`, at);
    addItem(messages, item, at);
  });
}

function addItem(messages: ChatMessage[], item: JsonObject, at: string): void {
  const type = item.type ?? 'message';
  switch (type) {
    case 'message': {
      const role = item.role === 'developer' ? 'system' : item.role;
      if (role !== 'system' && role !== 'user' && role !== 'assistant') throw invalid(`${at}.role must be user, assistant, system or developer.`, `${at}.role`);
      const content = contentFor(item.content, `${at}.content`, role === 'user');
      const last = messages.at(-1);
      // An assistant's text and its tool calls are one chat message, whichever item came first.
      if (role === 'assistant' && last?.role === 'assistant' && last.content === null && typeof content === 'string') last.content = content;
      else messages.push({ role, content });
      return;
    }
    case 'function_call': {
      const { call_id: callId, name, arguments: args } = item;
      if (typeof callId !== 'string' || typeof name !== 'string' || typeof args !== 'string') {
        throw invalid(`${at}: a function_call needs call_id, name and arguments (strings).`, at);
      }
      const call = { id: callId, type: 'function' as const, function: { name, arguments: args } };
      const last = messages.at(-1);
      // Parallel calls (consecutive function_call items) are one assistant message with several tool_calls.
      if (last?.role === 'assistant' && !last.tool_calls?.length && typeof last.content === 'string') last.tool_calls = [call];
      else if (last?.role === 'assistant' && last.tool_calls) last.tool_calls.push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      return;
    }
    case 'function_call_output': {
      if (typeof item.call_id !== 'string') throw invalid(`${at}.call_id must be a string.`, `${at}.call_id`);
      const output = typeof item.output === 'string' ? item.output : contentFor(item.output, `${at}.output`, false);
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: typeof output === 'string' ? output : JSON.stringify(output) });
      return;
    }
    case 'reasoning':
      // A chat completion takes no reasoning back; the model reasons afresh.
      return;
    default:
      throw invalid(`${at}: items of type '${String(type)}' need a built-in tool this engine does not have.`, `${at}.type`);
  }
}

const TEXT_PARTS = new Set(['input_text', 'output_text', 'text', 'refusal']);

/** Message content as chat content: a string when it is only text (what every engine takes), else parts. */
function contentFor(content: unknown, at: string, user: boolean): string | JsonObject[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(`${at} must be a string or an array of content parts.`, at);
  const parts = content.map((part, j): JsonObject => {
    const where = `${at}[${j}]`;
    if (!isObject(part)) throw invalid(`${where} must be an object.`, where);
    if (TEXT_PARTS.has(String(part.type))) {
      const text = part.type === 'refusal' ? part.refusal : part.text;
      if (typeof text !== 'string') throw invalid(`${where}.text must be a string.`, `${where}.text`);
      return { type: 'text', text };
    }
    if (user && part.type === 'input_image' && typeof part.image_url === 'string') {
      return { type: 'image_url', image_url: { url: part.image_url, ...(typeof part.detail === 'string' ? { detail: part.detail } : {}) } };
    }
    if (user && part.type === 'input_file' && (typeof part.file_data === 'string' || typeof part.file_id === 'string')) {
      const file: JsonObject = {};
      for (const k of ['file_data', 'file_id', 'filename']) if (typeof part[k] === 'string') file[k] = part[k];
      return { type: 'file', file };
    }
    throw invalid(`${where}: content of type '${String(part.type)}' cannot be sent to this engine.`, `${where}.type`);
  });
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text as string).join('') : parts;
}

function toolsFor(body: JsonObject): JsonObject {
  if (body.tools === undefined || body.tools === null) return {};
  if (!Array.isArray(body.tools)) throw invalid('tools must be an array.', 'tools');
  let tools = body.tools.map((tool, i) => {
    if (!isObject(tool) || tool.type !== 'function' || typeof tool.name !== 'string') {
      throw invalid(
        `tools[${i}]: only function tools can be used with this engine (got '${isObject(tool) ? String(tool.type) : typeof tool}').`,
        `tools[${i}]`,
      );
    }
    const fn: JsonObject = { name: tool.name };
    for (const k of ['description', 'parameters', 'strict']) if (tool[k] !== undefined && tool[k] !== null) fn[k] = tool[k];
    return { type: 'function', function: fn };
  });
  const out: JsonObject = {};
  const choice = body.tool_choice;
  if (choice === 'auto' || choice === 'none' || choice === 'required') out.tool_choice = choice;
  else if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string')
    out.tool_choice = { type: 'function', function: { name: choice.name } };
  else if (isObject(choice) && choice.type === 'allowed_tools' && Array.isArray(choice.tools)) {
    // The allowed subset, as the only tools offered.
    const allowed = new Set(choice.tools.map((t) => (isObject(t) ? t.name : undefined)));
    tools = tools.filter((t) => allowed.has((t.function as JsonObject).name));
    out.tool_choice = choice.mode === 'required' ? 'required' : 'auto';
  } else if (choice !== undefined && choice !== null) throw invalid('tool_choice must be auto, none, required, a function or allowed_tools.', 'tool_choice');
  if (tools.length > 0) out.tools = tools;
  else delete out.tool_choice;
  if (tools.length > 0 && typeof body.parallel_tool_calls === 'boolean') out.parallel_tool_calls = body.parallel_tool_calls;
  return out;
}

function responseFormatFor(format: unknown): JsonObject | undefined {
  if (!isObject(format)) throw invalid('text.format must be an object.', 'text.format');
  switch (format.type) {
    case 'text':
      return { type: 'text' };
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const schema: JsonObject = {};
      for (const k of ['name', 'description', 'schema', 'strict']) if (format[k] !== undefined && format[k] !== null) schema[k] = format[k];
      return { type: 'json_schema', json_schema: schema };
    }
    default:
      throw invalid(`text.format.type must be text, json_object or json_schema.`, 'text.format.type');
  }
}

// ---------------------------------------------------------------------------------------------
// Answer: chat completion -> Response object

export interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responsesUsage(input: number, output: number, chat?: ChatUsage | null): Usage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: chat?.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: chat?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: input + output,
  };
}

/** What a Response echoes of its request, and its identity. */
export interface ResponseMeta {
  id: string;
  createdAt: number;
  /** The model as the client named it. */
  model: string;
  request: JsonObject;
  /** Whether the output items are kept for `item_reference` (store not false). */
  stored: boolean;
}

export function responseMeta(request: JsonObject, model: string): ResponseMeta {
  return { id: newId('resp'), createdAt: Math.floor(Date.now() / 1000), model, request, stored: request.store !== false };
}

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** A Response object (the fields of OpenAI's reference, echoing the request where it says so). */
export function responseObject(
  meta: ResponseMeta,
  status: Status,
  output: JsonObject[],
  usage: Usage | null,
  finish: string | null,
  error: JsonObject | null = null,
): JsonObject {
  const r = meta.request;
  const incomplete = finish === 'length' ? { reason: 'max_output_tokens' } : finish === 'content_filter' ? { reason: 'content_filter' } : null;
  return {
    id: meta.id,
    object: 'response',
    created_at: meta.createdAt,
    status,
    ...(status === 'completed' || status === 'incomplete' ? { completed_at: Math.floor(Date.now() / 1000) } : {}),
    error,
    incomplete_details: status === 'incomplete' ? incomplete : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    model: meta.model,
    output,
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: meta.stored,
    temperature: r.temperature ?? null,
    text: { format: isObject(r.text) && r.text.format ? r.text.format : { type: 'text' } },
    tool_choice: r.tool_choice ?? 'auto',
    tools: Array.isArray(r.tools) ? r.tools : [],
    top_p: r.top_p ?? null,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: isObject(r.metadata) ? r.metadata : {},
  };
}

/** A finish reason of chat that means the answer was cut (Responses: status incomplete). */
export const statusFor = (finish: string | null): Status => (finish === 'length' || finish === 'content_filter' ? 'incomplete' : 'completed');

// In progress (output_item.added), the item has no parts yet: content_part.added brings them.
export const messageItem = (id: string, text: string, status: 'in_progress' | 'completed' | 'incomplete', refusal?: string): JsonObject => ({
  type: 'message',
  id,
  status,
  role: 'assistant',
  content:
    status === 'in_progress'
      ? []
      : [...(text || !refusal ? [{ type: 'output_text', text, annotations: [], logprobs: [] }] : []), ...(refusal ? [{ type: 'refusal', refusal }] : [])],
});

export const functionCallItem = (id: string, callId: string, name: string, args: string, status: 'in_progress' | 'completed'): JsonObject => ({
  type: 'function_call',
  id,
  call_id: callId,
  name,
  arguments: args,
  status,
});

interface ChatCompletion {
  choices?: {
    message?: { content?: string | null; refusal?: string | null; tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] };
    finish_reason?: string | null;
  }[];
  usage?: ChatUsage;
}

/** The Response for a whole chat completion; `usage` is what is billed (the engine's own count where it gave one). */
export function responseFromChat(meta: ResponseMeta, completion: unknown, usage: Usage): JsonObject {
  const choice = (completion as ChatCompletion | null)?.choices?.[0];
  if (!choice) throw new ServiceError('upstream_error', 'The model upstream answered a chat completion without choices.');
  const message = choice.message ?? {};
  const finish = choice.finish_reason ?? null;
  const output: JsonObject[] = [];
  const text = typeof message.content === 'string' ? message.content : '';
  const refusal = typeof message.refusal === 'string' && message.refusal ? message.refusal : undefined;
  const status = statusFor(finish);
  if (text || refusal || !message.tool_calls?.length)
    output.push(messageItem(newId('msg'), text, status === 'completed' ? 'completed' : 'incomplete', refusal));
  for (const call of message.tool_calls ?? []) {
    output.push(functionCallItem(newId('fc'), call.id ?? newId('call'), call.function?.name ?? '', call.function?.arguments ?? '', 'completed'));
  }
  return responseObject(meta, status, output, usage, finish);
}
