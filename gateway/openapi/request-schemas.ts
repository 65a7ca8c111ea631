// What the routes that read their input by hand accept, as zod schemas for the OpenAPI document.
// Those routes keep their own parsing (its error messages and params are part of the API:
// chat and responses forward the client's bytes; the multipart, query and form readers name
// each bad field their own way); each schema here names the parser it describes, which is the
// one to change first. Routes that validate with zod export their schemas where they live.
import { z } from 'zod';
import { ENCODINGS, SAMPLE_RATES } from '../audio/output-format.ts';
import { RESPONSE_FORMATS } from '../routes/transcription-formats.ts';
import { CloneFields } from '../routes/voices.ts';
import { GRANT_CLAIM, GRANT_JWT_BEARER } from '../../server/services/registrations/registration-rules.ts';

/** A file part of a multipart form (or a raw body): bytes, not JSON. */
export const audioFile = (description: string) => z.string().meta({ contentMediaType: 'application/octet-stream', description });

const model = (modality: string) =>
  z
    .string()
    .min(1)
    .meta({ description: `The id of a ${modality} model of this gateway (GET /v1/models).` });
const sampleRate = z.string().meta({ description: `Hz; one of ${SAMPLE_RATES.join(', ')} within the model's rates (default 16000).` });
const boolText = z.enum(['true', 'false']);
const probability = z.string().meta({ description: 'A number from 0 to 1.' });
const many = (description: string) => z.union([z.string(), z.array(z.string())]).meta({ description });

/** POST /v1/chat/completions (chat-completions.ts reads `model`, `stream`, `stream_options`, `max_tokens`, `n`; the engine reads the rest). */
export const ChatCompletionRequestSchema = z
  .looseObject({
    model: model('llm'),
    messages: z.array(z.looseObject({ role: z.string() })).optional(),
    stream: z.boolean().optional(),
    stream_options: z.looseObject({ include_usage: z.boolean().optional() }).optional(),
    max_tokens: z.int().optional(),
    max_completion_tokens: z.int().optional(),
    n: z.int().optional(),
  })
  .meta({ description: "OpenAI's chat completion request, forwarded to the engine as sent (only `model` may be rewritten)." });

/** POST /v1/responses (responses.ts; translated by gateway/llm/responses-via-chat.ts for chat-only engines). */
export const ResponsesRequestSchema = z
  .looseObject({
    model: model('llm'),
    input: z.union([z.string(), z.array(z.looseObject({}))]).optional(),
    instructions: z.string().optional(),
    stream: z.boolean().optional(),
    max_output_tokens: z.int().optional(),
    store: z.boolean().optional(),
    tools: z.array(z.looseObject({})).optional(),
  })
  .meta({ description: "OpenAI's Responses request." });

/** POST /v1/audio/transcriptions (transcriptions.ts, over readUpload). */
export const TranscriptionFormSchema = z.object({
  file: audioFile('WAV (any PCM or float width, any channels: downmixed) or raw 16-bit mono PCM; at most 25 MB. Compressed audio is refused.'),
  model: model('stt'),
  language: z.string().optional(),
  keyterms: z.string().optional().meta({ description: 'Recognition hints, comma or newline separated.' }),
  prompt: z.string().optional().meta({ description: 'Read as hints too: a phrase per comma-separated part.' }),
  sample_rate: sampleRate.optional(),
  response_format: z.enum(RESPONSE_FORMATS).default('json'),
  'timestamp_granularities[]': z
    .array(z.enum(['word', 'segment']))
    .optional()
    .meta({ description: 'verbose_json only (default segment).' }),
});

/** The multipart form of POST /voices/clone (voices.ts reads it into CloneFields; tags come comma separated). */
export const CloneFormSchema = CloneFields.extend({
  file: audioFile('The clip: WAV, or raw 16-bit mono PCM with sample_rate.'),
  tags: z.string().optional().meta({ description: 'Comma separated.' }),
});

/** The multipart form of POST /blobs (blobs.ts). */
export const BlobFormSchema = z.object({ file: audioFile('WAV, or raw 16-bit mono PCM with sample_rate.'), sample_rate: sampleRate.optional() });

/** /pronunciation-dicts/{id} (pronunciation-dicts.ts takes the router's parameter as it is). */
export const DictIdParams = z.object({ id: z.string() });

/** POST /oauth2/token, form-encoded or JSON (agent-auth.ts reads grant_type, then the grant's one parameter). */
export const TokenRequestSchema = z.union([
  z.object({ grant_type: z.literal(GRANT_JWT_BEARER), assertion: z.string().min(1).max(4096) }),
  z.object({ grant_type: z.literal(GRANT_CLAIM), claim_token: z.string().min(1).max(4096) }),
]);

/** The query of POST and WS /v1/listen (listen.ts listenParams and planLive; Deepgram's names). */
export const ListenQuerySchema = z.object({
  model: model('stt'),
  encoding: z.enum(['linear16', 'mulaw', 'alaw']).optional().meta({ description: 'Of raw audio (default linear16); a WAV body says its own.' }),
  sample_rate: sampleRate.optional(),
  channels: z.literal('1').optional(),
  language: z.string().optional(),
  punctuate: boolText.optional(),
  smart_format: boolText.optional(),
  keyterm: many('A hint; repeatable.').optional(),
  keywords: many('A hint with an optional boost (`word:2`, the boost is ignored); repeatable.').optional(),
  utterances: boolText.optional().meta({ description: 'Pre-recorded only.' }),
  utt_split: z.string().optional().meta({ description: 'Pre-recorded only: seconds between words that split utterances (default 0.8).' }),
  interim_results: boolText.optional().meta({ description: 'Live only.' }),
  vad_events: boolText.optional().meta({ description: 'Live only.' }),
  endpointing: z.string().optional().meta({ description: 'Live only: ms of silence that end an utterance (at least 200 here), or false.' }),
  utterance_end_ms: z.string().optional().meta({ description: 'Live only: ms (1000 or more).' }),
});

const turnThresholds = {
  turn_detection: z.enum(['balanced', 'patient', 'responsive']).optional(),
  turn_start_threshold: probability.optional(),
  turn_eager_end_threshold: probability.optional(),
  turn_end_threshold: probability.optional(),
  turn_end_timeout_ms: z.string().optional().meta({ description: '100 to 60000.' }),
};
const cartesiaVersion = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/)
  .optional()
  .meta({ description: "Cartesia's API version (or the Cartesia-Version header); every version is served alike." });

/** WS /stt/websocket (stt-websocket.ts planSession). */
export const SttSocketQuerySchema = z.object({
  model: model('stt'),
  sample_rate: sampleRate.optional(),
  encoding: z.enum(ENCODINGS).optional(),
  language: z.string().optional(),
  keyterms: many('Hints; repeat it or comma-separate.').optional(),
  keyterm: many("Hints (Cartesia's name).").optional(),
  turn_source: z.enum(['auto', 'gateway']).optional(),
  eager_end: boolText.optional(),
  ...turnThresholds,
  cartesia_version: cartesiaVersion,
});

/** WS /stt/turns/websocket (stt-turns-websocket.ts planTurnsSession). */
export const SttTurnsSocketQuerySchema = z.object({
  model: model('stt'),
  sample_rate: sampleRate.optional(),
  encoding: z.enum(ENCODINGS).optional(),
  language: z.string().optional(),
  keyterm: many('A hint; repeatable.').optional(),
  ...turnThresholds,
  cartesia_version: cartesiaVersion,
});

/** WS /tts/websocket (tts-websocket.ts): model, voice and format come with each context's first message. */
export const TtsSocketQuerySchema = z.object({ cartesia_version: cartesiaVersion });

/** WS /v1/realtime (routes/realtime.ts). */
export const RealtimeQuerySchema = z.object({
  model: z.string().optional().meta({ description: 'A realtime profile or an LLM (required for a conversation); with intent=transcription, an stt model.' }),
  intent: z.literal('transcription').optional(),
});

/** WS /phone/<carrier>/:token (routes/phone.ts): the stream URL ends in the number's phone token. */
export const PhoneStreamParams = z.object({
  token: z.string().meta({ description: 'The phone token (`pt_svc_…`) made for the number with `svc phone token create` or the dashboard (docs/phone.md).' }),
});

/** POST /v1/speech-to-text (ElevenLabs' form). */
export const ElevenLabsSttFormSchema = z.looseObject({
  file: audioFile('WAV, or raw 16-bit 16 kHz mono PCM with file_format pcm_s16le_16; at most 25 MB.'),
  model_id: z.string().optional().meta({ description: "A registry stt model; ElevenLabs' names (scribe_…) or none: the default model." }),
  language_code: z.string().optional(),
  timestamps_granularity: z.enum(['none', 'word', 'character']).optional().meta({ description: 'none: no words; otherwise words with spacing.' }),
  file_format: z.enum(['pcm_s16le_16', 'other']).optional(),
  keyterms: z.array(z.string()).optional(),
});

/** POST /v1/realtime/client_secrets (routes/realtime-calls.ts reads it by hand; session fields as session.update's, docs/realtime.md). */
export const RealtimeClientSecretRequestSchema = z.object({
  expires_after: z
    .object({
      anchor: z.literal('created_at').optional(),
      seconds: z.number().int().min(10).max(7200).optional().meta({ description: 'The secret lives this long (default 600).' }),
    })
    .optional(),
  session: z
    .looseObject({ type: z.enum(['realtime', 'transcription']).optional(), model: z.string().optional() })
    .optional()
    .meta({ description: "The call's session settings, as session.update's; model: a realtime profile or an LLM (default: the first profile)." }),
});

/** POST /v1/realtime/calls as multipart (routes/realtime-calls.ts readOffer). */
export const RealtimeCallFormSchema = z.object({
  sdp: z.string().meta({ description: 'The SDP offer: an audio m-line with Opus and the data channel.' }),
  session: z.string().optional().meta({ description: 'The session settings as JSON, as session.update takes them.' }),
});

/** POST /v1/realtime/calls/{call_id}/hangup. */
export const RealtimeCallParamsSchema = z.object({ call_id: z.string().meta({ description: 'From the Location of POST /v1/realtime/calls.' }) });
