// The voice library: GET /voices, get/rename/retag/delete a voice, save/unsave, instant clone
// (multipart or JSON with a blob), professional clone and localization (jobs), profile
// preparation for another model, and a TTS model's engine catalogue. Routes parse, call the voice services (server/services/voices)
// and answer; the engines' part is gateway/voices/voice-engines.ts, shared with the job worker.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { getBlobOrThrow, MAX_BLOB_BYTES, readBlobBytes } from '../../server/services/blobs/blob-store.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import { cloneVoice } from '../../server/services/voices/clone-voice.ts';
import { deleteVoice } from '../../server/services/voices/delete-voice.ts';
import { getOwnedVoiceOrThrow, getVoice } from '../../server/services/voices/get-voice.ts';
import { getVoicePreview } from '../../server/services/voices/get-voice-preview.ts';
import { ListVoicesQuery, listVoices } from '../../server/services/voices/list-voices.ts';
import { localizeVoice } from '../../server/services/voices/localize-voice.ts';
import { prepareVoiceProfile } from '../../server/services/voices/prepare-voice-profile.ts';
import { MAX_PRO_CLIPS, proCloneVoice } from '../../server/services/voices/pro-clone-voice.ts';
import { setVoiceSaved } from '../../server/services/voices/save-voice.ts';
import { UpdateVoiceInput, updateVoice, VoiceLanguage, VoiceName, VoiceTags } from '../../server/services/voices/update-voice.ts';
import { onClientGone } from '../client-gone.ts';
import type { GatewayContext } from '../context.ts';
import { isCartesiaClient, listVoicesForCartesia } from './cartesia-voice-list.ts';
import { acceptMultipart, readUpload } from '../multipart-upload.ts';
import { parseSampleRateParam } from '../stt/decode-upload.ts';
import { decodeClip, type MeasuredClip } from '../voices/voice-clip.ts';
import { listEngineVoices } from '../voices/engine-catalogue.ts';
import { voiceDeps } from '../voices/voice-engines.ts';

export const VoiceIdParams = z.object({ id: z.string().min(1).max(100) });
const Mode = z.enum(['stability', 'similarity']);
const ProfileVersion = z.string().trim().min(1).max(64);
const Transcript = z.string().max(20_000, 'at most 20000 characters');

/** Clone fields, the same for the multipart form and the JSON body. */
export const CloneFields = z.strictObject({
  name: VoiceName,
  language: VoiceLanguage.default('en'),
  mode: Mode.default('similarity'),
  transcript: Transcript.optional(),
  model_id: z.string().min(1).max(200).optional(),
  profile_version: ProfileVersion.default('1'),
  description: z.string().trim().max(1000).optional(),
  tags: VoiceTags.optional(),
  sample_rate: z.string().optional(),
});
export const CloneJson = CloneFields.omit({ sample_rate: true }).extend({ blob_id: z.string().min(1).max(100) });

export const ProClone = z.strictObject({
  name: VoiceName,
  language: VoiceLanguage.default('en'),
  blob_ids: z
    .array(z.string().min(1).max(100))
    .min(1)
    .max(MAX_PRO_CLIPS, `at most ${MAX_PRO_CLIPS} clips`)
    // A clip listed twice adds no voice, only work: refused rather than measured twice.
    .refine((ids) => new Set(ids).size === ids.length, 'each blob id at most once'),
  transcript: Transcript.optional(),
  model_id: z.string().min(1).max(200).optional(),
  profile_version: ProfileVersion.default('1'),
  description: z.string().trim().max(1000).optional(),
  tags: VoiceTags.optional(),
});

export const Localize = z.strictObject({
  language: VoiceLanguage,
  name: VoiceName.optional(),
  model_id: z.string().min(1).max(200).optional(),
  profile_version: ProfileVersion.default('1'),
});

export const EngineCatalogueQuery = z.strictObject({ model: z.string().min(1).max(200) });

export const PreviewQuery = z.strictObject({ model_id: z.string().min(1).max(200).optional() });

export const PrepareProfile = z.strictObject({ model_id: z.string().min(1).max(200), profile_version: ProfileVersion.optional() });

export async function registerVoiceRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const { prisma } = ctx.db;
  const deps = voiceDeps(ctx, null);
  // A voice made with a model only with a model the request's key may use.
  const depsFor = (request: FastifyRequest) => voiceDeps(ctx, request.auth);
  // Voice routes need a positive balance like every keyed route the spec lists 402 for; they
  // are not charged (cloning and profiles are free; synthesis with the voice is billed).
  const keyed = { config: { metered: true } };
  await acceptMultipart(app, MAX_BLOB_BYTES);

  app.get('/voices', keyed, async (request) => {
    if (isCartesiaClient(request.headers)) return listVoicesForCartesia(prisma, request.auth.orgId, request.query);
    const query = parseInput(ListVoicesQuery, request.query, { body: false });
    return listVoices(prisma, request.auth.orgId, query);
  });

  // The voices a TTS model's engine lists (Cartesia, ElevenLabs, Deepgram Aura), for the
  // dashboard's import (server/api/routers/models.ts): making them platform voices is an
  // operator's decision, taken there or by `svc voices import`. Not metered: it costs the org nothing.
  app.get('/voices/engine-catalogue', async (request, reply) => {
    const { model } = parseInput(EngineCatalogueQuery, request.query, { body: false });
    const voices = await listEngineVoices(prisma, ctx.config.engines, model, { signal: onClientGone(reply) });
    return { model, voices };
  });

  app.get('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return getVoice(prisma, request.auth.orgId, id);
  });

  // A voice's preview (docs/voices.md, "Previews"): made once by a preview worker, served from
  // storage. Not metered: free, and heard at any balance, $0 included.
  app.get('/voices/:id/preview', async (request, reply) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    const { model_id: modelId } = parseInput(PreviewQuery, request.query, { body: false });
    const preview = await getVoicePreview(prisma, ctx.config.dataDir, request.auth.orgId, id, modelId);
    return reply
      .header('content-type', preview.contentType)
      .header('cache-control', 'private, no-cache')
      .header('x-svc-preview-model', preview.modelId)
      .send(preview.bytes);
  });

  app.patch('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    // Ownership first: a platform voice is 403 whatever the body says.
    await getOwnedVoiceOrThrow(prisma, request.auth.orgId, id);
    const updated = await updateVoice(prisma, request.auth.orgId, id, parseInput(UpdateVoiceInput, request.body));
    // A new language is a new preview.
    ctx.previews?.notify();
    return updated;
  });

  app.delete('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return deleteVoice(prisma, request.auth.orgId, id, deps.jobQueued);
  });

  app.post('/voices/:id/save', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return setVoiceSaved(prisma, request.auth.orgId, id, true);
  });

  app.delete('/voices/:id/save', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return setVoiceSaved(prisma, request.auth.orgId, id, false);
  });

  // Instant clone: 201 with the voice when an engine that can clone is online, else 202 + job.
  app.post('/voices/clone', { ...keyed, bodyLimit: MAX_BLOB_BYTES + 1024 * 1024 }, async (request, reply) => {
    const orgId = request.auth.orgId;
    let input: z.output<typeof CloneFields>;
    let clip: MeasuredClip;
    let blobId: string | null = null;
    if (request.isMultipart()) {
      const upload = await readUpload(request, {
        fileField: 'file',
        sizeLabel: '25 MB',
        fieldNames: 'file, name, language, mode, transcript, model_id and profile_version',
      });
      input = parseInput(CloneFields, { ...upload.fields, ...(upload.fields.tags !== undefined ? { tags: upload.fields.tags.split(',') } : {}) });
      if (!upload.file) throw new ServiceError('invalid_request', "Missing the clip: send it in the multipart field 'file'.", 'file');
      clip = decodeClip(upload.file, parseSampleRateParam(input.sample_rate, null));
    } else {
      const json = parseInput(CloneJson, request.body);
      input = json;
      const blob = await getBlobOrThrow(prisma, orgId, json.blob_id);
      clip = decodeClip(await readBlobBytes(ctx.config.dataDir, blob), undefined);
      blobId = blob.id;
    }
    const cloned = await cloneVoice(
      depsFor(request),
      {
        orgId,
        name: input.name,
        language: input.language,
        mode: input.mode,
        transcript: input.transcript ?? null,
        description: input.description,
        tags: input.tags,
        modelId: input.model_id,
        profileVersion: input.profile_version,
        clip,
        blobId,
        clipParam: blobId === null ? 'file' : 'blob_id',
      },
      onClientGone(reply),
    );
    return cloned.status === 'created' ? reply.code(201).send(cloned.voice) : reply.code(202).send(cloned.job);
  });

  // Professional clone: several uploaded clips, always a job.
  app.post('/voices/pro-clone', keyed, async (request, reply) => {
    const input = parseInput(ProClone, request.body);
    const queued = await proCloneVoice(depsFor(request), {
      orgId: request.auth.orgId,
      name: input.name,
      language: input.language,
      blobIds: input.blob_ids,
      transcript: input.transcript ?? null,
      description: input.description,
      tags: input.tags,
      modelId: input.model_id,
      profileVersion: input.profile_version,
    });
    return reply.code(202).send(queued);
  });

  // Localize: a new voice of the org that keeps the parent's character in another language.
  app.post('/voices/:id/localize', keyed, async (request, reply) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    const input = parseInput(Localize, request.body);
    const queued = await localizeVoice(depsFor(request), {
      orgId: request.auth.orgId,
      voiceId: id,
      language: input.language,
      name: input.name,
      modelId: input.model_id,
      profileVersion: input.profile_version,
    });
    return reply.code(202).send(queued);
  });

  // Prepare a voice for a model: 200 with a ready cached profile, else 202 + job.
  app.post('/voices/:id/profiles', keyed, async (request, reply) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    const input = parseInput(PrepareProfile, request.body);
    const prepared = await prepareVoiceProfile(depsFor(request), {
      orgId: request.auth.orgId,
      voiceId: id,
      modelId: input.model_id,
      profileVersion: input.profile_version,
    });
    return prepared.status === 'ready' ? prepared : reply.code(202).send(prepared);
  });
}
