// The TtsRequest of the spec, validated once for /tts/sse and /tts/bytes, with the spec's
// error codes: output_format problems -> invalid_output_format, generation_config problems
// -> invalid_generation_config, everything else -> invalid_request with the field as param.
import { refuseNul } from '../../server/services/parse-input.ts';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';

import { CONTAINERS, ENCODINGS, MP3_BIT_RATES, SAMPLE_RATES, type OutputFormat } from '../audio/output-format.ts';

const oneOf = <T extends number>(values: readonly T[]) =>
  z.number().refine((v): v is T => (values as readonly number[]).includes(v), { message: `must be one of ${values.join(', ')}` });

const OutputFormatSchema = z.object({
  container: z.enum(CONTAINERS),
  sample_rate: oneOf(SAMPLE_RATES),
  encoding: z.enum(ENCODINGS).optional(),
  bit_rate: oneOf(MP3_BIT_RATES).optional(),
});

// Characters are Unicode code points (what is billed), not UTF-16 units; a string of at most
// 5000 units has at most 5000 code points, so only a longer one is counted.
const atMost5000 = (s: string) => s.length <= 5000 || [...s].length <= 5000;
const TOO_LONG = 'must be at most 5000 characters';

export const TtsRequestSchema = z.object({
  model_id: z.string().min(1),
  transcript: z.string().min(1, 'must not be empty').refine(atMost5000, TOO_LONG),
  // Cartesia's clients also send a voice as its id alone ("voice": "flite-slt") or as {id}
  // without a mode (cartesia-js 4 types allow it): both are mode id.
  voice: z.preprocess(
    (v) => (typeof v === 'string' ? { mode: 'id', id: v } : v !== null && typeof v === 'object' && !('mode' in v) ? { mode: 'id', ...v } : v),
    z.object({ mode: z.literal('id'), id: z.string().min(1) }),
  ),
  language: z
    .string()
    .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/, 'must be a language tag like en or en-US')
    .optional(),
  output_format: OutputFormatSchema,
  generation_config: z.object({ speed: z.number().min(0.6).max(1.5).optional(), volume: z.number().min(0.5).max(2).optional() }).optional(),
  pronunciation_dict_id: z.string().min(1).optional(),
  stream: z.boolean().optional(),
});

/** WS /tts/websocket: a piece of a context's text may be empty (a flush, or the end of the context). */
const SocketRequestSchema = TtsRequestSchema.extend({ transcript: z.string().refine(atMost5000, TOO_LONG).default('') });

export interface TtsRequest {
  modelId: string;
  transcript: string;
  voiceId: string;
  language: string | undefined;
  output: OutputFormat;
  speed: number;
  volume: number;
  dictId: string | undefined;
  stream: boolean;
}

function codeFor(path: PropertyKey[]): 'invalid_output_format' | 'invalid_generation_config' | 'invalid_request' {
  if (path[0] === 'output_format') return 'invalid_output_format';
  if (path[0] === 'generation_config') return 'invalid_generation_config';
  return 'invalid_request';
}

/**
 * `streaming`: /tts/sse and WS /tts/websocket always, /tts/bytes with stream:true — no mp3, speed
 * must be 1. The WebSocket (a generation request of Cartesia's protocol) sends raw audio only,
 * as Cartesia's does, and takes an empty transcript.
 */
export function parseTtsRequest(body: unknown, route: 'sse' | 'bytes' | 'websocket'): TtsRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ServiceError('invalid_json', 'The request body must be a JSON object.');
  refuseNul(body);
  const parsed = (route === 'websocket' ? SocketRequestSchema : TtsRequestSchema).safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = issue.path.join('.') || null;
    throw new ServiceError(codeFor(issue.path), `${param ?? 'body'}: ${issue.message}`, param);
  }
  const r = parsed.data;
  const streaming = route !== 'bytes' || r.stream === true;
  const f = r.output_format;
  if (route === 'websocket' && f.container !== 'raw') {
    throw new ServiceError(
      'invalid_output_format',
      'The WebSocket sends raw audio only: use output_format.container "raw" (and an encoding).',
      'output_format.container',
    );
  }
  if (f.container === 'mp3') {
    if (streaming)
      throw new ServiceError(
        'invalid_output_format',
        'Streaming TTS does not support mp3; use the wav or raw container, or /tts/bytes without stream.',
        'output_format.container',
      );
    if (f.encoding !== undefined)
      throw new ServiceError('invalid_output_format', 'output_format.encoding applies to wav and raw only, not mp3.', 'output_format.encoding');
  } else if (f.bit_rate !== undefined) {
    throw new ServiceError('invalid_output_format', 'output_format.bit_rate applies to mp3 only.', 'output_format.bit_rate');
  }
  const speed = r.generation_config?.speed ?? 1;
  if (streaming && speed !== 1) {
    throw new ServiceError(
      'invalid_generation_config',
      'Streaming TTS requires generation_config.speed to be 1; use /tts/bytes without stream to change the speed.',
      'generation_config.speed',
    );
  }
  return {
    modelId: r.model_id,
    transcript: r.transcript,
    voiceId: r.voice.id,
    language: r.language,
    output: { container: f.container, sampleRate: f.sample_rate, encoding: f.encoding ?? 'pcm_s16le', bitRate: f.bit_rate ?? 128000 },
    speed,
    volume: r.generation_config?.volume ?? 1,
    dictId: r.pronunciation_dict_id,
    stream: streaming,
  };
}
