// The success bodies the gateway sends, as zod schemas: the source of the OpenAPI document's
// response schemas (openapi-document.ts). Records that a service builds (VoiceRecord,
// BlobRecord...) are checked against their schema at compile time at the bottom of this file,
// so a field added to a record and not here fails the type check. Bodies relayed from an engine
// (chat completions, responses) are loose objects: the gateway does not reshape them.
import { z } from 'zod';
import { ERROR_TABLE } from '../errors.ts';
import type { BlobRecord } from '../../server/services/blobs/blob-store.ts';
import type { DictRecord, DictSummaryRecord } from '../../server/services/dicts/dict-record.ts';
import type { JobRecord } from '../../server/services/jobs/job-queue.ts';
import type { VoiceRecord } from '../../server/services/voices/present-voice.ts';
import type { listVoices } from '../../server/services/voices/list-voices.ts';
import type { queueVoiceJob } from '../../server/services/jobs/queue-voice-job.ts';
import type { PreparedVoiceProfile } from '../../server/services/voices/prepare-voice-profile.ts';
import { EngineCatalogue } from '../../server/services/voices/engine-voices.ts';
import type { verboseJson } from '../routes/transcription-formats.ts';
import type { listRequestLogs } from '../../server/services/logs/list-request-logs.ts';
import type { getRequestLog } from '../../server/services/logs/get-request-log.ts';

const ERROR_CODES = Object.keys(ERROR_TABLE) as [keyof typeof ERROR_TABLE, ...(keyof typeof ERROR_TABLE)[]];
const isoTime = z.iso.datetime({ offset: true });

export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      message: z.string().min(1),
      type: z.enum(['invalid_request_error', 'insufficient_quota', 'rate_limit_error', 'api_error']),
      code: z.enum(ERROR_CODES),
      param: z.string().nullable(),
    }),
  })
  .meta({ description: 'Every error of every route: the status and `type` follow from `code` (docs/api-conventions.md, "Errors").' });

/** /v1/listen adds Deepgram's error fields to the envelope, so that Deepgram's clients read it too. */
export const DeepgramErrorEnvelopeSchema = ErrorEnvelopeSchema.extend({
  err_code: z.string(),
  err_msg: z.string(),
  request_id: z.string(),
}).meta({ description: "The error envelope with Deepgram's `err_code`, `err_msg` and `request_id` (on /v1/listen only)." });

/** ElevenLabs' routes add ElevenLabs' `detail` to the envelope, so that ElevenLabs' clients read it too. */
export const ElevenLabsErrorEnvelopeSchema = ErrorEnvelopeSchema.extend({
  detail: z.object({ status: z.string(), message: z.string() }),
}).meta({ description: "The error envelope with ElevenLabs' `detail` {status (our code), message} (on ElevenLabs' routes only)." });

// ---------------------------------------------------------------------------------------------
// System

export const HealthSchema = z.object({ status: z.literal('ok') });

export const ReadySchema = z.object({
  status: z.enum(['ok', 'unavailable']),
  database: z.enum(['ok', 'down']),
  models: z.array(
    z.object({
      id: z.string(),
      modality: z.enum(['llm', 'tts', 'stt']),
      serving: z.boolean(),
      upstreams: z.array(
        z.object({
          host: z
            .string()
            .meta({ description: 'The upstream by its host alone (an in-process engine: `local:<engine>`): no credentials, port, path or query.' }),
          health: z.enum(['unknown', 'up', 'down']),
          circuit: z.enum(['closed', 'open', 'half_open']).meta({
            description: 'This replica’s circuit for the upstream: open after failed calls (new work skips it), half_open while one trial call decides.',
          }),
        }),
      ),
    }),
  ),
});

export const OpenApiDocumentSchema = z.looseObject({
  openapi: z.string().regex(/^3\.1\./),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.unknown()),
});

export const ModelListSchema = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({ id: z.string(), object: z.literal('model'), created: z.int(), owned_by: z.literal('svc'), modality: z.enum(['llm', 'tts', 'stt']) }),
  ),
});

// ---------------------------------------------------------------------------------------------
// LLM (relayed from the engine, or translated from a chat completion)

export const ChatCompletionSchema = z
  .looseObject({
    id: z.string().optional(),
    object: z.string().optional(),
    model: z.string().optional(),
    choices: z.array(
      z.looseObject({
        index: z.int().optional(),
        message: z.looseObject({ role: z.string().optional(), content: z.string().nullable().optional() }).optional(),
        finish_reason: z.string().nullable().optional(),
      }),
    ),
    usage: z.looseObject({ prompt_tokens: z.int().optional(), completion_tokens: z.int().optional() }).optional(),
  })
  .meta({ description: "The engine's chat.completion object, relayed as the engine sent it." });

export const ResponseObjectSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('response'),
    status: z.string().optional(),
    model: z.string().optional(),
    output: z.array(z.looseObject({ type: z.string() })),
    usage: z.looseObject({ input_tokens: z.int().optional(), output_tokens: z.int().optional() }).nullable().optional(),
  })
  .meta({ description: "OpenAI's Response object: the engine's own, or translated from its chat completion." });

// ---------------------------------------------------------------------------------------------
// STT

const WordSchema = z.object({ word: z.string(), start: z.number().meta({ description: 'Seconds from the start of the audio.' }), end: z.number() });

export const TranscriptionSchema = z
  .object({ text: z.string(), words: z.array(WordSchema), duration_seconds: z.number() })
  .meta({ description: '`response_format` json (the default).' });

export const VerboseTranscriptionSchema = z
  .object({
    task: z.literal('transcribe'),
    language: z.string().optional(),
    duration: z.number(),
    text: z.string(),
    segments: z
      .array(
        z.object({
          id: z.int(),
          seek: z.int().meta({ description: "The segment's start in Whisper's 10 ms frames." }),
          start: z.number(),
          end: z.number(),
          text: z.string(),
          tokens: z.array(z.int()).meta({ description: 'Always empty: no engine here reports tokens.' }),
          temperature: z.number().meta({ description: '0 unless the engine reports it.' }),
          avg_logprob: z.number().meta({ description: '0 unless the engine reports it.' }),
          compression_ratio: z.number(),
          no_speech_prob: z.number().meta({ description: '0 unless the engine reports it.' }),
        }),
      )
      .optional(),
    words: z.array(WordSchema).optional(),
    usage: z.object({ type: z.literal('duration'), seconds: z.number() }),
  })
  .meta({ description: '`response_format` verbose_json.' });

/** The JSON answers of POST /v1/audio/transcriptions, by `response_format`. */
export const TranscriptionResultSchema = z.union([TranscriptionSchema, VerboseTranscriptionSchema]);

const DeepgramWordSchema = WordSchema.extend({ confidence: z.number(), punctuated_word: z.string().optional() });

export const DeepgramListenSchema = z.object({
  metadata: z.object({
    transaction_key: z.string(),
    request_id: z.string(),
    sha256: z.string(),
    created: isoTime,
    duration: z.number(),
    channels: z.literal(1),
    models: z.array(z.string()),
    model_info: z.record(z.string(), z.object({ name: z.string(), version: z.string(), arch: z.string() })),
  }),
  results: z.object({
    channels: z.array(z.object({ alternatives: z.array(z.object({ transcript: z.string(), confidence: z.number(), words: z.array(DeepgramWordSchema) })) })),
    utterances: z
      .array(
        z.object({
          start: z.number(),
          end: z.number(),
          confidence: z.number(),
          channel: z.int(),
          transcript: z.string(),
          words: z.array(DeepgramWordSchema),
          id: z.uuid(),
        }),
      )
      .optional(),
  }),
});

// ---------------------------------------------------------------------------------------------
// Voices, blobs, jobs

export const DeletedSchema = z.object({ id: z.string(), deleted: z.literal(true) });

export const VoiceProfileSchema = z.object({
  model_id: z.string(),
  upstream_id: z.string(),
  profile_version: z.string(),
  source_version: z.string(),
  cached_at: isoTime,
  expires_at: isoTime.nullable(),
  status: z.enum(['queued', 'ready', 'failed']),
});

export const VoiceSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  language: z.string(),
  gender: z.string(),
  tags: z.array(z.string()),
  featured: z.boolean(),
  kind: z.enum(['library', 'instant_clone', 'pro_clone', 'localized']),
  parent_voice_id: z.string().nullable(),
  source_audio_blob_id: z.string().nullable(),
  source_transcript: z.string().nullable(),
  source_metadata: z.record(z.string(), z.unknown()).nullable(),
  source_version: z.string(),
  profiles: z.array(VoiceProfileSchema),
  model_family: z.string(),
  sample_blob_id: z
    .string()
    .nullable()
    .meta({ description: "An own voice's preview on its first usable profile, as a blob of the org; null for platform voices and until it is made." }),
  preview_models: z.array(z.string()).meta({ description: 'The models whose preview is ready: GET /voices/{id}/preview?model_id=.' }),
  is_owner: z.boolean(),
  saved: z.boolean(),
  created_at: isoTime,
});

export const VoiceListSchema = z.object({
  voices: z.array(VoiceSchema),
  next_cursor: z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last.' }),
});

export const EngineCatalogueSchema = EngineCatalogue.meta({
  description: "The voices the model's engine lists; each `id` is the engine's voice id.",
});

export const VoiceJobQueuedSchema = z
  .object({ job_id: z.string(), voice_id: z.string(), status: z.literal('queued') })
  .meta({ description: 'The work was queued: follow it with GET /jobs/{job_id}.' });

export const VoiceProfileReadySchema = z.object({ voice_id: z.string(), status: z.literal('ready'), profile: VoiceProfileSchema });

export const BlobSchema = z.object({
  id: z.string(),
  object: z.literal('blob'),
  content_type: z.string(),
  size_bytes: z.int(),
  sha256: z.string(),
  duration_seconds: z.number().nullable(),
  created_at: isoTime,
});

export const JobSchema = z.object({
  id: z.string(),
  object: z.literal('job'),
  kind: z.enum(['instant_clone', 'pro_clone', 'localize']),
  operation: z.enum(['clone', 'localize', 'prepare_profile']),
  status: z.enum(['queued', 'running', 'succeeded', 'failed']),
  voice_id: z.string().nullable(),
  model_id: z.string().nullable(),
  created_at: isoTime,
  updated_at: isoTime,
  result: z.record(z.string(), z.unknown()).optional().meta({ description: 'Only when the job succeeded.' }),
  error: z.string().optional().meta({ description: 'Only when the job failed.' }),
});

export const JobListSchema = z.object({ jobs: z.array(JobSchema) });

// ---------------------------------------------------------------------------------------------
// Pronunciation dictionaries

export const DictSummarySchema = z.object({ id: z.string(), name: z.string(), entry_count: z.int(), created_at: isoTime, updated_at: isoTime });

export const DictSchema = DictSummarySchema.extend({
  entries: z.array(z.object({ grapheme: z.string(), alias: z.string().nullable(), phoneme: z.string().nullable(), case_sensitive: z.boolean() })),
});

export const DictListSchema = z.object({ dicts: z.array(DictSummarySchema) });

// ---------------------------------------------------------------------------------------------
// Agent registration (docs/agent-registration.md)

export const AuthorizationServerMetadataSchema = z
  .looseObject({
    issuer: z.string(),
    token_endpoint: z.string(),
    grant_types_supported: z.array(z.string()),
    response_types_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    agent_auth: z.looseObject({
      identity_endpoint: z.string(),
      claim_endpoint: z.string(),
      token_endpoint: z.string(),
      verification_uri: z.string(),
      resource: z.string(),
    }),
  })
  .meta({ description: 'RFC 8414 authorization-server metadata with the `agent_auth` block.' });

export const ProtectedResourceMetadataSchema = z
  .object({
    resource: z.string(),
    authorization_servers: z.array(z.string()),
    bearer_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    resource_name: z.string(),
  })
  .meta({ description: 'RFC 9728 protected-resource metadata of {base_url}/v1.' });

const ClaimBlockSchema = z.object({ user_code: z.string(), expires_in: z.number(), verification_uri: z.string(), interval: z.number() });

export const RegistrationSchema = z.union([
  z.object({
    registration_id: z.string(),
    registration_type: z.literal('anonymous'),
    claim_url: z.string(),
    claim_token: z.string(),
    claim_token_expires: isoTime,
    token_endpoint: z.string(),
    post_claim_scopes: z.array(z.string()),
    identity_assertion: z.string(),
    identity_assertion_expires: isoTime,
    pre_claim_scopes: z.array(z.string()),
  }),
  z.object({
    registration_id: z.string(),
    registration_type: z.literal('service_auth'),
    claim_url: z.string(),
    claim_token: z.string(),
    claim_token_expires: isoTime,
    token_endpoint: z.string(),
    post_claim_scopes: z.array(z.string()),
    claim: ClaimBlockSchema,
  }),
]);

export const ClaimStartedSchema = z.union([
  z.object({ registration_id: z.string(), registration_type: z.literal('anonymous'), claim_token_expires: isoTime, claim_attempt: ClaimBlockSchema }),
  z.object({
    registration_id: z.string(),
    registration_type: z.literal('service_auth'),
    claim_url: z.string(),
    claim_token: z.string(),
    claim_token_expires: isoTime,
    post_claim_scopes: z.array(z.string()),
    claim: ClaimBlockSchema,
  }),
]);

export const TokenSchema = z.object({ access_token: z.string(), token_type: z.literal('Bearer'), scope: z.string() });

// ---------------------------------------------------------------------------------------------
// Realtime over WebRTC

export const RealtimeClientSecretSchema = z.object({
  value: z.string().meta({ description: 'The secret (ek_…): Authorization: Bearer for POST /v1/realtime/calls.' }),
  expires_at: z.number().int().meta({ description: 'Seconds since the epoch.' }),
  session: z
    .looseObject({ type: z.enum(['realtime', 'transcription']) })
    .meta({ description: 'The session the secret opens, as session.created will show it.' }),
});

// ---------------------------------------------------------------------------------------------
// Cartesia's access tokens

export const AccessTokenSchema = z.object({
  token: z.string().meta({ description: 'The token (at_…): a key for the routes its grants open; on a socket, `?access_token=`.' }),
});

// ---------------------------------------------------------------------------------------------
// Request logs

const millis = z.number().nullable();

export const RequestLogSchema = z
  .object({
    id: z.string(),
    object: z.literal('request_log'),
    request_id: z.string().meta({ description: 'The `x-request-id` the request was answered with.' }),
    created_at: isoTime,
    kind: z.enum(['http', 'session']).meta({ description: 'http: one answer; session: a WebSocket from its upgrade to its close.' }),
    method: z.string(),
    route: z.string().meta({ description: 'The route pattern (never the URL).' }),
    model: z.string().nullable(),
    status: z.number().int().meta({ description: '101 for an upgraded session; 499 when the client left before any answer.' }),
    error_code: z.string().nullable(),
    key: z.object({ id: z.string().nullable(), name: z.string() }),
    upstreams: z.array(z.object({ upstream_id: z.string(), outcome: z.string(), ms: millis })),
    served_by: z.string().nullable(),
    failover_reason: z.string().nullable(),
    user_agent: z.string().nullable(),
    trace_id: z.string().nullable().meta({ description: 'The OpenTelemetry trace id, when the gateway traces.' }),
    timings: z.object({ ttfb_ms: millis, first_audio_ms: millis, first_audible_ms: millis, total_ms: z.number() }),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int(), characters: z.number().int(), audio_ms: z.number().int() }),
    cost_usd: z.string(),
    content: z
      .object({ request: z.string().nullable(), response: z.string().nullable() })
      .nullable()
      .meta({ description: 'Only when the organization keeps content (docs/logs.md, "Content").' }),
  })
  .meta({ description: 'One keyed request or WebSocket session (docs/logs.md). Times in milliseconds from its arrival; null where nothing was measured.' });

export const RequestLogListSchema = z.object({
  object: z.literal('list'),
  data: z.array(RequestLogSchema),
  has_more: z.boolean(),
  next_cursor: z.string().nullable().meta({ description: 'Pass as `cursor` for the next (older) page; null on the last.' }),
});

export const RequestLogTurnSchema = z.object({
  turn_index: z.number().int(),
  start_ms: z.number(),
  speech_end_ms: millis,
  end_of_turn_ms: millis,
  llm_first_token_ms: millis,
  tts_first_audio_ms: millis,
  first_audible_ms: millis,
  barge_in_ms: millis,
  failover_reason: z.string().nullable(),
  user_text: z.string().nullable(),
  assistant_text: z.string().nullable(),
});

export const RequestLogDetailSchema = RequestLogSchema.extend({
  turns: z.array(RequestLogTurnSchema).meta({ description: "A session's turns, in order (start_ms from the session's start, the rest from the turn's)." }),
});

// ---------------------------------------------------------------------------------------------
// What the services and routes build fits what is documented (checked by tsc, nothing at run time).

type Fits<Built, Documented> = [Built] extends [Documented] ? true : false;
function fits<T extends true>(): T | undefined {
  return undefined;
}
fits<Fits<VoiceRecord, z.output<typeof VoiceSchema>>>();
fits<Fits<Awaited<ReturnType<typeof listVoices>>, z.output<typeof VoiceListSchema>>>();
fits<Fits<Awaited<ReturnType<typeof queueVoiceJob>>, z.output<typeof VoiceJobQueuedSchema>>>();
fits<Fits<PreparedVoiceProfile, z.output<typeof VoiceProfileReadySchema> | z.output<typeof VoiceJobQueuedSchema>>>();
fits<Fits<BlobRecord, z.output<typeof BlobSchema>>>();
fits<Fits<JobRecord, z.output<typeof JobSchema>>>();
fits<Fits<DictRecord, z.output<typeof DictSchema>>>();
fits<Fits<DictSummaryRecord, z.output<typeof DictSummarySchema>>>();
fits<Fits<ReturnType<typeof verboseJson>, z.output<typeof VerboseTranscriptionSchema>>>();

// ---------------------------------------------------------------------------------------------
// ElevenLabs' shapes

export const ElevenLabsVoiceSchema = z.object({
  voice_id: z.string(),
  name: z.string(),
  category: z.enum(['premade', 'cloned', 'professional', 'generated']),
  description: z.string(),
  labels: z.record(z.string(), z.string()),
  preview_url: z.null(),
  available_for_tiers: z.array(z.string()),
  high_quality_base_model_ids: z.array(z.string()).meta({ description: 'The models the voice has a ready profile for.' }),
  verified_languages: z.array(z.never()),
  is_owner: z.boolean(),
  created_at_unix: z.int(),
});

export const ElevenLabsVoiceListSchema = z.object({ voices: z.array(ElevenLabsVoiceSchema) });

export const ElevenLabsVoicePageSchema = z.object({
  voices: z.array(ElevenLabsVoiceSchema),
  has_more: z.boolean(),
  total_count: z.int(),
  next_page_token: z.string().nullable(),
});

export const ElevenLabsAudioWithTimestampsSchema = z.object({
  audio_base64: z.string(),
  alignment: z.null().meta({ description: 'No engine served here gives word times yet.' }),
  normalized_alignment: z.null(),
});

export const ElevenLabsTranscriptionSchema = z.object({
  language_code: z.string(),
  language_probability: z.number(),
  text: z.string(),
  words: z.array(z.object({ text: z.string(), start: z.number(), end: z.number(), type: z.enum(['word', 'spacing']), logprob: z.number() })),
});
fits<Fits<{ object: 'list' } & Awaited<ReturnType<typeof listRequestLogs>>, z.output<typeof RequestLogListSchema>>>();
fits<Fits<Awaited<ReturnType<typeof getRequestLog>>, z.output<typeof RequestLogDetailSchema>>>();
