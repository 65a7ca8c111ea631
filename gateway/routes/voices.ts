// The voice library: GET /voices, get/rename/retag/delete a voice, save/unsave, instant clone
// (multipart or JSON with a blob), professional clone and localization (jobs), and profile
// preparation for another model. Routes parse and call services; voice work is in
// gateway/voices/voice-operations.ts, shared with the job worker.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { deleteBlob, getBlobOrThrow, MAX_BLOB_BYTES, readBlobBytes, storeBlob } from '../../server/services/blobs/blob-store.js';
import { ServiceError } from '../../server/services/errors.js';
import { parseInput } from '../../server/services/parse-input.js';
import { deleteVoice } from '../../server/services/voices/delete-voice.js';
import { getOwnedVoiceOrThrow, getVisibleVoiceOrThrow, getVoice } from '../../server/services/voices/get-voice.js';
import { ListVoicesQuery, listVoices } from '../../server/services/voices/list-voices.js';
import { presentProfile } from '../../server/services/voices/present-voice.js';
import { setVoiceSaved } from '../../server/services/voices/save-voice.js';
import { UpdateVoiceInput, updateVoice, VoiceLanguage, VoiceName, VoiceTags } from '../../server/services/voices/update-voice.js';
import type { GatewayContext } from '../context.js';
import { acceptMultipart, readUpload } from '../multipart-upload.js';
import { parseSampleRateParam } from '../stt/decode-upload.js';
import { decodeClip, MAX_PRO_CLIP_SECONDS, MAX_PRO_CLIPS, MIN_CLIP_SECONDS, MIN_PRO_CLIP_SECONDS, requireClipLength, type MeasuredClip } from '../voices/voice-clip.js';
import {
  canCloneNow,
  createVoiceRow,
  defaultCloneModel,
  isUsable,
  prepareWithEngine,
  queueVoiceJob,
  requireCloneCapable,
  saveProfile,
  storeVoiceSample,
  type NewVoice,
  type VoiceJobPayload,
} from '../voices/voice-operations.js';
import type { ModelEntry } from '../registry/model-registry.js';
import { onClientGone } from '../client-gone.js';

const VoiceIdParams = z.object({ id: z.string().min(1).max(100) });
const Mode = z.enum(['stability', 'similarity']);
const ProfileVersion = z.string().trim().min(1).max(64);
const Transcript = z.string().max(20_000, 'at most 20000 characters');

/** Clone fields, the same for the multipart form and the JSON body. */
const CloneFields = z.strictObject({
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
const CloneJson = CloneFields.omit({ sample_rate: true }).extend({ blob_id: z.string().min(1).max(100) });

const ProClone = z.strictObject({
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

const Localize = z.strictObject({
  language: VoiceLanguage,
  name: VoiceName.optional(),
  model_id: z.string().min(1).max(200).optional(),
  profile_version: ProfileVersion.default('1'),
});

const PrepareProfile = z.strictObject({ model_id: z.string().min(1).max(200), profile_version: ProfileVersion.optional() });

function cloneModel(ctx: GatewayContext, modelId: string | undefined): ModelEntry {
  if (modelId === undefined) return defaultCloneModel(ctx);
  const model = ctx.registry.resolve(modelId, 'tts');
  requireCloneCapable(ctx, model);
  return model;
}

const sourceVersionOf = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex').slice(0, 16);

export async function registerVoiceRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const { prisma } = ctx.db;
  // Voice routes need a positive balance like every keyed route the spec lists 402 for; they
  // are not charged (cloning and profiles are free; synthesis with the voice is billed).
  const keyed = { config: { metered: true } };
  await acceptMultipart(app, MAX_BLOB_BYTES);

  app.get('/voices', keyed, async (request) => {
    const query = parseInput(ListVoicesQuery, request.query, { body: false });
    return listVoices(prisma, request.auth.orgId, query);
  });

  app.get('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return getVoice(prisma, request.auth.orgId, id);
  });

  app.patch('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    // Ownership first: a platform voice is 403 whatever the body says.
    await getOwnedVoiceOrThrow(prisma, request.auth.orgId, id);
    return updateVoice(prisma, request.auth.orgId, id, parseInput(UpdateVoiceInput, request.body));
  });

  app.delete('/voices/:id', keyed, async (request) => {
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    return deleteVoice(prisma, request.auth.orgId, id);
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
    let blobId: string;
    let storedBlobId: string | null = null;
    let model: ModelEntry;
    if (request.isMultipart()) {
      const upload = await readUpload(request, { fileField: 'file', sizeLabel: '25 MB', fieldNames: 'file, name, language, mode, transcript, model_id and profile_version' });
      input = parseInput(CloneFields, { ...upload.fields, ...(upload.fields.tags !== undefined ? { tags: upload.fields.tags.split(',') } : {}) });
      if (!upload.file) throw new ServiceError('invalid_request', "Missing the clip: send it in the multipart field 'file'.", 'file');
      clip = decodeClip(upload.file, parseSampleRateParam(input.sample_rate, null));
      requireClipLength(clip, MIN_CLIP_SECONDS);
      model = cloneModel(ctx, input.model_id); // a bad model is refused before the clip is stored
      blobId = storedBlobId = (await storeBlob(prisma, ctx.config.dataDir, { orgId, contentType: 'audio/wav', bytes: clip.wav, durationMs: clip.durationMs })).id;
    } else {
      const json = parseInput(CloneJson, request.body);
      input = json;
      const blob = await getBlobOrThrow(prisma, orgId, json.blob_id);
      clip = decodeClip(await readBlobBytes(ctx.config.dataDir, blob), undefined);
      requireClipLength(clip, MIN_CLIP_SECONDS, 'blob_id');
      blobId = blob.id;
      model = cloneModel(ctx, input.model_id);
    }
    const sourceVersion = sourceVersionOf(clip.wav);
    const newVoice = {
      orgId,
      name: input.name,
      language: input.language,
      kind: 'instant_clone' as const,
      sourceAudioBlobId: blobId,
      sourceTranscript: input.transcript ?? null,
      sourceMetadata: { mode: input.mode, clip_seconds: clip.durationMs / 1000, clip_sample_rate: clip.sampleRate },
      sourceVersion,
      description: input.description,
      tags: input.tags,
      modelId: model.id,
    };
    const payload: VoiceJobPayload = { modelId: model.id, mode: input.mode, profileVersion: input.profile_version, apiKind: 'instant_clone' };

    // The clip uploaded with this request is a blob nobody knows of until a voice refers to it:
    // deleted again if the request fails before that.
    const dropUploadedClip = async (err: unknown) => {
      if (storedBlobId) await deleteBlob(prisma, ctx.config.dataDir, orgId, storedBlobId).catch(() => undefined);
      throw err;
    };
    if (canCloneNow(ctx, model)) {
      const clientGone = onClientGone(reply);
      const prepared = await prepareWithEngine(ctx, model, clip, { name: input.name, language: input.language, transcript: input.transcript ?? null }, input.mode, clientGone).catch(dropUploadedClip);
      const voiceId = await createVoiceRow(prisma, {
        ...newVoice,
        description: input.description || prepared.description,
        gender: prepared.gender,
        sourceMetadata: { ...newVoice.sourceMetadata, ...prepared.metadata },
      });
      await saveProfile(prisma, voiceId, model, prepared, { profileVersion: input.profile_version, sourceVersion });
      await storeVoiceSample(ctx, voiceId, clientGone);
      return reply.code(201).send(await getVoice(prisma, orgId, voiceId));
    }
    // Refused (too many jobs): the uploaded clip goes too.
    const queued = await queueVoiceJob(ctx, { orgId, voice: newVoice, kind: 'instant_clone', model, payload }).catch(dropUploadedClip);
    return reply.code(202).send(queued);
  });

  // Professional clone: several uploaded clips (30 s to 10 min in all, by their stored
  // durations: nothing is decoded here), always a job.
  app.post('/voices/pro-clone', keyed, async (request, reply) => {
    const orgId = request.auth.orgId;
    const input = parseInput(ProClone, request.body);
    const model = cloneModel(ctx, input.model_id);
    let totalMs = 0;
    const hash = createHash('sha256');
    for (const [i, blobId] of input.blob_ids.entries()) {
      const blob = await getBlobOrThrow(prisma, orgId, blobId).catch(() => {
        throw new ServiceError('blob_not_found', `No blob with id '${blobId}' in this organization.`, `blob_ids[${i}]`);
      });
      if (blob.durationMs === null) throw new ServiceError('unsupported_audio_format', `Blob '${blobId}' is not audio.`, `blob_ids[${i}]`);
      totalMs += blob.durationMs;
      hash.update(blob.sha256);
    }
    if (totalMs < MIN_PRO_CLIP_SECONDS * 1000) {
      throw new ServiceError('clip_too_short', `The clips hold ${(totalMs / 1000).toFixed(1)} s of audio; a professional clone needs at least ${MIN_PRO_CLIP_SECONDS} s.`, 'blob_ids');
    }
    if (totalMs > MAX_PRO_CLIP_SECONDS * 1000) {
      throw new ServiceError('invalid_request', `The clips hold ${(totalMs / 1000).toFixed(1)} s of audio; a professional clone takes at most ${MAX_PRO_CLIP_SECONDS / 60} minutes.`, 'blob_ids');
    }
    const voice: NewVoice = {
      orgId,
      name: input.name,
      language: input.language,
      kind: 'pro_clone',
      sourceAudioBlobId: input.blob_ids[0]!,
      sourceTranscript: input.transcript ?? null,
      sourceMetadata: { mode: 'similarity', clip_seconds: totalMs / 1000, blob_ids: input.blob_ids },
      sourceVersion: hash.digest('hex').slice(0, 16),
      description: input.description,
      tags: input.tags,
      modelId: model.id,
    };
    const payload: VoiceJobPayload = { modelId: model.id, mode: 'similarity', profileVersion: input.profile_version, apiKind: 'pro_clone', blobIds: input.blob_ids };
    return reply.code(202).send(await queueVoiceJob(ctx, { orgId, voice, kind: 'pro_clone', model, payload }));
  });

  // Localize: a new voice of the org that keeps the parent's character in another language.
  app.post('/voices/:id/localize', keyed, async (request, reply) => {
    const orgId = request.auth.orgId;
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    const input = parseInput(Localize, request.body);
    const parent = await getVisibleVoiceOrThrow(prisma, orgId, id);
    const model = cloneModel(ctx, input.model_id ?? (parent.modelFamily || undefined));
    const voice: NewVoice = {
      orgId,
      name: input.name ?? `${parent.name} (${input.language})`,
      language: input.language,
      kind: 'localized',
      parentVoiceId: parent.id,
      sourceAudioBlobId: parent.orgId ? parent.sourceAudioBlobId : null,
      sourceTranscript: null,
      sourceMetadata: { localized_from: parent.id, from_language: parent.language },
      sourceVersion: parent.sourceVersion,
      gender: parent.gender,
      tags: parent.tags as string[],
      modelId: model.id,
    };
    const payload: VoiceJobPayload = { modelId: model.id, mode: 'similarity', profileVersion: input.profile_version, apiKind: 'localize' };
    // A parent without a clip (a platform voice): the job has it speak a sample and measures that.
    if (!(parent.orgId && parent.sourceAudioBlobId)) payload.sampleFromVoiceId = parent.id;
    return reply.code(202).send(await queueVoiceJob(ctx, { orgId, voice, kind: 'localize', model, payload }));
  });

  // Prepare a voice for a model: 200 with a ready cached profile, else 202 + job.
  app.post('/voices/:id/profiles', keyed, async (request, reply) => {
    const orgId = request.auth.orgId;
    const { id } = parseInput(VoiceIdParams, request.params, { body: false });
    const input = parseInput(PrepareProfile, request.body);
    const voice = await getVisibleVoiceOrThrow(prisma, orgId, id);
    const model = ctx.registry.resolve(input.model_id, 'tts');
    const cached = await prisma.voiceProfile.findUnique({ where: { voiceId_modelId: { voiceId: voice.id, modelId: model.id } } });
    if (cached && isUsable(cached) && (input.profile_version === undefined || input.profile_version === cached.profileVersion)) {
      return { voice_id: voice.id, status: 'ready', profile: presentProfile(cached) };
    }
    if (voice.orgId === null) {
      throw new ServiceError('voice_read_only', `Voice '${voice.id}' is a platform voice: its profiles come with it and cannot be prepared for other models. Localize or clone it into your organization first.`, 'id');
    }
    requireCloneCapable(ctx, model);
    const kind = voice.kind === 'pro_clone' ? 'pro_clone' : voice.kind === 'localized' ? 'localize' : 'instant_clone';
    const mode = (voice.sourceMetadata as { mode?: 'stability' | 'similarity' } | null)?.mode ?? 'similarity';
    const blobIds = (voice.sourceMetadata as { blob_ids?: string[] } | null)?.blob_ids;
    const payload: VoiceJobPayload = { modelId: model.id, mode, profileVersion: input.profile_version ?? cached?.profileVersion ?? '1', apiKind: kind, ...(blobIds ? { blobIds } : {}) };
    return reply.code(202).send(await queueVoiceJob(ctx, { orgId, voice: voice.id, kind: 'prepare_profile', model, payload }));
  });
}
