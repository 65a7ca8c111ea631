// One multipart reader for the upload routes (transcriptions, clone, blobs): one file in a
// named field plus text fields, the file's cap enforced while it streams in (413 as soon as it
// is exceeded, not after the whole upload), and every busboy failure as an envelope code.
import { refuseNul } from '../server/services/parse-input.ts';
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../server/services/errors.ts';

/** Registers multipart parsing on a route scope; other content types reach the route drained. */
export async function acceptMultipart(app: FastifyInstance, maxFileBytes: number): Promise<void> {
  await app.register(multipart, { limits: { fileSize: maxFileBytes, files: 1, fields: 20, fieldSize: 64 * 1024, parts: 30 } });
  // Bodies of any other type reach the route, which says what to send (rather than the
  // gateway-wide "send application/json"); they are drained, never kept.
  app.addContentTypeParser('*', (_request, payload, done) => {
    payload.on('error', done);
    payload.on('end', () => done(null, undefined));
    payload.resume();
  });
}

/** What @fastify/multipart and busboy throw, as the envelope's codes (never a 500). */
function multipartError(err: unknown, options: UploadOptions): unknown {
  if (err instanceof ServiceError) return err;
  const code = (err as { code?: unknown }).code;
  switch (code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ServiceError('body_too_large', `The file is larger than ${options.sizeLabel}.`);
    case 'FST_FILES_LIMIT':
      return new ServiceError('invalid_request', `Send one file, in the multipart field '${options.fileField}'.`, options.fileField);
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ServiceError('invalid_request', `Too many multipart fields: send ${options.fieldNames}.`);
  }
  return new ServiceError('invalid_request', `The multipart/form-data body could not be read: ${err instanceof Error ? err.message : String(err)}`);
}

export interface UploadOptions {
  fileField: string;
  /** "25 MB": for messages. */
  sizeLabel: string;
  /** "file, model, language": for messages. */
  fieldNames: string;
}

/**
 * `fields`: each text field's last value; `values`: every value of each, in order (for fields a
 * client repeats, like OpenAI's `timestamp_granularities[]`).
 */
export async function readUpload(
  request: FastifyRequest,
  options: UploadOptions,
): Promise<{ file: Buffer | undefined; fields: Record<string, string>; values: Record<string, string[]> }> {
  const fields: Record<string, string> = {};
  const values: Record<string, string[]> = {};
  let file: Buffer | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== options.fileField) {
          await part.toBuffer().catch(() => {});
          throw new ServiceError('invalid_request', `Unexpected file field '${part.fieldname}'; the audio goes in '${options.fileField}'.`, part.fieldname);
        }
        // Read here rather than with toBuffer(), which waits for the end of the upload even
        // once the cap is passed: the 413 goes out as soon as the file is over the cap.
        const tooLarge = () => new ServiceError('body_too_large', `The file is larger than ${options.sizeLabel}.`);
        if (part.file.truncated) throw tooLarge();
        part.file.once('limit', () => part.file.destroy(tooLarge()));
        const chunks: Buffer[] = [];
        for await (const chunk of part.file) chunks.push(chunk as Buffer);
        if (part.file.truncated) throw tooLarge();
        file = Buffer.concat(chunks);
      } else {
        fields[part.fieldname] = String(part.value);
        (values[part.fieldname] ??= []).push(fields[part.fieldname]!);
      }
    }
  } catch (err) {
    throw multipartError(err, options);
  }
  refuseNul(fields);
  refuseNul(values);
  return { file, fields, values };
}
