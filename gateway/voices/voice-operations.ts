// Cloning, localizing and profile preparation: the work shared by the synchronous routes
// (201/200 when an engine that can do it is online) and the job worker (202 otherwise).
import type { Prisma } from '../../server/db/database.js';
import { newId } from '../../server/db/ids.js';
import { getBlobOrThrow, readBlobBytes, storeBlob } from '../../server/services/blobs/blob-store.js';
import { ServiceError } from '../../server/services/errors.js';
import { admitJob, enqueueJob, type ApiJobKind, type Job, type Tx } from '../../server/services/jobs/job-queue.js';
import { presentProfile, type VoiceProfileRecord } from '../../server/services/voices/present-voice.js';
import { voiceSearchFields } from '../../server/services/voices/voice-search.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.js';
import type { PreparedVoice } from '../upstreams/contract.js';
import { backgroundCall, tryUpstreams } from '../upstreams/try-upstreams.js';
import { toFloat32 } from '../audio/pcm.js';
import { decodeClip, joinClips, type MeasuredClip } from './voice-clip.js';

export type CloneMode = 'stability' | 'similarity';

/** Read by the worker: what a job needs besides its voice. */
export interface VoiceJobPayload {
  modelId: string;
  mode: CloneMode;
  profileVersion: string;
  apiKind?: ApiJobKind;
  /** Pro clones: every clip; otherwise the voice's source clip is used. */
  blobIds?: string[];
  /** Voices without a clip (localized from a platform voice): this voice speaks a sample. */
  sampleFromVoiceId?: string;
}

/** Upstreams of the model whose engine can make voices, healthy first; none = not clone-capable. */
function cloneUpstreams(ctx: GatewayContext, model: ModelEntry): UpstreamEntry[] {
  return model.upstreams.filter((u) => ctx.protocols.get(u.protocol)?.clone);
}

export function requireCloneCapable(ctx: GatewayContext, model: ModelEntry, param = 'model_id'): void {
  if (cloneUpstreams(ctx, model).length === 0) {
    throw new ServiceError('invalid_request', `The model '${model.id}' cannot make voices from audio: none of its engines supports cloning.`, param);
  }
}

/** Online = a clone-capable upstream that is not known to be down. */
export function canCloneNow(ctx: GatewayContext, model: ModelEntry): boolean {
  const healthy = new Set(ctx.registry.healthyUpstreams(model).map((u) => u.id));
  return model.status === 'active' && cloneUpstreams(ctx, model).some((u) => healthy.has(u.id));
}

/** The TTS model to clone for when the caller names none: the first clone-capable one, online first. */
export function defaultCloneModel(ctx: GatewayContext): ModelEntry {
  const capable = ctx.registry
    .all()
    .filter((m) => m.modality === 'tts' && m.status === 'active' && cloneUpstreams(ctx, m).length > 0)
    .sort((a, b) => Number(canCloneNow(ctx, b)) - Number(canCloneNow(ctx, a)) || a.id.localeCompare(b.id));
  const model = capable[0];
  if (!model) throw new ServiceError('model_not_found', 'No TTS model here can clone voices; name one with model_id.', 'model_id');
  return model;
}

/** Runs the model's clone engine on the clip, retrying other upstreams on connection failure. */
export async function prepareWithEngine(
  ctx: GatewayContext,
  model: ModelEntry,
  clip: MeasuredClip,
  voice: { name: string; language: string; transcript: string | null },
  mode: CloneMode,
  signal: AbortSignal,
): Promise<PreparedVoice> {
  const call = backgroundCall(ctx, signal);
  const capable = { ...model, upstreams: cloneUpstreams(ctx, model) };
  return tryUpstreams(ctx, capable, call, (upstream) =>
    ctx.protocols.get(upstream.protocol)!.clone!.clone(upstream, { clip, name: voice.name, language: voice.language, transcript: voice.transcript, mode, ...call }),
  );
}

/** Stores a prepared profile as the voice's ready profile for the model (replacing any other). */
export async function saveProfile(
  prisma: Prisma,
  voiceId: string,
  model: ModelEntry,
  prepared: PreparedVoice,
  versions: { profileVersion: string; sourceVersion: string },
): Promise<VoiceProfileRecord> {
  const data = {
    upstreamId: prepared.upstreamId,
    params: (prepared.params ?? undefined) as object | undefined,
    status: 'ready' as const,
    error: null,
    profileVersion: versions.profileVersion,
    sourceVersion: versions.sourceVersion,
    cachedAt: new Date(),
    expiresAt: prepared.expiresAt,
  };
  const row = await prisma.voiceProfile.upsert({
    where: { voiceId_modelId: { voiceId, modelId: model.id } },
    create: { id: newId('vpr'), voiceId, modelId: model.id, ...data },
    update: data,
  });
  return presentProfile(row);
}

/** What the engine measured fills what the caller left empty (gender, description). */
async function applyMeasurements(prisma: Prisma, voiceId: string, prepared: PreparedVoice): Promise<void> {
  const voice = await prisma.voice.findUniqueOrThrow({ where: { id: voiceId } });
  const description = voice.description || prepared.description || '';
  const gender = voice.gender || prepared.gender || '';
  const metadata = { ...((voice.sourceMetadata as Record<string, unknown> | null) ?? {}), ...prepared.metadata };
  await prisma.voice.update({
    where: { id: voiceId },
    data: { description, gender, sourceMetadata: metadata as object, ...voiceSearchFields({ name: voice.name, description, tags: voice.tags as string[] }) },
  });
}

/** The audio a voice is made from: its source clip, or (voices without one) a sample it speaks. */
async function sourceClip(ctx: GatewayContext, voice: { id: string; orgId: string | null; sourceAudioBlobId: string | null; language: string }, payload: VoiceJobPayload, signal: AbortSignal): Promise<MeasuredClip> {
  const { prisma } = ctx.db;
  // Each clip once: a voice made before duplicates were refused may list one several times.
  const blobIds = [...new Set(payload.blobIds ?? (voice.sourceAudioBlobId ? [voice.sourceAudioBlobId] : []))];
  if (blobIds.length > 0 && voice.orgId) {
    const clips: MeasuredClip[] = [];
    // One clip at a time (each at most 25 MB), reading the next between them.
    for (const blobId of blobIds) {
      const blob = await getBlobOrThrow(prisma, voice.orgId, blobId).catch(() => {
        throw new ServiceError('conflict', `The voice's source clip (blob '${blobId}') was deleted; clone the voice again from a clip.`, 'voice_id');
      });
      clips.push(decodeClip(await readBlobBytes(ctx.config.dataDir, blob), undefined));
    }
    return clips.length === 1 ? clips[0]! : joinClips(clips);
  }
  return speakSample(ctx, payload.sampleFromVoiceId ?? voice.id, voice.language, signal);
}

const SAMPLE_TEXT =
  'The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore, and the shells she sells are surely sea shells. ' +
  'A voice agent answers the phone, listens carefully, and replies in a calm and friendly way.';

type ProfileRow = { modelId: string; upstreamId: string; params: unknown };

/** The voice speaking `text` through one of its ready profiles (the first whose model is online). */
async function speakWithProfiles(ctx: GatewayContext, profiles: ProfileRow[], text: string, language: string, signal: AbortSignal): Promise<MeasuredClip | null> {
  for (const profile of profiles) {
    const model = ctx.registry.all().find((m) => m.id === profile.modelId);
    if (!model || !ctx.registry.isServing(model)) continue;
    const call = backgroundCall(ctx, signal);
    const pcm = await tryUpstreams(ctx, model, call, async (upstream) => {
      const speech = ctx.protocols.get(upstream.protocol)?.speech;
      if (!speech) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot synthesize speech.`);
      const stream = await speech.synthesize(upstream, {
        text,
        voice: { upstreamId: profile.upstreamId, params: (profile.params as Record<string, unknown> | null) ?? null },
        language,
        speed: 1,
        ...call,
      });
      const parts: Float32Array[] = [];
      for await (const chunk of stream.chunks) parts.push(toFloat32(chunk));
      return { sampleRate: stream.sampleRate, parts };
    });
    // joinClips measures the joined audio and encodes it as WAV.
    return joinClips(pcm.parts.map((samples) => ({ samples, sampleRate: pcm.sampleRate, durationMs: 0, wav: Buffer.alloc(0) })));
  }
  return null;
}

/** About fifteen seconds of the voice, from any ready profile it has (platform voices). */
async function speakSample(ctx: GatewayContext, voiceId: string, language: string, signal: AbortSignal): Promise<MeasuredClip> {
  const profiles = await ctx.db.prisma.voiceProfile.findMany({ where: { voiceId, status: 'ready' } });
  const clip = await speakWithProfiles(ctx, profiles, SAMPLE_TEXT, language, signal);
  if (!clip) throw new ServiceError('model_offline', `Voice '${voiceId}' has no source clip and none of its engines is online to speak a sample.`);
  return clip;
}

/**
 * The greeting every new voice speaks for its sample: fixed, never built from what the client
 * sent (a voice's name in it would make `name` + GET /blobs/{sample}/content free TTS).
 */
export const GREETING_TEXT = 'Hello! Thank you for calling. How can I help you today?';

/**
 * A new voice's `sample_blob_id`: a short greeting in the voice, stored as a blob of its org so
 * that people can hear it before using it. Best effort: a voice without a sample works the same.
 */
export async function storeVoiceSample(ctx: GatewayContext, voiceId: string, signal: AbortSignal): Promise<void> {
  const { prisma } = ctx.db;
  try {
    const voice = await prisma.voice.findUniqueOrThrow({ where: { id: voiceId }, include: { profiles: { where: { status: 'ready' } } } });
    if (!voice.orgId || voice.sampleBlobId) return;
    const clip = await speakWithProfiles(ctx, voice.profiles, GREETING_TEXT, voice.language, signal);
    if (!clip) return;
    const blob = await storeBlob(prisma, ctx.config.dataDir, { orgId: voice.orgId, contentType: 'audio/wav', bytes: clip.wav, durationMs: clip.durationMs });
    await prisma.voice.update({ where: { id: voiceId }, data: { sampleBlobId: blob.id } });
  } catch {
    // over the storage quota, engine busy or gone: the voice simply has no sample
  }
}

/** The worker's side of every voice job: prepare the profile, fill in measurements, report. */
export async function runVoiceJob(ctx: GatewayContext, job: Job, signal: AbortSignal): Promise<{ voice_id: string; profile: VoiceProfileRecord }> {
  const { prisma } = ctx.db;
  const payload = job.input as unknown as VoiceJobPayload;
  if (!job.voiceId) throw new ServiceError('internal_error', 'A voice job without a voice.');
  const voice = await prisma.voice.findFirst({ where: { id: job.voiceId, deletedAt: null } });
  if (!voice) throw new ServiceError('voice_not_found', 'The voice was deleted before the job ran.');
  const model = ctx.registry.resolve(payload.modelId, 'tts');
  const clip = await sourceClip(ctx, voice, payload, signal);
  const prepared = await prepareWithEngine(ctx, model, clip, { name: voice.name, language: voice.language, transcript: voice.sourceTranscript }, payload.mode, signal);
  const profile = await saveProfile(prisma, voice.id, model, prepared, { profileVersion: payload.profileVersion, sourceVersion: voice.sourceVersion });
  if (job.kind !== 'prepare_profile') {
    await applyMeasurements(prisma, voice.id, prepared);
    await storeVoiceSample(ctx, voice.id, signal);
  }
  return { voice_id: voice.id, profile };
}

export interface NewVoice {
  orgId: string;
  name: string;
  language: string;
  kind: 'instant_clone' | 'pro_clone' | 'localized';
  parentVoiceId?: string;
  sourceAudioBlobId: string | null;
  sourceTranscript: string | null;
  sourceMetadata: Record<string, unknown>;
  sourceVersion: string;
  description?: string;
  gender?: string;
  tags?: string[];
  modelId: string;
}

export async function createVoiceRow(prisma: Prisma | Tx, v: NewVoice): Promise<string> {
  const id = newId('voice');
  const tags = v.tags ?? [];
  await prisma.voice.create({
    data: {
      id,
      orgId: v.orgId,
      name: v.name,
      description: v.description ?? '',
      language: v.language,
      gender: v.gender ?? '',
      tags,
      kind: v.kind,
      parentVoiceId: v.parentVoiceId ?? null,
      sourceAudioBlobId: v.sourceAudioBlobId,
      sourceTranscript: v.sourceTranscript,
      sourceMetadata: v.sourceMetadata as object,
      sourceVersion: v.sourceVersion,
      modelFamily: v.modelId,
      ...voiceSearchFields({ name: v.name, description: v.description ?? '', tags }),
    },
  });
  return id;
}

/**
 * Queues the preparation of a voice for `model`: a queued profile row and a job (202). `voice`
 * is an existing voice's id, or a new voice to create with the job. Refused with 429 when the
 * org has SVC_MAX_JOBS_PER_ORG jobs in flight; one transaction, so a refusal leaves nothing.
 */
export async function queueVoiceJob(
  ctx: GatewayContext,
  input: { orgId: string; voice: string | NewVoice; kind: Job['kind']; model: ModelEntry; payload: VoiceJobPayload },
): Promise<{ job_id: string; voice_id: string; status: 'queued' }> {
  const queued = await ctx.db.prisma.$transaction(async (tx) => {
    await admitJob(tx, input.orgId, ctx.config.jobs.maxPerOrg);
    const voiceId = typeof input.voice === 'string' ? input.voice : await createVoiceRow(tx, input.voice);
    const where = { voiceId_modelId: { voiceId, modelId: input.model.id } };
    const existing = await tx.voiceProfile.findUnique({ where });
    // A ready, unexpired profile keeps serving until the new one replaces it.
    if (!existing || !isUsable(existing)) {
      await tx.voiceProfile.upsert({
        where,
        create: { id: newId('vpr'), voiceId, modelId: input.model.id, upstreamId: '', status: 'queued', profileVersion: input.payload.profileVersion },
        update: { status: 'queued', error: null },
      });
    }
    const job = await enqueueJob(tx, { orgId: input.orgId, kind: input.kind, voiceId, payload: input.payload as unknown as Record<string, unknown> });
    return { job_id: job.id, voice_id: voiceId, status: 'queued' as const };
  });
  ctx.jobs?.notify();
  return queued;
}

export function isUsable(profile: { status: string; expiresAt: Date | null }, now = Date.now()): boolean {
  return profile.status === 'ready' && (profile.expiresAt === null || profile.expiresAt.getTime() > now);
}
