// Voices of an engine's own catalogue made usable without cloning: imported as platform voices
// (every org sees them, none may change them), each with a ready profile for the model whose
// engine has it; or an existing voice mapped to an engine voice id. Re-importing updates what
// was imported before (matched by the model and the engine's voice id), never duplicates it.
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { voiceSearchFields } from './voice-search.ts';

/** One voice as the engine lists it (gateway/upstreams/contract.ts EngineVoice). */
export const CatalogueVoice = z.object({
  /** The engine's voice id (an imported voice's profile keeps it). */
  id: z.string(),
  name: z.string(),
  language: z.string(),
  gender: z.enum(['male', 'female', 'neutral']).nullable(),
  description: z.string(),
});
export type CatalogueVoice = z.infer<typeof CatalogueVoice>;

/** A model's engine catalogue, as GET /voices/engine-catalogue answers it and the dashboard's import reads it. */
export const EngineCatalogue = z.object({ model: z.string(), voices: z.array(CatalogueVoice) });
export type EngineCatalogue = z.infer<typeof EngineCatalogue>;

/**
 * The upstream protocols whose engines list their voices (the gateway's `voice_catalogue`
 * capability, gateway/upstreams/protocols/): the dashboard offers the import only for models
 * with one of them. Named here because the dashboard cannot load the gateway's protocol
 * modules; gateway/voices/engine-catalogue.unit.test.ts keeps the two lists equal.
 */
export const VOICE_CATALOGUE_PROTOCOLS: readonly string[] = ['cartesia', 'deepgram', 'elevenlabs'];

const MAX_IMPORT = 5_000;

export async function importEngineVoices(prisma: Prisma, input: { modelId: string; voices: CatalogueVoice[] }): Promise<{ created: number; updated: number }> {
  const model = await prisma.model.findUnique({ where: { id: input.modelId }, select: { modality: true } });
  if (!model) throw new ServiceError('model_not_found', `The model '${input.modelId}' does not exist.`);
  if (model.modality !== 'tts') throw new ServiceError('invalid_request', `Voices belong to TTS models; '${input.modelId}' is ${model.modality}.`, 'model');
  if (input.voices.length > MAX_IMPORT) throw new ServiceError('invalid_request', `At most ${MAX_IMPORT} voices are imported at once.`, 'voices');
  const existing = await prisma.voiceProfile.findMany({
    where: { modelId: input.modelId, voice: { orgId: null } },
    select: { voiceId: true, upstreamId: true },
  });
  const voiceOf = new Map(existing.map((p) => [p.upstreamId, p.voiceId]));
  let created = 0;
  let updated = 0;
  for (const v of input.voices) {
    const language = (v.language || 'en').slice(0, 35);
    const tags = ['imported', input.modelId];
    const data = {
      name: v.name.slice(0, 200) || v.id,
      description: v.description.slice(0, 1000),
      language,
      gender: v.gender ?? '',
      tags,
      modelFamily: input.modelId,
      sourceMetadata: { imported_from: input.modelId, upstream_voice_id: v.id },
      ...voiceSearchFields({ name: v.name, description: v.description, tags }),
    };
    const voiceId = voiceOf.get(v.id);
    if (voiceId) {
      await prisma.voice.update({ where: { id: voiceId }, data });
      updated++;
      continue;
    }
    const id = newId('voice');
    await prisma.$transaction([
      prisma.voice.create({ data: { id, orgId: null, kind: 'library', ...data } }),
      prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: id, modelId: input.modelId, upstreamId: v.id, status: 'ready' } }),
    ]);
    voiceOf.set(v.id, id);
    created++;
  }
  return { created, updated };
}

/** Makes a voice speak through a model's engine as that engine's voice `upstreamId` (a ready profile). */
export async function mapVoiceToEngine(prisma: Prisma, input: { voiceId: string; modelId: string; upstreamId: string; upstreamUrl?: string }): Promise<void> {
  if (!input.upstreamId || input.upstreamId.length > 512)
    throw new ServiceError('invalid_request', 'The engine voice id must be 1-512 characters.', 'upstream_id');
  if (input.upstreamUrl !== undefined && (!input.upstreamUrl || input.upstreamUrl.length > 2048))
    throw new ServiceError('invalid_request', 'The upstream URL must be 1-2048 characters.', 'upstream');
  const [voice, model] = await Promise.all([
    prisma.voice.findUnique({ where: { id: input.voiceId }, select: { id: true } }),
    prisma.model.findUnique({ where: { id: input.modelId }, select: { modality: true, upstreams: { select: { url: true } } } }),
  ]);
  if (!voice) throw new ServiceError('voice_not_found', `The voice '${input.voiceId}' does not exist.`);
  if (!model) throw new ServiceError('model_not_found', `The model '${input.modelId}' does not exist.`);
  if (model.modality !== 'tts') throw new ServiceError('invalid_request', `Voices belong to TTS models; '${input.modelId}' is ${model.modality}.`, 'model');
  if (input.upstreamUrl !== undefined) return mapOnUpstream(prisma, { ...input, upstreamUrl: input.upstreamUrl }, model.upstreams);
  // Replaced whole: parameters of a previous profile (a clone's latents) belong to another engine voice.
  await prisma.$transaction([
    prisma.voiceProfile.deleteMany({ where: { voiceId: input.voiceId, modelId: input.modelId } }),
    prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: input.voiceId, modelId: input.modelId, upstreamId: input.upstreamId, status: 'ready' } }),
  ]);
}

/**
 * The voice's id on one upstream of the model (TTS failover speaks the same voice on each engine,
 * gateway/tts/tts-failover.ts): kept in the profile's params under `upstream_voices`, by URL. Once
 * a voice has them, an upstream it has no id for is skipped for it.
 */
async function mapOnUpstream(
  prisma: Prisma,
  input: { voiceId: string; modelId: string; upstreamId: string; upstreamUrl: string },
  upstreams: { url: string }[],
): Promise<void> {
  if (!upstreams.some((u) => u.url === input.upstreamUrl)) {
    throw new ServiceError('invalid_request', `The model '${input.modelId}' has no upstream at ${input.upstreamUrl}.`, 'upstream');
  }
  const where = { voiceId_modelId: { voiceId: input.voiceId, modelId: input.modelId } };
  const existing = await prisma.voiceProfile.findUnique({ where });
  const params = (existing?.params && typeof existing.params === 'object' ? existing.params : {}) as Record<string, unknown>;
  const copies = { ...((params.upstream_voices as Record<string, string> | undefined) ?? {}), [input.upstreamUrl]: input.upstreamId };
  const data = { params: { ...params, upstream_voices: copies } };
  if (existing) await prisma.voiceProfile.update({ where, data });
  else
    await prisma.voiceProfile.create({
      data: { id: newId('vpr'), voiceId: input.voiceId, modelId: input.modelId, upstreamId: input.upstreamId, status: 'ready', ...data },
    });
}
