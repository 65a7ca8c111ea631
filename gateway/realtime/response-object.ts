// The `response` object of response.created / response.done: OpenAI's fields, and ours (what
// each model of the response used and cost, and its latency from the gateway's side).
import { formatUsd } from '../../server/money.ts';
import type { ConversationItem } from './conversation.ts';
import type { ResponseEngines } from './engines.ts';
import type { ResponseObject } from './server-events.ts';
import { GA_FORMAT } from './session-config.ts';

export type ResponseStatus = 'completed' | 'cancelled' | 'incomplete' | 'failed';

/** What a response cost and used, per model (response.done.usage, and the metrics). */
export interface ResponseUsage {
  inputTokens: number;
  outputTokens: number;
  ttsCharacters: number;
  llmMicros: bigint;
  ttsMicros: bigint;
}

const round1 = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms * 10) / 10);

export function responseObject(r: {
  id: string;
  status: ResponseStatus | 'in_progress';
  statusDetails: Record<string, unknown> | null;
  output: ConversationItem[];
  conversation: 'auto' | 'none';
  engines: ResponseEngines;
  chat: { max_tokens?: unknown };
  metadata: unknown;
  /** null while in progress. */
  usage: ResponseUsage | null;
  /** Ms from the response's start to the LLM's first token and to the first audio sent. */
  timings: { llmFirstToken?: number; ttsFirstAudio?: number; firstAudible?: number };
  /** A preemptive answer, prepared on the turn's eager end. */
  held?: boolean;
}): ResponseObject {
  const { engines } = r;
  const done = r.status !== 'in_progress';
  return {
    id: r.id,
    object: 'realtime.response',
    status: r.status,
    status_details: done ? r.statusDetails : null,
    output: done ? r.output : [],
    conversation_id: r.conversation === 'auto' ? 'conv_default' : null,
    output_modalities: engines.tts ? ['audio'] : ['text'],
    max_output_tokens: r.chat.max_tokens ?? 'inf',
    audio: engines.tts ? { output: { format: GA_FORMAT[engines.tts.format], voice: engines.tts.voiceId } } : null,
    metadata: r.metadata ?? null,
    usage: r.usage ? usageWire(r.usage, engines) : null,
    // Ours: the answer was prepared before the turn's end (preemptive answers).
    ...(r.held ? { svc_prepared: true } : {}),
    // Ours: the latency of the response's models as the gateway sees it.
    ...(done
      ? {
          svc_timings: {
            llm_first_token_ms: round1(r.timings.llmFirstToken),
            first_audio_ms: round1(r.timings.ttsFirstAudio),
            first_audible_ms: round1(r.timings.firstAudible),
          },
        }
      : {}),
  };
}

function usageWire(u: ResponseUsage, engines: ResponseEngines): Record<string, unknown> {
  return {
    total_tokens: u.inputTokens + u.outputTokens,
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    input_token_details: {
      text_tokens: u.inputTokens,
      audio_tokens: 0,
      cached_tokens: 0,
      image_tokens: 0,
      cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
    },
    output_token_details: { text_tokens: u.outputTokens, audio_tokens: 0 },
    // Ours: what each model of this response used and cost (the speech-to-text of the user's audio is metered by the second, apart).
    svc: {
      llm_model: engines.llm.id,
      tts_model: engines.tts?.model.id ?? null,
      tts_characters: u.ttsCharacters,
      llm_cost_usd: formatUsd(u.llmMicros),
      tts_cost_usd: formatUsd(u.ttsMicros),
    },
  };
}
