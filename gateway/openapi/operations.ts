// Every route the gateway serves, described once: method, path, what it takes (the zod schemas the
// routes validate with, or request-schemas.ts for those that read their input by hand), what it
// answers (response-schemas.ts) and which errors. openapi-document.ts turns this list into the
// OpenAPI 3.1 document at GET /openapi.json; openapi.test.ts checks that it names every route
// Fastify registers. A new route is added here in the same change.
import type { z } from 'zod';
import { ListVoicesQuery } from '../../server/services/voices/list-voices.ts';
import { UpdateVoiceInput } from '../../server/services/voices/update-voice.ts';
import { CreateDictSchema, UpdateDictSchema } from '../../server/services/dicts/dict-input.ts';
import { OpenAiSpeechRequestSchema } from '../tts/openai-speech-request.ts';
import { TtsRequestSchema } from '../tts/tts-request.ts';
import { AccessTokenRequestSchema } from '../routes/access-token.ts';
import { ClaimBody, IdentityBody } from '../routes/agent-auth.ts';
import { BlobIdParams, UploadQuery } from '../routes/blobs.ts';
import { JobIdParams, ListJobsQuery } from '../routes/jobs.ts';
import { CloneJson, EngineCatalogueQuery, Localize, PrepareProfile, PreviewQuery, ProClone, VoiceIdParams } from '../routes/voices.ts';
import { ElevenLabsTtsBody, ElevenLabsTtsQuery, ElevenLabsV2VoicesQuery, ElevenLabsVoiceParams } from '../routes/elevenlabs.ts';
import { ElevenLabsSocketQuery } from '../routes/elevenlabs-websocket.ts';
import { SpeakBody, SpeakQuery } from '../routes/deepgram-speak.ts';
import { FluxQuery } from '../routes/listen-v2.ts';
import { LogIdParams, LogsQuery } from '../routes/logs.ts';
import * as req from './request-schemas.ts';
import * as res from './response-schemas.ts';

/** `phoneToken`: a phone carrier's stream, whose credential is the path's token (docs/phone.md). */
export type Auth = 'key' | 'socket' | 'phoneToken' | 'public' | 'metrics';
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'options';

export interface Answer {
  description: string;
  /** application/json, a schema of RESPONSE_COMPONENTS. */
  json?: z.ZodType;
  /** text/event-stream: what its events are. */
  sse?: string;
  /** Other content types (audio, text), by type: what the bytes are. */
  media?: Record<string, string>;
  /** Carries the spend headers (x-svc-request-cost-usd, x-svc-credits-remaining-usd). */
  spend?: boolean;
}

export interface Operation {
  method: Method;
  /** OpenAPI's form: /voices/{id}. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: Tag;
  auth: Auth;
  /** Admitted only with a positive balance (402 insufficient_quota) and, for a key with a spend limit, some of it left (402 key_budget_exceeded). */
  metered?: boolean;
  pathParams?: z.ZodObject;
  query?: z.ZodObject;
  /** Request bodies by content type; json/multipart/form are schemas of REQUEST_COMPONENTS; raw lists the binary types taken. */
  body?: { json?: z.ZodType; multipart?: z.ZodType; form?: z.ZodType; raw?: string[]; description?: string };
  answers: Record<number, Answer>;
  /** Statuses answered with the error envelope, beyond what auth, metering and a body bring. */
  errors: number[];
  /** A WebSocket upgrade: the protocol page (repository path) of its session. */
  websocket?: string;
  /** /v1/listen answers errors in the envelope with Deepgram's fields added. */
  deepgramErrors?: boolean;
  /** ElevenLabs' routes answer errors in the envelope with ElevenLabs' `detail` added. */
  elevenLabsErrors?: boolean;
}

export const TAGS = {
  System: { description: 'Liveness, readiness, metrics and this document: no key.', doc: 'docs/operations.md' },
  Models: { description: 'The models this gateway serves.', doc: 'docs/api-conventions.md' },
  'Text to speech': { description: "Native (Cartesia-shaped) and OpenAI's speech routes.", doc: 'docs/tts.md' },
  ElevenLabs: { description: "ElevenLabs' HTTP API over the registry's models: speech, voices, transcription.", doc: 'docs/use-it-from.md' },
  'Speech to text': { description: "Batch transcription, the gateway's and Cartesia's streaming sockets, Deepgram's /v1/listen.", doc: 'docs/stt.md' },
  LLM: { description: "OpenAI's chat completions and Responses, relayed to the engines.", doc: 'docs/llm.md' },
  Realtime: { description: "OpenAI's Realtime API over a WebSocket, and over WebRTC.", doc: 'docs/realtime.md' },
  Phone: { description: "Phone carriers' media streams, bridged to a realtime session.", doc: 'docs/phone.md' },
  Voices: { description: 'The voice library, cloning, localization and profiles.', doc: 'docs/voices.md' },
  Blobs: { description: 'Uploaded audio clips for cloning.', doc: 'docs/voices.md' },
  Jobs: { description: 'Asynchronous voice jobs.', doc: 'docs/voices.md' },
  'Pronunciation dictionaries': { description: 'Word replacements and phonemes applied at synthesis.', doc: 'docs/pronunciation-dicts.md' },
  Logs: { description: "The key's organization's request and session logs.", doc: 'docs/logs.md' },
  'Agent registration': {
    description: 'Agents that register themselves and are claimed by a user (OAuth metadata, identity, token).',
    doc: 'docs/agent-registration.md',
  },
} as const;
export type Tag = keyof typeof TAGS;

/** Named request bodies: components/schemas, read as what a client may send (defaults optional). */
export const REQUEST_COMPONENTS = {
  TtsRequest: TtsRequestSchema,
  OpenAiSpeechRequest: OpenAiSpeechRequestSchema,
  ChatCompletionRequest: req.ChatCompletionRequestSchema,
  ResponsesRequest: req.ResponsesRequestSchema,
  TranscriptionForm: req.TranscriptionFormSchema,
  UpdateVoiceRequest: UpdateVoiceInput,
  CloneVoiceForm: req.CloneFormSchema,
  CloneVoiceRequest: CloneJson,
  ProCloneRequest: ProClone,
  LocalizeVoiceRequest: Localize,
  PrepareProfileRequest: PrepareProfile,
  BlobForm: req.BlobFormSchema,
  CreateDictRequest: CreateDictSchema,
  UpdateDictRequest: UpdateDictSchema,
  IdentityRequest: IdentityBody,
  ClaimRequest: ClaimBody,
  TokenRequest: req.TokenRequestSchema,
  ElevenLabsTtsRequest: ElevenLabsTtsBody,
  ElevenLabsSttForm: req.ElevenLabsSttFormSchema,
  DeepgramSpeakRequest: SpeakBody,
  RealtimeClientSecretRequest: req.RealtimeClientSecretRequestSchema,
  RealtimeCallForm: req.RealtimeCallFormSchema,
  AccessTokenRequest: AccessTokenRequestSchema,
} satisfies Record<string, z.ZodType>;

/** Named answers: components/schemas, read as what the gateway sends. */
export const RESPONSE_COMPONENTS = {
  ErrorEnvelope: res.ErrorEnvelopeSchema,
  DeepgramErrorEnvelope: res.DeepgramErrorEnvelopeSchema,
  ElevenLabsErrorEnvelope: res.ElevenLabsErrorEnvelopeSchema,
  ElevenLabsVoiceList: res.ElevenLabsVoiceListSchema,
  ElevenLabsVoicePage: res.ElevenLabsVoicePageSchema,
  ElevenLabsAudioWithTimestamps: res.ElevenLabsAudioWithTimestampsSchema,
  ElevenLabsTranscription: res.ElevenLabsTranscriptionSchema,
  Health: res.HealthSchema,
  Ready: res.ReadySchema,
  OpenApiDocument: res.OpenApiDocumentSchema,
  ModelList: res.ModelListSchema,
  ChatCompletion: res.ChatCompletionSchema,
  Response: res.ResponseObjectSchema,
  Transcription: res.TranscriptionSchema,
  VerboseTranscription: res.VerboseTranscriptionSchema,
  TranscriptionResult: res.TranscriptionResultSchema,
  DeepgramTranscription: res.DeepgramListenSchema,
  Voice: res.VoiceSchema,
  VoiceList: res.VoiceListSchema,
  EngineCatalogue: res.EngineCatalogueSchema,
  VoiceProfile: res.VoiceProfileSchema,
  VoiceProfileReady: res.VoiceProfileReadySchema,
  VoiceJobQueued: res.VoiceJobQueuedSchema,
  Deleted: res.DeletedSchema,
  Blob: res.BlobSchema,
  Job: res.JobSchema,
  JobList: res.JobListSchema,
  DictSummary: res.DictSummarySchema,
  Dict: res.DictSchema,
  DictList: res.DictListSchema,
  AuthorizationServerMetadata: res.AuthorizationServerMetadataSchema,
  ProtectedResourceMetadata: res.ProtectedResourceMetadataSchema,
  Registration: res.RegistrationSchema,
  ClaimStarted: res.ClaimStartedSchema,
  Token: res.TokenSchema,
  RequestLog: res.RequestLogSchema,
  RequestLogList: res.RequestLogListSchema,
  RequestLogDetail: res.RequestLogDetailSchema,
  RealtimeClientSecret: res.RealtimeClientSecretSchema,
  AccessToken: res.AccessTokenSchema,
} satisfies Record<string, z.ZodType>;

const AUDIO_FILE = 'The audio file.';
const RAW_AUDIO = 'Raw audio in the requested encoding and rate, streamed as it is synthesized when `stream` is true.';
const ENGINE_ERRORS = [404, 502, 503, 504];
const VOICE_ID = { pathParams: VoiceIdParams };
const json = (schema: z.ZodType, description: string): Answer => ({ description, json: schema });

/** A WebSocket route: GET that upgrades; everything is checked before the upgrade, a refusal is plain HTTP in the envelope. */
function socket(o: Pick<Operation, 'path' | 'operationId' | 'summary' | 'tag' | 'query'> & { doc: string; errors?: number[]; description: string }): Operation {
  return {
    method: 'get',
    path: o.path,
    operationId: o.operationId,
    summary: o.summary,
    description:
      `${o.description}\n\nA WebSocket: connect with Upgrade: websocket (a plain GET is 400 upgrade_required). The key, the rate limit, the balance and the ` +
      'parameters are checked before the upgrade; a refusal is a plain HTTP answer in the error envelope. Browsers may give the key as `?api_key=`, ' +
      '`?access_token=`, or the subprotocol `openai-insecure-api-key.<key>` (or `token, <key>`). The messages of the session are on the protocol page: ' +
      `${o.doc}.`,
    tag: o.tag,
    auth: 'socket',
    metered: true,
    query: o.query,
    answers: { 101: { description: `Switching Protocols: the session runs over the WebSocket (protocol: ${o.doc}).` } },
    errors: [400, ...(o.errors ?? [])],
    websocket: o.doc,
  };
}

/** The phone carriers whose media streams the gateway serves (gateway/phone/carrier-dialects.ts), as the document names them. */
const PHONE_CARRIERS: Record<string, { name: string; audio: string }> = {
  twilio: { name: 'Twilio Media Streams', audio: 'μ-law at 8 kHz' },
  telnyx: { name: "Telnyx's media streaming", audio: 'μ-law at 8 kHz' },
  plivo: { name: "Plivo's audio streams", audio: 'μ-law at 8 kHz, or 16-bit PCM at 8 or 16 kHz' },
  exotel: { name: "Exotel's Voicebot applet stream", audio: '16-bit PCM at 8, 16 or 24 kHz' },
  vonage: { name: "Vonage's Voice API WebSocket", audio: '16-bit PCM at 8, 16 or 24 kHz, in binary messages' },
};

export const OPERATIONS: Operation[] = [
  // System
  {
    method: 'get',
    path: '/health',
    operationId: 'getHealth',
    summary: 'Liveness: the process answers',
    tag: 'System',
    auth: 'public',
    answers: { 200: json(res.HealthSchema, 'Alive.') },
    errors: [],
  },
  {
    method: 'get',
    path: '/ready',
    operationId: 'getReady',
    summary: 'Readiness: the database and which models have a healthy upstream',
    tag: 'System',
    auth: 'public',
    answers: { 200: json(res.ReadySchema, 'Ready.'), 503: json(res.ReadySchema, 'The database does not answer (the same body, status unavailable).') },
    errors: [],
  },
  {
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    tag: 'System',
    auth: 'metrics',
    description:
      'Served on this port only when SVC_METRICS_TOKEN is set (otherwise 404, or on the separate SVC_METRICS_PORT listener); API keys are not accepted here.',
    answers: { 200: { description: 'The Prometheus text exposition.', media: { 'text/plain': 'Prometheus text format.' } } },
    errors: [401],
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    tag: 'System',
    auth: 'public',
    answers: { 200: json(res.OpenApiDocumentSchema, 'The OpenAPI 3.1 document of every HTTP and WebSocket route.') },
    errors: [],
  },

  // Models
  {
    method: 'get',
    path: '/v1/models',
    operationId: 'listModels',
    summary: 'The models served (a healthy upstream), of every modality',
    tag: 'Models',
    auth: 'key',
    answers: { 200: json(res.ModelListSchema, "OpenAI's model list, with `modality`.") },
    errors: [],
  },

  // Text to speech
  {
    method: 'post',
    path: '/access-token',
    operationId: 'createAccessToken',
    summary: "A short-lived access token for a browser's speech sockets, Cartesia's route",
    tag: 'Text to speech',
    auth: 'key',
    description:
      'Minted by a backend with its key (a token or client secret cannot mint one): the token (`at_…`) stands for that key, in its org, on the routes its grants open — tts: /tts/bytes, /tts/sse, /tts/websocket; stt: /stt/websocket, /stt/turns/websocket — until it expires (1 s to 1 h, default 10 min). Presented as a key would be; a browser opens a socket with `?access_token=`. Stateless and signed; revoking the key refuses its tokens; a route its grants do not open answers 403 `forbidden`.',
    body: { json: AccessTokenRequestSchema },
    answers: { 200: json(res.AccessTokenSchema, 'The token.') },
    errors: [400],
  },
  {
    method: 'post',
    path: '/tts/bytes',
    operationId: 'synthesizeBytes',
    summary: 'Speech as one audio body (Cartesia-shaped)',
    tag: 'Text to speech',
    auth: 'key',
    metered: true,
    description: "A body without a Content-Type is read as JSON (LiveKit's Cartesia plugin sends none).",
    body: { json: TtsRequestSchema },
    answers: {
      200: {
        description: 'The audio.',
        spend: true,
        media: { 'audio/wav': 'WAV.', 'audio/mpeg': 'MP3 (not with stream).', 'application/octet-stream': RAW_AUDIO },
      },
    },
    errors: [403, 409, ...ENGINE_ERRORS],
  },
  {
    method: 'post',
    path: '/tts/sse',
    operationId: 'synthesizeSse',
    summary: 'Speech as server-sent events (Cartesia-shaped)',
    tag: 'Text to speech',
    auth: 'key',
    metered: true,
    body: { json: TtsRequestSchema },
    answers: {
      200: {
        description: 'The audio in events.',
        spend: true,
        sse: '`data: {"type":"chunk","data":<base64 audio>,"done":false,"status_code":206,"step_time":<ms>}` ..., then `{"type":"done","done":true,"status_code":200}`; an engine failing mid-stream ends it with `{"type":"error","done":true,"status_code","title","error_code","message","request_id"}`.',
      },
    },
    errors: [403, 409, ...ENGINE_ERRORS],
  },
  {
    method: 'post',
    path: '/v1/audio/speech',
    operationId: 'createSpeech',
    summary: "Speech, OpenAI's route",
    tag: 'Text to speech',
    auth: 'key',
    metered: true,
    body: { json: OpenAiSpeechRequestSchema },
    answers: {
      200: {
        description: 'The audio at 24 kHz; with stream_format sse, events.',
        spend: true,
        media: {
          'audio/mpeg': 'MP3 (response_format mp3, the default).',
          'audio/wav': 'WAV, relayed as it is synthesized.',
          'audio/pcm': 'response_format pcm: raw 16-bit little-endian mono (`audio/pcm;rate=24000;channels=1`).',
        },
        sse: '`data: {"type":"speech.audio.delta","audio":<base64>}` ..., then `{"type":"speech.audio.done","usage":{input_tokens,output_tokens,total_tokens}}`; an engine failing mid-stream ends it with the error envelope as an event.',
      },
    },
    errors: [409, ...ENGINE_ERRORS],
  },
  socket({
    path: '/tts/websocket',
    operationId: 'ttsWebSocket',
    summary: "Streaming speech over a WebSocket (Cartesia's protocol)",
    tag: 'Text to speech',
    query: req.TtsSocketQuerySchema,
    doc: 'docs/tts-websocket.md',
    description: "Model, voice and format come with each context's first message: their errors are error events on that context.",
    errors: [403],
  }),

  // Speech to text
  {
    method: 'post',
    path: '/v1/audio/transcriptions',
    operationId: 'createTranscription',
    summary: "Batch transcription, OpenAI's route",
    tag: 'Speech to text',
    auth: 'key',
    metered: true,
    body: { multipart: req.TranscriptionFormSchema },
    answers: {
      200: {
        description: 'The transcript, in the shape `response_format` asks for.',
        spend: true,
        json: res.TranscriptionResultSchema,
        media: { 'text/plain': 'response_format text.', 'application/x-subrip': 'response_format srt.', 'text/vtt': 'response_format vtt.' },
      },
    },
    errors: ENGINE_ERRORS,
  },
  socket({
    path: '/stt/websocket',
    operationId: 'sttWebSocket',
    summary: "Streaming transcription in the gateway's protocol",
    tag: 'Speech to text',
    query: req.SttSocketQuerySchema,
    doc: 'docs/stt.md#streaming-stt-protocol-get-sttwebsocket',
    description: 'Audio in binary frames; transcripts and turn events out.',
    errors: [403, 404, 503],
  }),
  socket({
    path: '/stt/turns/websocket',
    operationId: 'sttTurnsWebSocket',
    summary: "Streaming transcription in Cartesia's auto-finalize protocol",
    tag: 'Speech to text',
    query: req.SttTurnsSocketQuerySchema,
    doc: 'docs/stt.md#cartesias-turns-socket-get-sttturnswebsocket',
    description: "As LiveKit's Cartesia STT and cartesia-js `stt.autoFinalize` speak it; turns are the gateway's detector's.",
    errors: [403, 404, 503],
  }),
  {
    ...socket({
      path: '/v1/listen',
      operationId: 'listenWebSocket',
      summary: "Live transcription, Deepgram's protocol",
      tag: 'Speech to text',
      query: req.ListenQuerySchema,
      doc: 'docs/stt.md#deepgram-compatible-v1listen-websocket-and-pre-recorded',
      description: "Deepgram's live /v1/listen: its clients work by changing their base URL. The 101 answer carries `dg-request-id`.",
      errors: [404, 503],
    }),
    deepgramErrors: true,
  },
  {
    ...socket({
      path: '/v2/listen',
      operationId: 'listenFluxWebSocket',
      summary: "Turn-based transcription, Deepgram Flux's protocol",
      tag: 'Speech to text',
      query: FluxQuery,
      doc: 'docs/stt.md#deepgram-flux-v2listen',
      description:
        "Deepgram Flux's /v2/listen: TurnInfo events (StartOfTurn, Update, EagerEndOfTurn, TurnResumed, EndOfTurn) from the gateway's turn detector.",
      errors: [404, 503],
    }),
    deepgramErrors: true,
  },
  {
    method: 'post',
    path: '/v1/listen',
    operationId: 'listenPreRecorded',
    summary: "Pre-recorded transcription, Deepgram's route",
    tag: 'Speech to text',
    auth: 'key',
    metered: true,
    description:
      "The audio is the body: WAV (its header says how to read it), else raw audio in `encoding` at `sample_rate`. Errors carry Deepgram's fields too (and the `dg-error` header).",
    query: req.ListenQuerySchema,
    body: { raw: ['audio/*', 'application/octet-stream'], description: 'The audio (any Content-Type but JSON).' },
    answers: { 200: { ...json(res.DeepgramListenSchema, "Deepgram's pre-recorded response."), spend: true } },
    errors: ENGINE_ERRORS,
    deepgramErrors: true,
  },

  {
    method: 'post',
    path: '/v1/speak',
    operationId: 'deepgramSpeak',
    summary: "Speech, Deepgram's Aura route",
    tag: 'Text to speech',
    auth: 'key',
    metered: true,
    description:
      "`model` names a registry tts model (its default voice), a voice id (the default model), `<model>:<voice>`, or Deepgram's `aura-…` names (the default model and voice). Billed per character, as /tts/bytes. Errors carry Deepgram's fields too.",
    query: SpeakQuery,
    body: { json: SpeakBody },
    answers: {
      200: {
        description: 'The audio: mp3 by default; linear16, mulaw or alaw as WAV, or raw with container=none (streamed as it is synthesized).',
        spend: true,
        media: { 'audio/mpeg': 'encoding mp3 (the default).', 'audio/wav': 'container wav.', 'application/octet-stream': 'container none.' },
      },
    },
    errors: [409, ...ENGINE_ERRORS],
    deepgramErrors: true,
  },
  {
    ...socket({
      path: '/v1/speak',
      operationId: 'deepgramSpeakWebSocket',
      summary: "Streaming speech, Deepgram's Aura socket",
      tag: 'Text to speech',
      query: SpeakQuery,
      doc: 'docs/use-it-from.md',
      description: 'Speak, Flush, Clear and Close in; binary audio, Metadata, Flushed, Cleared and Warning out.',
      errors: [404],
    }),
    deepgramErrors: true,
  },
  ...(
    [
      ['stream-input', 'elevenLabsStreamInput', "Streaming speech, ElevenLabs' stream-input socket"],
      ['multi-stream-input', 'elevenLabsMultiStreamInput', "Streaming speech in contexts, ElevenLabs' multi-stream-input socket"],
    ] as const
  ).map(([suffix, operationId, summary]): Operation => ({
    ...socket({
      path: `/v1/text-to-speech/{voice_id}/${suffix}`,
      operationId,
      summary,
      tag: 'ElevenLabs',
      query: ElevenLabsSocketQuery,
      doc: 'docs/use-it-from.md',
      description:
        'Text in, audio out as base64 in JSON messages (raw formats only: pcm_<rate>, ulaw_8000, alaw_8000). Without a key at the upgrade, the first message carries it as `xi_api_key` (within 5 s; a wrong or missing one is an error message and a 1008 close).',
    }),
    pathParams: ElevenLabsVoiceParams,
    elevenLabsErrors: true,
  })),

  // ElevenLabs
  ...(
    [
      ['', 'elevenLabsSpeech', "Speech, ElevenLabs' convert route", false],
      ['/stream', 'elevenLabsSpeechStream', "Speech streamed, ElevenLabs' route", false],
      ['/with-timestamps', 'elevenLabsSpeechWithTimestamps', "Speech with timestamps, ElevenLabs' route", true],
      ['/stream/with-timestamps', 'elevenLabsSpeechStreamWithTimestamps', "Speech streamed with timestamps, ElevenLabs' route", true],
    ] as const
  ).map(([suffix, operationId, summary, timestamps]): Operation => ({
    method: 'post',
    path: `/v1/text-to-speech/{voice_id}${suffix}`,
    operationId,
    summary,
    tag: 'ElevenLabs',
    auth: 'key',
    metered: true,
    description:
      "`voice_id` is a gateway voice id, `model_id` a registry tts model (ElevenLabs' `eleven_…` names or none: the default model). Billed per character, as /tts/bytes. The key may come as `xi-api-key`.",
    pathParams: ElevenLabsVoiceParams,
    query: ElevenLabsTtsQuery,
    body: { json: ElevenLabsTtsBody },
    answers: {
      200: timestamps
        ? suffix.startsWith('/stream')
          ? {
              description: 'Newline-delimited JSON chunks `{audio_base64, alignment, normalized_alignment}`.',
              spend: true,
              media: { 'application/json': 'NDJSON chunks.' },
            }
          : { ...json(res.ElevenLabsAudioWithTimestampsSchema, 'The whole audio in base64.'), spend: true }
        : {
            description: 'The audio in `output_format`; raw formats streamed as they are synthesized on /stream.',
            spend: true,
            media: {
              'audio/mpeg': 'mp3_<rate>_<kbps> (the default mp3_44100_128).',
              'audio/pcm': 'pcm_<rate>: 16-bit little-endian mono, no header.',
              'audio/basic': 'ulaw_8000.',
              'audio/x-alaw-basic': 'alaw_8000.',
            },
          },
    },
    errors: [409, ...ENGINE_ERRORS],
    elevenLabsErrors: true,
  })),
  {
    method: 'get',
    path: '/v1/voices',
    operationId: 'elevenLabsVoicesV1',
    summary: "Every voice of the org, ElevenLabs' v1 list",
    tag: 'ElevenLabs',
    auth: 'key',
    metered: true,
    answers: { 200: json(res.ElevenLabsVoiceListSchema, "ElevenLabs' voice list.") },
    errors: [400],
    elevenLabsErrors: true,
  },
  {
    method: 'get',
    path: '/v2/voices',
    operationId: 'elevenLabsVoicesV2',
    summary: "The org's voices, ElevenLabs' v2 pages",
    tag: 'ElevenLabs',
    auth: 'key',
    metered: true,
    query: ElevenLabsV2VoicesQuery,
    answers: { 200: json(res.ElevenLabsVoicePageSchema, 'A page of voices; `next_page_token` asks the next.') },
    errors: [400],
    elevenLabsErrors: true,
  },
  {
    method: 'post',
    path: '/v1/speech-to-text',
    operationId: 'elevenLabsSpeechToText',
    summary: "Batch transcription, ElevenLabs' route",
    tag: 'ElevenLabs',
    auth: 'key',
    metered: true,
    description: 'Billed per millisecond of audio, as /v1/audio/transcriptions. `cloud_storage_url` is refused (nothing is fetched).',
    body: { multipart: req.ElevenLabsSttFormSchema },
    answers: { 200: { ...json(res.ElevenLabsTranscriptionSchema, 'The text and its timed words.'), spend: true } },
    errors: ENGINE_ERRORS,
    elevenLabsErrors: true,
  },

  // LLM
  {
    method: 'post',
    path: '/v1/chat/completions',
    operationId: 'createChatCompletion',
    summary: "Chat completions, OpenAI's route",
    tag: 'LLM',
    auth: 'key',
    metered: true,
    description: 'The body goes to the engine as sent (only `model` may be rewritten); credit is reserved first (prompt estimate + max tokens).',
    body: { json: req.ChatCompletionRequestSchema },
    answers: {
      200: {
        ...json(res.ChatCompletionSchema, "The engine's answer, relayed."),
        spend: true,
        sse: "With `stream: true`: the engine's `chat.completion.chunk` events, then `data: [DONE]`.",
      },
    },
    errors: ENGINE_ERRORS,
  },
  {
    method: 'post',
    path: '/v1/responses',
    operationId: 'createResponse',
    summary: "Responses, OpenAI's route",
    tag: 'LLM',
    auth: 'key',
    metered: true,
    description: 'Relayed to an engine that serves it, or translated to a chat completion and back for one that does not.',
    body: { json: req.ResponsesRequestSchema },
    answers: {
      200: {
        ...json(res.ResponseObjectSchema, 'The Response object.'),
        spend: true,
        sse: "With `stream: true`: OpenAI's Responses stream events (response.created ... response.completed).",
      },
    },
    errors: ENGINE_ERRORS,
  },
  socket({
    path: '/v1/responses',
    operationId: 'responsesWebSocket',
    summary: "Responses over a WebSocket, OpenAI's WebSocket mode",
    tag: 'LLM',
    doc: 'docs/llm.md#responses-over-a-websocket',
    description:
      "`response.create` events (the body of POST /v1/responses) in, one at a time; each response's stream events out, as POST /v1/responses streams them. `previous_response_id` may name the socket's latest response, `store: false` or not.",
  }),

  // Realtime
  socket({
    path: '/v1/realtime',
    operationId: 'realtimeWebSocket',
    summary: "OpenAI's Realtime API over a WebSocket",
    tag: 'Realtime',
    query: req.RealtimeQuerySchema,
    doc: 'docs/realtime.md',
    description:
      'A conversation (`?model=` a realtime profile or an LLM) or a transcription session (`?intent=transcription`). The handshake answers with the `realtime` subprotocol when offered.',
    errors: [404, 503],
  }),
  {
    method: 'post',
    path: '/v1/realtime/client_secrets',
    operationId: 'createRealtimeClientSecret',
    summary: "A short-lived client secret for a browser's WebRTC call, OpenAI's route",
    tag: 'Realtime',
    auth: 'key',
    description:
      'Minted by a backend with its key (a client secret cannot mint another): the secret stands for that key, in its org, with these session settings, until it expires (10 s to 2 h, default 10 min). Stateless and signed; revoking the key refuses its secrets.',
    body: { json: req.RealtimeClientSecretRequestSchema },
    answers: { 200: json(res.RealtimeClientSecretSchema, 'The secret, its expiry and its session.') },
    errors: [400, 404, 503],
  },
  {
    method: 'post',
    path: '/v1/realtime/calls',
    operationId: 'createRealtimeCall',
    summary: "A WebRTC call to a realtime session: SDP offer in, SDP answer out, OpenAI's route",
    tag: 'Realtime',
    auth: 'key',
    metered: true,
    description:
      'Authorized by a client secret (`Authorization: Bearer ek_…`) or a key. The events of the session go over the `oai-events` data channel, the audio both ways as Opus on the audio track (docs/realtime.md, "WebRTC"). `?model=` names the session when neither the secret nor the body does.',
    query: req.RealtimeQuerySchema.pick({ model: true }),
    body: { raw: ['application/sdp'], multipart: req.RealtimeCallFormSchema, description: 'The SDP offer, or multipart sdp and session.' },
    answers: {
      201: {
        description: 'The SDP answer; the call id in `Location: /v1/realtime/calls/{call_id}`.',
        media: { 'application/sdp': 'The SDP answer, every candidate in it.' },
      },
    },
    errors: [400, 404, 415, 429, 503],
  },
  ...['/v1/realtime/calls', '/v1/realtime/calls/{call_id}/hangup'].map((path): Operation => ({
    method: 'options',
    path,
    operationId: path.endsWith('hangup') ? 'hangupRealtimeCallPreflight' : 'createRealtimeCallPreflight',
    summary: 'CORS preflight: a page calls this route from its own origin with a client secret',
    tag: 'Realtime',
    auth: 'public',
    ...(path.endsWith('hangup') ? { pathParams: req.RealtimeCallParamsSchema } : {}),
    answers: { 204: { description: 'Any origin may POST with Authorization and Content-Type; Location is exposed.' } },
    errors: [],
  })),
  {
    method: 'post',
    path: '/v1/realtime/calls/{call_id}/hangup',
    operationId: 'hangupRealtimeCall',
    summary: 'Ends a WebRTC call',
    tag: 'Realtime',
    auth: 'key',
    pathParams: req.RealtimeCallParamsSchema,
    answers: { 200: { description: 'The call ended.' } },
    errors: [404],
  },

  // Phone
  ...Object.entries(PHONE_CARRIERS).map(([carrier, c]): Operation => ({
    method: 'get',
    path: `/phone/${carrier}/{token}`,
    operationId: `${carrier}MediaStream`,
    summary: `${c.name} of a call, bridged to a realtime session`,
    description:
      `The carrier's bidirectional media stream of one call (${c.audio}): the caller talks to the phone token's realtime profile. A WebSocket: a plain GET is 400 upgrade_required. ` +
      "The token (in the path: carriers send no headers), its key's rate limit and balance, the profile and the session caps are checked before the upgrade; a refusal is a plain HTTP answer in the error envelope. " +
      "The messages are the carrier's own: docs/phone.md.",
    tag: 'Phone',
    auth: 'phoneToken',
    metered: true,
    pathParams: req.PhoneStreamParams,
    answers: { 101: { description: 'Switching Protocols: the call runs over the WebSocket (protocol: docs/phone.md).' } },
    errors: [400, 404],
    websocket: 'docs/phone.md',
  })),
  ...Object.entries(PHONE_CARRIERS).map(([carrier, c]): Operation => ({
    method: 'get',
    path: `/phone/${carrier}`,
    operationId: `${carrier}MediaStreamTokenInParameters`,
    summary: `${c.name} of a call, the phone token in the stream's custom parameters`,
    description:
      `The same call as /phone/${carrier}/{token} (${c.audio}), for deployments that keep the token out of the URL: the carrier passes it as the stream's custom parameter \`svc_token\` (docs/phone.md). ` +
      "The upgrade is accepted without a credential; the call is admitted when the carrier's start brings the token (its key's rate limit and balance, the profile, the session caps), and nothing the carrier sends is handled before. " +
      "A refusal closes the socket with 1008 and the error's code (invalid_api_key, api_key_disabled, insufficient_quota, rate_limit_exceeded, model_not_found); no start within 5 s: 1008 start_timeout. A plain GET is 400 upgrade_required.",
    tag: 'Phone',
    auth: 'public',
    answers: { 101: { description: 'Switching Protocols: the call runs over the WebSocket once admitted (protocol: docs/phone.md).' } },
    errors: [400],
    websocket: 'docs/phone.md',
  })),

  // Voices
  {
    method: 'get',
    path: '/voices',
    operationId: 'listVoices',
    summary: "Platform voices and the org's own, newest first, paginated",
    description:
      "With a `Cartesia-Version` header (a Cartesia client), Cartesia's list instead: query `limit` (1-100), `starting_after`, `q`, `gender`, `is_owner`; answer `{data, has_more, next_page}` (docs/voices.md).",
    tag: 'Voices',
    auth: 'key',
    metered: true,
    query: ListVoicesQuery,
    answers: { 200: json(res.VoiceListSchema, 'A page of voices.') },
    errors: [400],
  },
  {
    method: 'get',
    path: '/voices/engine-catalogue',
    operationId: 'getEngineCatalogue',
    summary: "The voices a TTS model's engine lists, to import as platform voices",
    description:
      "Read from the engine (Cartesia, ElevenLabs, Deepgram Aura) through the model's first upstream whose protocol lists voices; importing them is the operator's (`svc voices import`, the dashboard's Models page). Not metered.",
    tag: 'Voices',
    auth: 'key',
    query: EngineCatalogueQuery,
    answers: { 200: json(res.EngineCatalogueSchema, "The engine's voices.") },
    errors: [400, ...ENGINE_ERRORS],
  },
  {
    method: 'get',
    path: '/voices/{id}',
    operationId: 'getVoice',
    summary: 'A voice',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    answers: { 200: json(res.VoiceSchema, 'The voice.') },
    errors: [404],
  },
  {
    method: 'get',
    path: '/voices/{id}/preview',
    operationId: 'getVoicePreview',
    summary: "A voice's preview: a fixed sentence in its language, free",
    description:
      "Made once per usable profile by a preview worker, served from storage; `model_id` picks the profile's model (the voice's `preview_models` lists the ready ones), else the first. Not metered: heard at any balance. 404 `preview_not_ready` (with `Retry-After`) while it is being made; 409 `voice_profile_missing` when the voice has no usable profile (for that model).",
    tag: 'Voices',
    auth: 'key',
    ...VOICE_ID,
    query: PreviewQuery,
    answers: { 200: { description: 'The preview (WAV); `x-svc-preview-model` names its model.', media: { 'audio/wav': AUDIO_FILE } } },
    errors: [400, 404, 409],
  },
  {
    method: 'patch',
    path: '/voices/{id}',
    operationId: 'updateVoice',
    summary: "Rename, retag, re-describe one of the org's voices",
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    body: { json: UpdateVoiceInput },
    answers: { 200: json(res.VoiceSchema, 'The voice as updated.') },
    errors: [403, 404],
  },
  {
    method: 'delete',
    path: '/voices/{id}',
    operationId: 'deleteVoice',
    summary: "Delete one of the org's voices",
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    answers: { 200: json(res.DeletedSchema, 'Deleted.') },
    errors: [403, 404],
  },
  {
    method: 'post',
    path: '/voices/{id}/save',
    operationId: 'saveVoice',
    summary: 'Bookmark a voice for the org',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    answers: { 200: json(res.VoiceSchema, 'The voice, saved.') },
    errors: [404],
  },
  {
    method: 'delete',
    path: '/voices/{id}/save',
    operationId: 'unsaveVoice',
    summary: 'Remove the bookmark',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    answers: { 200: json(res.VoiceSchema, 'The voice, not saved.') },
    errors: [404],
  },
  {
    method: 'post',
    path: '/voices/clone',
    operationId: 'cloneVoice',
    summary: 'Instant clone from one clip',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    description:
      'The clip as multipart `file`, or an uploaded blob (`blob_id`) in JSON. 201 with the voice when an engine that can clone is online, else 202 with a job.',
    body: { multipart: req.CloneFormSchema, json: CloneJson },
    answers: { 201: json(res.VoiceSchema, 'The new voice.'), 202: json(res.VoiceJobQueuedSchema, 'Queued.') },
    errors: [403, 404, 502, 503],
  },
  {
    method: 'post',
    path: '/voices/pro-clone',
    operationId: 'proCloneVoice',
    summary: 'Professional clone from uploaded clips (a job)',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    body: { json: ProClone },
    answers: { 202: json(res.VoiceJobQueuedSchema, 'Queued.') },
    errors: [403, 404, 503],
  },
  {
    method: 'post',
    path: '/voices/{id}/localize',
    operationId: 'localizeVoice',
    summary: "A new voice that keeps this one's character in another language (a job)",
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    body: { json: Localize },
    answers: { 202: json(res.VoiceJobQueuedSchema, 'Queued.') },
    errors: [403, 404, 503],
  },
  {
    method: 'post',
    path: '/voices/{id}/profiles',
    operationId: 'prepareVoiceProfile',
    summary: 'Prepare a voice for a model',
    tag: 'Voices',
    auth: 'key',
    metered: true,
    ...VOICE_ID,
    body: { json: PrepareProfile },
    answers: { 200: json(res.VoiceProfileReadySchema, 'A ready cached profile.'), 202: json(res.VoiceJobQueuedSchema, 'Queued.') },
    errors: [403, 404, 503],
  },

  // Blobs
  {
    method: 'post',
    path: '/blobs',
    operationId: 'uploadBlob',
    summary: 'Upload an audio clip (25 MB per blob, 250 MB per org)',
    tag: 'Blobs',
    auth: 'key',
    metered: true,
    query: UploadQuery,
    body: {
      multipart: req.BlobFormSchema,
      raw: ['audio/wav', 'application/octet-stream'],
      description: 'WAV, or raw 16-bit mono PCM (application/octet-stream) with `?sample_rate=`.',
    },
    answers: { 201: json(res.BlobSchema, 'The stored blob.') },
    errors: [],
  },
  {
    method: 'get',
    path: '/blobs/{id}',
    operationId: 'getBlob',
    summary: 'A blob',
    tag: 'Blobs',
    auth: 'key',
    metered: true,
    pathParams: BlobIdParams,
    answers: { 200: json(res.BlobSchema, 'The blob.') },
    errors: [404],
  },
  {
    method: 'get',
    path: '/blobs/{id}/content',
    operationId: 'getBlobContent',
    summary: "A blob's bytes",
    tag: 'Blobs',
    auth: 'key',
    metered: true,
    pathParams: BlobIdParams,
    answers: { 200: { description: 'The stored audio.', media: { 'audio/wav': AUDIO_FILE } } },
    errors: [404],
  },
  {
    method: 'delete',
    path: '/blobs/{id}',
    operationId: 'deleteBlob',
    summary: 'Delete a blob',
    tag: 'Blobs',
    auth: 'key',
    metered: true,
    pathParams: BlobIdParams,
    answers: { 200: json(res.DeletedSchema, 'Deleted.') },
    errors: [404],
  },

  // Jobs
  {
    method: 'get',
    path: '/jobs',
    operationId: 'listJobs',
    summary: "The org's recent jobs",
    tag: 'Jobs',
    auth: 'key',
    metered: true,
    query: ListJobsQuery,
    answers: { 200: json(res.JobListSchema, 'Newest first.') },
    errors: [400],
  },
  {
    method: 'get',
    path: '/jobs/{id}',
    operationId: 'getJob',
    summary: 'A job',
    tag: 'Jobs',
    auth: 'key',
    metered: true,
    pathParams: JobIdParams,
    answers: { 200: json(res.JobSchema, 'The job.') },
    errors: [404],
  },

  // Request logs
  {
    method: 'get',
    path: '/v1/logs',
    operationId: 'listRequestLogs',
    summary: "The organization's request and session logs, newest first, paginated and filtered; or an export",
    description:
      'format=json (default): a page of records (limit ≤ 200). format=jsonl or csv: a file of up to 10,000 records, the next page named in the x-svc-next-cursor header.',
    tag: 'Logs',
    auth: 'key',
    query: LogsQuery,
    answers: {
      200: {
        description: 'A page of request logs, or an export.',
        json: res.RequestLogListSchema,
        media: { 'application/x-ndjson': 'JSON Lines: one record per line (format=jsonl).', 'text/csv': 'CSV with a header line (format=csv).' },
      },
    },
    errors: [400],
  },
  {
    method: 'get',
    path: '/v1/logs/{id}',
    operationId: 'getRequestLog',
    summary: "One request log with its session's turns",
    tag: 'Logs',
    auth: 'key',
    pathParams: LogIdParams,
    answers: { 200: json(res.RequestLogDetailSchema, 'The request log.') },
    errors: [404],
  },
  // Pronunciation dictionaries
  {
    method: 'get',
    path: '/pronunciation-dicts',
    operationId: 'listDicts',
    summary: "The org's dictionaries",
    tag: 'Pronunciation dictionaries',
    auth: 'key',
    metered: true,
    answers: { 200: json(res.DictListSchema, 'Without their entries.') },
    errors: [],
  },
  {
    method: 'post',
    path: '/pronunciation-dicts',
    operationId: 'createDict',
    summary: 'Create a dictionary',
    tag: 'Pronunciation dictionaries',
    auth: 'key',
    metered: true,
    body: { json: CreateDictSchema },
    answers: { 201: json(res.DictSchema, 'The new dictionary.') },
    errors: [409],
  },
  {
    method: 'get',
    path: '/pronunciation-dicts/{id}',
    operationId: 'getDict',
    summary: 'A dictionary with its entries',
    tag: 'Pronunciation dictionaries',
    auth: 'key',
    metered: true,
    pathParams: req.DictIdParams,
    answers: { 200: json(res.DictSchema, 'The dictionary.') },
    errors: [404],
  },
  {
    method: 'patch',
    path: '/pronunciation-dicts/{id}',
    operationId: 'updateDict',
    summary: 'Rename and/or replace the entries',
    tag: 'Pronunciation dictionaries',
    auth: 'key',
    metered: true,
    pathParams: req.DictIdParams,
    body: { json: UpdateDictSchema },
    answers: { 200: json(res.DictSchema, 'The dictionary as updated.') },
    errors: [404, 409],
  },
  {
    method: 'delete',
    path: '/pronunciation-dicts/{id}',
    operationId: 'deleteDict',
    summary: 'Delete a dictionary',
    tag: 'Pronunciation dictionaries',
    auth: 'key',
    metered: true,
    pathParams: req.DictIdParams,
    answers: { 200: json(res.DeletedSchema, 'Deleted.') },
    errors: [404],
  },
  ...(['post', 'put'] as const).map((method): Operation => ({
    method,
    path: '/pronunciation-dicts/{id}',
    operationId: `${method}DictNotAllowed`,
    summary: 'Not allowed: use GET, PATCH or DELETE',
    tag: 'Pronunciation dictionaries',
    auth: 'public',
    description: 'Registered so that the answer names the methods that are allowed (405 with `Allow: GET, PATCH, DELETE`), whatever the key.',
    pathParams: req.DictIdParams,
    answers: {},
    errors: [405],
  })),

  // Agent registration
  ...(
    [
      [
        '/.well-known/oauth-authorization-server',
        'getAuthorizationServerMetadata',
        'Authorization-server metadata (RFC 8414) with the agent_auth block',
        res.AuthorizationServerMetadataSchema,
      ],
      [
        '/.well-known/oauth-protected-resource',
        'getProtectedResourceMetadata',
        'Protected-resource metadata (RFC 9728) of {base_url}/v1',
        res.ProtectedResourceMetadataSchema,
      ],
      [
        '/.well-known/oauth-protected-resource/v1',
        'getProtectedResourceMetadataV1',
        'The same, at the path of the resource (RFC 9728 §3.1)',
        res.ProtectedResourceMetadataSchema,
      ],
    ] as const
  ).map(([path, operationId, summary, schema]): Operation => ({
    method: 'get',
    path,
    operationId,
    summary,
    tag: 'Agent registration',
    auth: 'public',
    answers: { 200: json(schema, 'Cacheable for 60 s.') },
    errors: [429, 503],
  })),
  {
    method: 'post',
    path: '/agent/identity',
    operationId: 'registerAgent',
    summary: 'Register an agent (anonymous or service_auth)',
    tag: 'Agent registration',
    auth: 'public',
    body: { json: IdentityBody },
    answers: { 200: json(res.RegistrationSchema, 'The registration, with its claim token.') },
    errors: [429, 503],
  },
  {
    method: 'post',
    path: '/agent/identity/claim',
    operationId: 'startClaim',
    summary: "Start a user's claim of an agent",
    tag: 'Agent registration',
    auth: 'public',
    body: { json: ClaimBody },
    answers: { 200: json(res.ClaimStartedSchema, 'The claim attempt: a user code to show.') },
    errors: [404, 410, 429, 503],
  },
  {
    method: 'post',
    path: '/oauth2/token',
    operationId: 'issueToken',
    summary: 'Token endpoint: jwt-bearer (trial key) and claim (key once claimed) grants',
    tag: 'Agent registration',
    auth: 'public',
    description: 'RFC 6749 form-encoded (JSON is accepted too). Polling before the claim completes is 400 authorization_pending; too often, 429 slow_down.',
    body: { form: req.TokenRequestSchema, json: req.TokenRequestSchema },
    answers: { 200: json(res.TokenSchema, 'The API key as an access token (never cached: Cache-Control no-store).') },
    errors: [410, 429, 503],
  },
];
