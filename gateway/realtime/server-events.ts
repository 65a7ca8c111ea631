// The server events a /v1/realtime session sends, in their GA shape and names, without the
// `event_id` each gets on the wire. The wire encoder (wire.ts) adds it, and renames the events
// the beta named otherwise for clients on the beta protocol.
import type { ContentPart, ConversationItem } from './conversation.ts';

/** An error as a session reports it; `type` defaults from the code's status (invalid_request_error, or server_error for 5xx). */
export interface EventError {
  code: string;
  message: string;
  param?: string | null;
  type?: string;
}

export interface ErrorPayload {
  type: string;
  code: string;
  message: string;
  param: string | null;
  event_id: string | null;
}

/** The `response` of response.created / response.done (built by response-run.ts). */
export interface ResponseObject {
  id: string;
  object: 'realtime.response';
  status: 'in_progress' | 'completed' | 'cancelled' | 'incomplete' | 'failed';
  status_details: Record<string, unknown> | null;
  output: ConversationItem[];
  conversation_id: string | null;
  output_modalities: ('audio' | 'text')[];
  max_output_tokens: unknown;
  audio: { output: { format: object; voice: string } } | null;
  metadata: unknown;
  usage: Record<string, unknown> | null;
  /** Ours: ms from the response's start to the LLM's first token and to the first audio sent. */
  svc_timings?: { llm_first_token_ms: number | null; first_audio_ms: number | null; first_audible_ms: number | null };
}

/**
 * Ours (opt-in, `session.svc_turn_latency`): one turn the detector ended, once its answer is done
 * (or at its commit when it gets none). Times in ms from the end of the user's speech as the
 * gateway received it; null when the step did not happen (no answer, a text answer...).
 */
export interface TurnLatencyWire {
  item_id: string;
  response_id: string | null;
  /** The end of speech in the session's input audio (speech_stopped's audio_end_ms). */
  audio_end_ms: number;
  turn_end_ms: number;
  transcript_final_ms: number | null;
  llm_first_token_ms: number | null;
  tts_first_audio_ms: number | null;
  first_audible_ms: number | null;
}

/** A content part as response.content_part.* name it ("text" / "audio"; items call them output_text / output_audio). */
export type PartWire = { type: 'audio'; transcript: string } | { type: 'text'; text: string };

interface InResponse {
  response_id: string;
  output_index: number;
}
interface InContent extends InResponse {
  item_id: string;
  content_index: number;
}

export type ServerEvent =
  | { type: 'error'; error: ErrorPayload }
  | { type: 'session.created' | 'session.updated' | 'transcription_session.updated'; session: object }
  | { type: 'input_audio_buffer.speech_started'; audio_start_ms: number; item_id: string }
  | { type: 'input_audio_buffer.speech_stopped'; audio_end_ms: number; item_id: string | null }
  | { type: 'input_audio_buffer.committed'; previous_item_id: string | null; item_id: string }
  | { type: 'input_audio_buffer.cleared' }
  | { type: 'output_audio_buffer.cleared'; response_id: string | null }
  // WebRTC calls (the transport plays the audio: gateway/realtime/realtime-call.ts)
  | { type: 'output_audio_buffer.started' | 'output_audio_buffer.stopped'; response_id: string }
  | { type: 'conversation.item.added'; previous_item_id: string | null; item: ConversationItem }
  | { type: 'conversation.item.done'; previous_item_id?: string | null; item: ConversationItem }
  | { type: 'conversation.item.retrieved'; item: ConversationItem }
  | { type: 'conversation.item.deleted'; item_id: string }
  | { type: 'conversation.item.truncated'; item_id: string; content_index: number; audio_end_ms: number }
  | { type: 'conversation.item.input_audio_transcription.delta'; item_id: string; content_index: number; delta: string }
  | {
      type: 'conversation.item.input_audio_transcription.completed';
      item_id: string;
      content_index: number;
      transcript: string;
      usage: { type: 'duration'; seconds: number };
    }
  | { type: 'response.created' | 'response.done'; response: ResponseObject }
  | ({ type: 'svc.turn_latency' } & TurnLatencyWire)
  | ({ type: 'response.output_item.added' | 'response.output_item.done'; item: ConversationItem } & InResponse)
  | ({ type: 'response.content_part.added' | 'response.content_part.done'; part: PartWire } & InContent)
  | ({ type: 'response.output_text.delta' | 'response.output_audio_transcript.delta' | 'response.output_audio.delta'; delta: string } & InContent)
  | ({ type: 'response.output_text.done'; text: string } & InContent)
  | ({ type: 'response.output_audio_transcript.done'; transcript: string } & InContent)
  | ({ type: 'response.output_audio.done' } & InContent)
  | ({ type: 'response.function_call_arguments.delta'; item_id: string; call_id: string; delta: string } & InResponse)
  | ({ type: 'response.function_call_arguments.done'; item_id: string; call_id: string; name: string; arguments: string } & InResponse);

/** The content part's wire shape, for content_part events. */
export const partWire = (part: ContentPart): PartWire =>
  part.type === 'output_audio' ? { type: 'audio', transcript: part.transcript } : { type: 'text', text: 'text' in part ? part.text : '' };
