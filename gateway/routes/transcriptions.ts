// POST /v1/audio/transcriptions (OpenAI-compatible, multipart). The file is read with a
// 25 MB cap enforced while it streams in (413 body_too_large as soon as it is exceeded);
// fields may come before or after the file. `response_format` picks the answer's shape
// (transcription-formats.ts); the default (json) is the spec's {text, words, duration_seconds}.
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import { acceptMultipart, readUpload } from '../multipart-upload.ts';
import { decodeUploadedAudio, parseSampleRateParam } from '../stt/decode-upload.ts';
import { transcribeBilled } from '../stt/transcribe-billed.ts';
import { parseGranularities, parseResponseFormat, segmentsOf, srt, verboseJson, vtt } from './transcription-formats.ts';

export const TRANSCRIPTION_BODY_LIMIT = 25 * 1024 * 1024;

/** keyterms as a form field: one per line, or comma separated. */
export function parseKeyterms(value: string | undefined): string[] {
  if (!value) return [];
  return value
    .split(/[\n,]/)
    .map((t) => t.trim())
    .filter(Boolean)
    .slice(0, 100);
}

/** A streaming route's keyterms from its query: ours (`keyterms`) and Cartesia's (`keyterm`), each repeatable. */
export function queryKeyterms(query: Record<string, string | string[] | undefined>): string[] {
  return (['keyterms', 'keyterm'] as const).flatMap((name) => [query[name] ?? []].flat().flatMap((value) => parseKeyterms(value))).slice(0, 100);
}

/**
 * The recognition hints of a request: `keyterms`, and OpenAI's `prompt` read the same way (the
 * gateway's own `openai` upstream protocol sends keyterms as the prompt, comma separated, so a
 * gateway behind a gateway keeps them). A prompt in prose is a phrase per comma-separated part.
 */
function hintsOf(fields: Record<string, string>): string[] {
  return [...new Set([...parseKeyterms(fields.keyterms), ...parseKeyterms(fields.prompt)])].slice(0, 100);
}

export async function registerTranscriptionRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  await acceptMultipart(app, TRANSCRIPTION_BODY_LIMIT);

  app.post('/v1/audio/transcriptions', { bodyLimit: TRANSCRIPTION_BODY_LIMIT + 1024 * 1024, config: { metered: true } }, async (request, reply) => {
    if (!request.isMultipart()) throw new ServiceError('unsupported_media_type', 'Send the audio as multipart/form-data with a file field.');
    const upload = await readUpload(request, {
      fileField: 'file',
      sizeLabel: '25 MB',
      fieldNames: 'file, model, language, keyterms, prompt, sample_rate, response_format and timestamp_granularities[]',
    });
    const fields = upload.fields;
    if (!upload.file) throw new ServiceError('invalid_request', "Missing the audio: send it in the multipart field 'file'.", 'file');
    const model = ctx.registry.resolve(fields.model, 'stt', request.auth);
    const format = parseResponseFormat(fields.response_format);
    const granularities = parseGranularities([...(upload.values['timestamp_granularities[]'] ?? []), ...(upload.values.timestamp_granularities ?? [])]);
    request.modelId = model.id;
    const declaredRate = parseSampleRateParam(fields.sample_rate, model.sampleRates);
    const audio = decodeUploadedAudio(upload.file, declaredRate, model.sampleRates);
    // The upload (up to 25 MB) is not needed while the engine transcribes: let it be collected.
    upload.file = undefined;

    const transcript = await transcribeBilled(ctx, request, reply, model, audio, {
      language: fields.language || undefined,
      keyterms: hintsOf(fields),
      usageRoute: 'audio.transcriptions',
    });
    const seconds = audio.durationSeconds;
    switch (format) {
      case 'json':
        return { text: transcript.text, words: transcript.words, duration_seconds: Math.round(seconds * 1000) / 1000 };
      case 'verbose_json':
        return verboseJson(transcript, seconds, fields.language || undefined, granularities);
      case 'text':
        return reply.type('text/plain; charset=utf-8').send(transcript.text);
      case 'srt':
        return reply.type('application/x-subrip; charset=utf-8').send(srt(segmentsOf(transcript, seconds)));
      case 'vtt':
        return reply.type('text/vtt; charset=utf-8').send(vtt(segmentsOf(transcript, seconds)));
    }
  });
}
