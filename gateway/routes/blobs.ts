// Blob upload for clone clips: POST /blobs with the audio as multipart `file` or as the raw
// body (Content-Type audio/wav or application/octet-stream for raw 16-bit PCM with
// ?sample_rate=). Audio is checked and measured; raw PCM is stored as WAV so it can be
// decoded later without its rate. 25 MB per blob, 250 MB per org.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { blobTooLarge, deleteBlob, getBlobOrThrow, MAX_BLOB_BYTES, presentBlob, readBlobBytes, storeBlob } from '../../server/services/blobs/blob-store.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import type { GatewayContext } from '../context.ts';
import { readUpload } from '../multipart-upload.ts';
import { parseSampleRateParam } from '../stt/decode-upload.ts';
import { measureClipFile } from '../voices/voice-clip.ts';

export const BlobIdParams = z.object({ id: z.string().min(1).max(100) });
export const UploadQuery = z.strictObject({ sample_rate: z.string().optional() });

/** Must be registered in the same scope as acceptMultipart (the voice routes' scope). */
export function registerBlobRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const { prisma } = ctx.db;
  const keyed = { config: { metered: true } };
  // Raw audio bodies, read with the blob cap.
  for (const type of ['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/vnd.wave', 'audio/pcm', 'audio/l16', 'application/octet-stream']) {
    app.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit: MAX_BLOB_BYTES }, (_request, body, done) => done(null, body));
  }

  app.post('/blobs', { ...keyed, bodyLimit: MAX_BLOB_BYTES + 1024 * 1024 }, async (request, reply) => {
    const query = parseInput(UploadQuery, request.query, { body: false });
    let bytes: Buffer | undefined;
    let rate = query.sample_rate;
    const declaredWav = /^audio\/(x-)?wav|^audio\/(vnd\.)?wave/.test(request.headers['content-type'] ?? '');
    if (request.isMultipart()) {
      const upload = await readUpload(request, { fileField: 'file', sizeLabel: '25 MB', fieldNames: 'file and sample_rate' });
      bytes = upload.file;
      rate = upload.fields.sample_rate ?? rate;
    } else if (Buffer.isBuffer(request.body)) {
      bytes = request.body;
    }
    if (!bytes || bytes.length === 0) {
      throw new ServiceError(
        'invalid_request',
        "Send the audio as multipart/form-data in the field 'file', or as the request body with Content-Type audio/wav (or application/octet-stream for raw 16-bit PCM with ?sample_rate=).",
        'file',
      );
    }
    if (bytes.length > MAX_BLOB_BYTES) throw blobTooLarge();
    if (declaredWav && bytes.subarray(0, 4).toString('latin1') !== 'RIFF') {
      throw new ServiceError(
        'unsupported_audio_format',
        'The body is declared audio/wav but is not a WAV file; send raw PCM as application/octet-stream with ?sample_rate=.',
        'file',
      );
    }
    // Measured from the header: a stored blob is decoded only when a clone uses it.
    const clip = measureClipFile(bytes, parseSampleRateParam(rate, null));
    if (clip.frames === 0) throw new ServiceError('invalid_request', 'The audio holds no samples.', 'file');
    const blob = await storeBlob(prisma, ctx.config.dataDir, {
      orgId: request.auth.orgId,
      contentType: 'audio/wav',
      bytes: clip.wav,
      durationMs: clip.durationMs,
    });
    return reply.code(201).send(blob);
  });

  app.get('/blobs/:id', keyed, async (request) => {
    const { id } = parseInput(BlobIdParams, request.params, { body: false });
    return presentBlob(await getBlobOrThrow(prisma, request.auth.orgId, id));
  });

  app.get('/blobs/:id/content', keyed, async (request, reply) => {
    const { id } = parseInput(BlobIdParams, request.params, { body: false });
    const blob = await getBlobOrThrow(prisma, request.auth.orgId, id);
    return reply
      .type(blob.contentType)
      .header('content-length', blob.sizeBytes)
      .send(await readBlobBytes(ctx.config.dataDir, blob));
  });

  app.delete('/blobs/:id', keyed, async (request) => {
    const { id } = parseInput(BlobIdParams, request.params, { body: false });
    return deleteBlob(prisma, ctx.config.dataDir, request.auth.orgId, id);
  });
}
