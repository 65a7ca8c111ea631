// The client events of OpenAI's Realtime protocol that a /v1/realtime session accepts, as one
// zod discriminated union on `type` (the way openai-agents-js reads them): GA names, and the beta
// names still read (`transcription_session.update`, beta item and content types). A malformed
// event is refused here, in one place, as a ServiceError naming the field by its path in the
// event (`item.content[0].text`); every handler gets a typed event. `session` objects are read by
// session-config.ts, which names their fields the same way.
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import type { ContentPart, ConversationItem } from './conversation.ts';

/** OpenAI's bound on function names (`^[a-zA-Z0-9_-]{1,64}$`); we bound the length only. */
export const MAX_FUNCTION_NAME = 64;
/** Call ids are an engine's or a client's token (OpenAI's are ~30 characters). */
export const MAX_CALL_ID = 128;
/** Items in a response's `input`, item references included (as many as a conversation holds). */
export const MAX_INPUT_ITEMS = 1_000;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const eventId = z.string().optional();
/** A string of `min` to `max` characters; one message for any other value. */
const stringOf = (min: number, max: number) => {
  const error = `must be a string of ${min} to ${max} characters`;
  return z.string({ error }).min(min, { error }).max(max, { error });
};
const itemId = stringOf(1, 64);
const callId = stringOf(1, MAX_CALL_ID);
const functionName = stringOf(1, MAX_FUNCTION_NAME);

const PART_TYPES = 'must be input_text, output_text, input_audio or output_audio';
/** A content part: text (`text`, or a `transcript` standing for it), or audio whose `transcript` (if given) stands for it: audio in an item is not transcribed. */
const ContentPartSchema = z.discriminatedUnion(
  'type',
  [
    z
      .object({ type: z.enum(['input_text', 'text', 'output_text']), text: z.string().nullish(), transcript: z.string().nullish() })
      .refine((p) => typeof p.text === 'string' || typeof p.transcript === 'string', { path: ['text'], error: 'must be a string' }),
    z.object({ type: z.enum(['input_audio', 'audio', 'output_audio']), text: z.string().nullish(), transcript: z.string().nullish() }),
  ],
  { error: (issue) => (issue.code === 'invalid_union' ? PART_TYPES : 'must be an object') },
);

const MessageItem = z.object({
  type: z.literal('message'),
  id: itemId.nullish(),
  role: z.enum(['user', 'assistant', 'system'], { error: 'must be user, assistant or system' }),
  content: z.array(ContentPartSchema, { error: 'must be an array' }),
});
const FunctionCallItem = z.object({
  type: z.literal('function_call'),
  id: itemId.nullish(),
  call_id: callId,
  name: functionName,
  arguments: z.string().nullish(),
});
const FunctionCallOutputItem = z.object({
  type: z.literal('function_call_output'),
  id: itemId.nullish(),
  call_id: callId,
  output: z.string({ error: 'must be a string' }),
});
const ItemReference = z.object({ type: z.literal('item_reference'), id: z.string({ error: 'must be a string' }) });

/** An item without a `type` is a message, as OpenAI reads it. */
const typedAsMessage = (v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) && !('type' in v) ? { ...v, type: 'message' } : v);
const objectOr = (types: string) => (issue: { code: string; input?: unknown }) =>
  issue.code === 'invalid_union' && issue.input !== null && typeof issue.input === 'object' ? `must be ${types}` : 'must be an object';

const ClientItemSchema = z.preprocess(
  typedAsMessage,
  z.discriminatedUnion('type', [MessageItem, FunctionCallItem, FunctionCallOutputItem], {
    error: objectOr('message, function_call or function_call_output'),
  }),
);
export type ClientItem = z.infer<typeof ClientItemSchema>;

const ResponseInputEntry = z.preprocess(
  typedAsMessage,
  z.discriminatedUnion('type', [MessageItem, FunctionCallItem, FunctionCallOutputItem, ItemReference], {
    error: objectOr('message, function_call, function_call_output or item_reference'),
  }),
);
export type ResponseInputEntry = z.infer<typeof ResponseInputEntry>;

/** response.create's `response`: the per-response overrides are read as session fields are (session-config.ts), the rest here. */
const ResponseOptions = z.object(
  {
    conversation: z.string({ error: 'must be "auto" or "none"' }).nullish(),
    input: z
      .array(ResponseInputEntry, { error: 'must be an array of items' })
      .max(MAX_INPUT_ITEMS, { error: `must have at most ${MAX_INPUT_ITEMS} items (item references included)` })
      .optional(),
    metadata: z.unknown().optional(),
    voice: z.unknown().optional(),
    audio: z.unknown().optional(),
    instructions: z.unknown().optional(),
    output_modalities: z.unknown().optional(),
    modalities: z.unknown().optional(),
    tools: z.unknown().optional(),
    tool_choice: z.unknown().optional(),
    temperature: z.unknown().optional(),
    max_output_tokens: z.unknown().optional(),
    max_response_output_tokens: z.unknown().optional(),
  },
  { error: 'must be an object' },
);
export type ResponseOptions = z.infer<typeof ResponseOptions>;

const SessionObject = z.record(z.string(), z.unknown(), { error: 'must be an object' });

export const ClientEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('session.update'), event_id: eventId, session: SessionObject }),
  z.object({ type: z.literal('transcription_session.update'), event_id: eventId, session: SessionObject }),
  z.object({
    type: z.literal('input_audio_buffer.append'),
    event_id: eventId,
    audio: z.string({ error: 'must be base64-encoded audio' }).regex(BASE64, { error: 'must be base64-encoded audio' }),
  }),
  z.object({ type: z.literal('input_audio_buffer.commit'), event_id: eventId }),
  z.object({ type: z.literal('input_audio_buffer.clear'), event_id: eventId }),
  z.object({ type: z.literal('conversation.item.create'), event_id: eventId, previous_item_id: z.string().nullish(), item: ClientItemSchema }),
  z.object({ type: z.literal('conversation.item.retrieve'), event_id: eventId, item_id: z.string({ error: 'must be a string' }) }),
  z.object({ type: z.literal('conversation.item.delete'), event_id: eventId, item_id: z.string({ error: 'must be a string' }) }),
  z.object({
    type: z.literal('conversation.item.truncate'),
    event_id: eventId,
    item_id: z.string({ error: 'must be a string' }),
    content_index: z.number().int().min(0).optional(),
    audio_end_ms: z.number({ error: 'must be a number of milliseconds, 0 or more' }).min(0, { error: 'must be a number of milliseconds, 0 or more' }),
  }),
  z.object({ type: z.literal('response.create'), event_id: eventId, response: ResponseOptions.optional() }),
  z.object({ type: z.literal('response.cancel'), event_id: eventId, response_id: z.string().optional() }),
  // WebRTC's: over a WebSocket the client holds the audio it has not played.
  z.object({ type: z.literal('output_audio_buffer.clear'), event_id: eventId, response_id: z.string().optional() }),
]);
export type ClientEvent = z.infer<typeof ClientEventSchema>;

const KNOWN_TYPES = new Set(ClientEventSchema.options.map((o) => o.shape.type.value as string));

/** `path` as errors name it: `response.input[3].content[0].text`. */
const pathOf = (path: readonly PropertyKey[]): string =>
  path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), '');

/** One decoded JSON value as a client event, or a ServiceError naming the event's first bad field. */
export function parseClientEvent(value: unknown): ClientEvent {
  const type = (value as { type?: unknown }).type;
  if (!KNOWN_TYPES.has(type as string)) throw new ServiceError('invalid_request', `Unknown event type ${JSON.stringify(type)}.`, 'type');
  const parsed = ClientEventSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = pathOf(issue.path) || 'type';
  const message = issue.code === 'invalid_type' && issue.message.startsWith('Invalid input') ? `must be ${article(issue.expected)}` : issue.message;
  throw new ServiceError('invalid_request', `${param}: ${message}.`, param);
}

const article = (expected: string) => (/^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`);

/** A client's item as the conversation holds it (ids given where the client gave none). */
export function toConversationItem(item: ClientItem, newId: () => string): ConversationItem {
  const id = item.id ?? newId();
  if (item.type === 'function_call')
    return { id, object: 'realtime.item', type: 'function_call', status: 'completed', call_id: item.call_id, name: item.name, arguments: item.arguments ?? '' };
  if (item.type === 'function_call_output')
    return { id, object: 'realtime.item', type: 'function_call_output', status: 'completed', call_id: item.call_id, output: item.output };
  const assistant = item.role === 'assistant';
  const content = item.content.map((c): ContentPart => {
    const text = c.text ?? c.transcript ?? undefined;
    if (c.type === 'input_text' || c.type === 'text' || c.type === 'output_text')
      return assistant ? { type: 'output_text', text: text! } : { type: 'input_text', text: text! };
    return assistant ? { type: 'output_audio', transcript: text ?? '' } : { type: 'input_audio', transcript: text ?? null };
  });
  return { id, object: 'realtime.item', type: 'message', role: item.role, status: 'completed', content };
}
