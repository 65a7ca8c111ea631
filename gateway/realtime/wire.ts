// The Realtime protocol's wire format, for transports that carry its JSON messages (a WebSocket,
// a WebRTC data channel): a message read as a client event, a server event written with its
// event id and, for clients on the beta protocol (`OpenAI-Beta: realtime=v1`), the beta's names.
import { randomBytes } from 'node:crypto';
import { isServiceError } from '../../server/services/errors.ts';
import { parseClientEvent, type ClientEvent } from './client-events.ts';
import type { EventError, ServerEvent } from './server-events.ts';

/** One message from the client: an event, or why it is not one (the session answers it with an error event, in order). */
export type ClientMessage = { event: ClientEvent; size: number } | { unreadable: EventError; eventId: string | null; size: number };

export function readClientMessage(data: Buffer, isBinary: boolean): ClientMessage {
  const size = data.length;
  if (isBinary)
    return {
      unreadable: { code: 'invalid_message', message: 'Send JSON events as text messages; audio goes in input_audio_buffer.append as base64.' },
      eventId: null,
      size,
    };
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as { type?: unknown }).type !== 'string')
    return { unreadable: { code: 'invalid_message', message: 'Each message must be a JSON object with a string "type".' }, eventId: null, size };
  const eventId = (value as { event_id?: unknown }).event_id;
  try {
    return { event: parseClientEvent(value), size };
  } catch (e) {
    if (!isServiceError(e)) throw e;
    return { unreadable: { code: e.code, message: e.message, param: e.param }, eventId: typeof eventId === 'string' ? eventId : null, size };
  }
}

/** GA name -> beta name, for clients on the beta protocol. */
const BETA_NAMES: Partial<Record<ServerEvent['type'], string>> = {
  'response.output_audio.delta': 'response.audio.delta',
  'response.output_audio.done': 'response.audio.done',
  'response.output_audio_transcript.delta': 'response.audio_transcript.delta',
  'response.output_audio_transcript.done': 'response.audio_transcript.done',
  'response.output_text.delta': 'response.text.delta',
  'response.output_text.done': 'response.text.done',
  'conversation.item.added': 'conversation.item.created',
};

/** An event as sent: its name in the client's protocol version, an event id. */
export function encodeServerEvent(event: ServerEvent, beta: boolean): object {
  let type: string = event.type;
  if (beta) {
    // The beta had a session type of its own for transcription sessions.
    if (type === 'session.created' && (event as { session: { type?: unknown } }).session.type === 'transcription') type = 'transcription_session.created';
    else type = BETA_NAMES[event.type] ?? type;
  }
  return { ...event, type, event_id: `event_${randomBytes(8).toString('hex')}` };
}
