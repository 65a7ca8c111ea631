// POST /v1/audio/transcriptions (OpenAI-compatible, multipart). The file is read with a
// 25 MB cap enforced while it streams in (413 body_too_large as soon as it is exceeded);
// fields may come before or after the file.
import type { FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import { perSecondCostMicros } from '../../server/services/credits/pricing.js';
import { ServiceError } from '../../server/services/errors.js';
import { setSpendHeaders } from '../core/gateway-core.js';
import type { GatewayContext } from '../context.js';
import { decodeUploadedAudio, parseSampleRateParam } from '../stt/decode-upload.js';
import { transcribeWithUpstreams } from '../stt/transcribe.js';

export const TRANSCRIPTION_BODY_LIMIT = 25 * 1024 * 1024;

/** keyterms as a form field: one per line, or comma separated. */
export function parseKeyterms(value: string | undefined): string[] {
  if (!value) return [];
  return value.split(/[\n,]/).map((t) => t.trim()).filter(Boolean).slice(0, 100);
}

/** What @fastify/multipart and busboy throw, as the envelope's codes (never a 500). */
function multipartError(err: unknown): unknown {
  if (err instanceof ServiceError) return err;
  const code = (err as { code?: unknown }).code;
  switch (code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ServiceError('body_too_large', 'The file is larger than 25 MB.');
    case 'FST_FILES_LIMIT':
      return new ServiceError('invalid_request', "Send one file, in the multipart field 'file'.", 'file');
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ServiceError('invalid_request', 'Too many multipart fields: send file, model, language, keyterms and sample_rate.');
  }
  return new ServiceError('invalid_request', `The multipart/form-data body could not be read: ${err instanceof Error ? err.message : String(err)}`);
}

export async function registerTranscriptionRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  await app.register(multipart, { limits: { fileSize: TRANSCRIPTION_BODY_LIMIT, files: 1, fields: 20, fieldSize: 64 * 1024, parts: 30 } });
  // Bodies of any other type reach the route, which says to send multipart (rather than the
  // gateway-wide "send application/json"); they are drained, never kept.
  app.addContentTypeParser('*', (_request, payload, done) => {
    payload.on('error', done);
    payload.on('end', () => done(null, undefined));
    payload.resume();
  });

  app.post('/v1/audio/transcriptions', { bodyLimit: TRANSCRIPTION_BODY_LIMIT + 1024 * 1024, config: { metered: true } }, async (request, reply) => {
    if (!request.isMultipart()) throw new ServiceError('unsupported_media_type', 'Send the audio as multipart/form-data with a file field.');
    const fields: Record<string, string> = {};
    let file: Buffer | undefined;
    try {
      for await (const part of request.parts()) {
        if (part.type === 'file') {
          if (part.fieldname !== 'file') {
            await part.toBuffer().catch(() => {});
            throw new ServiceError('invalid_request', `Unexpected file field '${part.fieldname}'; the audio goes in 'file'.`, part.fieldname);
          }
          // Read here rather than with toBuffer(), which waits for the end of the upload even
          // once the cap is passed: the 413 goes out as soon as the file is over 25 MB.
          const tooLarge = () => new ServiceError('body_too_large', 'The file is larger than 25 MB.');
          if (part.file.truncated) throw tooLarge();
          part.file.once('limit', () => part.file.destroy(tooLarge()));
          const chunks: Buffer[] = [];
          for await (const chunk of part.file) chunks.push(chunk as Buffer);
          if (part.file.truncated) throw tooLarge();
          file = Buffer.concat(chunks);
        } else {
          fields[part.fieldname] = String(part.value);
        }
      }
    } catch (err) {
      throw multipartError(err);
    }
    if (!file) throw new ServiceError('invalid_request', "Missing the audio: send it in the multipart field 'file'.", 'file');
    const model = ctx.registry.resolve(fields.model, 'stt');
    const declaredRate = parseSampleRateParam(fields.sample_rate, model.sampleRates);
    const audio = decodeUploadedAudio(file, declaredRate, model.sampleRates);
    file = undefined;

    const transcript = await transcribeWithUpstreams(ctx, reply, model, {
      samples: audio.samples,
      sampleRate: audio.sampleRate,
      language: fields.language || undefined,
      keyterms: parseKeyterms(fields.keyterms),
    });
    const audioMillis = Math.round(audio.durationSeconds * 1000);
    const cost = perSecondCostMicros(model.prices.picoPerSecond, audioMillis);
    const remaining = await ctx.core.charge(request.auth, request.id, cost, { modelId: model.id, modality: 'stt', route: 'audio.transcriptions', audioMillis });
    setSpendHeaders(reply, cost, remaining);
    return { text: transcript.text, words: transcript.words, duration_seconds: Math.round(audio.durationSeconds * 1000) / 1000 };
  });
}
