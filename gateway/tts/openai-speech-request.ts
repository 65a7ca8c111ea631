// OpenAI's speech request mapped onto the TtsRequest pipeline.
//   model, input, voice (a voice id from GET /voices, or {id}), response_format
//   (mp3 | wav | pcm; default mp3), speed (0.6-1.5 here), stream_format (audio | sse),
//   plus our extensions language and pronunciation_dict_id.
// pcm is OpenAI's raw 24 kHz 16-bit little-endian mono; wav and mp3 are 24 kHz too.
import { refuseNul } from '../../server/services/parse-input.ts';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import type { TtsRequest } from './tts-request.ts';

export const OpenAiSpeechRequestSchema = z.object({
  model: z.string().min(1),
  input: z
    .string()
    .min(1, 'must not be empty')
    .refine((s) => [...s].length <= 5000, 'must be at most 5000 characters'),
  voice: z.union([z.string().min(1), z.object({ id: z.string().min(1) })]),
  response_format: z.enum(['mp3', 'wav', 'pcm', 'opus', 'aac', 'flac']).default('mp3'),
  speed: z.number().min(0.6, 'must be between 0.6 and 1.5 on this server').max(1.5, 'must be between 0.6 and 1.5 on this server').default(1),
  stream_format: z.enum(['audio', 'sse']).default('audio'),
  instructions: z.string().optional(),
  language: z
    .string()
    .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/)
    .optional(),
  pronunciation_dict_id: z.string().min(1).optional(),
});

export function parseOpenAiSpeechRequest(body: unknown): { tts: TtsRequest; sse: boolean } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ServiceError('invalid_json', 'The request body must be a JSON object.');
  refuseNul(body);
  const parsed = OpenAiSpeechRequestSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = issue.path.join('.') || null;
    throw new ServiceError('invalid_request', `${param ?? 'body'}: ${issue.message}`, param);
  }
  const r = parsed.data;
  if (r.response_format === 'opus' || r.response_format === 'aac' || r.response_format === 'flac') {
    throw new ServiceError('invalid_request', `response_format '${r.response_format}' is not supported; use mp3, wav or pcm.`, 'response_format');
  }
  const sse = r.stream_format === 'sse';
  const container = r.response_format === 'pcm' ? 'raw' : r.response_format;
  if (sse && container === 'mp3') {
    throw new ServiceError(
      'invalid_output_format',
      'Streaming TTS does not support mp3; use response_format wav or pcm with stream_format sse.',
      'response_format',
    );
  }
  if (sse && r.speed !== 1) throw new ServiceError('invalid_generation_config', 'Streaming TTS requires speed 1.', 'speed');
  return {
    sse,
    tts: {
      modelId: r.model,
      transcript: r.input,
      voiceId: typeof r.voice === 'string' ? r.voice : r.voice.id,
      language: r.language,
      output: { container, sampleRate: 24000, encoding: 'pcm_s16le', bitRate: 128000 },
      speed: r.speed,
      volume: 1,
      dictId: r.pronunciation_dict_id,
      // wav and pcm are relayed progressively (like OpenAI's chunked responses); mp3 is encoded whole.
      stream: container !== 'mp3',
    },
  };
}
