// The gateway's side of the voice operations (server/services/voices): which models can make
// voices, decoding clips, and the engines that clone and speak. The routes and the job worker
// hand these to the services as VoiceDeps; nothing here touches the database.
import type { ModelEntry, ModelScope, UpstreamEntry } from '../registry/model-registry.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { checkModelAllowed } from '../../server/services/keys/key-budget.ts';
import type { ReadyProfile, VoiceDeps, VoiceEngines } from '../../server/services/voices/voice-deps.ts';
import { toFloat32 } from '../audio/pcm.ts';
import type { GatewayContext } from '../context.ts';
import { backgroundCall, clientErrorFor, tryUpstreams } from '../core/try-upstreams.ts';
import { decodeClip, joinClips, type MeasuredClip } from './voice-clip.ts';

/** Upstreams of the model whose engine can make voices, healthy first; none = not clone-capable. */
function cloneUpstreams(ctx: GatewayContext, model: ModelEntry): UpstreamEntry[] {
  return model.upstreams.filter((u) => ctx.protocols.get(u.protocol)?.clone);
}

function requireCloneCapable(ctx: GatewayContext, model: ModelEntry): void {
  if (cloneUpstreams(ctx, model).length === 0) {
    throw new ServiceError('invalid_request', `The model '${model.id}' cannot make voices from audio: none of its engines supports cloning.`, 'model_id');
  }
}

/** Cloning with the model goes outside this process (an engine that may bill, and keeps the voice in its account). */
function clonesBill(ctx: GatewayContext, model: ModelEntry): boolean {
  return cloneUpstreams(ctx, model).some((u) => !u.url.startsWith('local:'));
}

/**
 * An engine's copy of a voice cloned with the model, deleted at each of the model's upstreams
 * whose protocol can (one that does not have it answers as if it had deleted it); false when
 * none can, or the model is gone. A failure is the engine's error in the envelope (a job retries
 * the ones that pass: an engine unreachable or offline).
 */
async function deleteEngineCopy(ctx: GatewayContext, modelId: string, upstreamId: string, signal: AbortSignal): Promise<boolean> {
  const model = ctx.registry.all().find((m) => m.id === modelId);
  const deleting = model?.upstreams.filter((u) => ctx.protocols.get(u.protocol)?.clone?.deleteVoice) ?? [];
  for (const upstream of deleting) {
    const call = backgroundCall(ctx, signal);
    try {
      await ctx.protocols.get(upstream.protocol)!.clone!.deleteVoice!(upstream, upstreamId, call);
    } catch (e) {
      throw clientErrorFor(e, call);
    }
  }
  return deleting.length > 0;
}

/** Online = a clone-capable upstream that is not known to be down. */
function canCloneNow(ctx: GatewayContext, model: ModelEntry): boolean {
  const healthy = new Set(ctx.registry.healthyUpstreams(model).map((u) => u.id));
  return model.status === 'active' && cloneUpstreams(ctx, model).some((u) => healthy.has(u.id));
}

/** The TTS model to clone for when the caller names none: the first clone-capable one the key may use, online first. */
function defaultCloneModel(ctx: GatewayContext, scope: ModelScope | null): ModelEntry {
  const capable = ctx.registry
    .all()
    .filter((m) => m.modality === 'tts' && m.status === 'active' && cloneUpstreams(ctx, m).length > 0)
    .sort((a, b) => Number(canCloneNow(ctx, b)) - Number(canCloneNow(ctx, a)) || a.id.localeCompare(b.id));
  const allowed = scope?.allowedModels ?? null;
  const model = capable.find((m) => allowed === null || allowed.has(m.id));
  if (!model && capable[0]) checkModelAllowed(allowed, capable[0].id, 'model_id');
  if (!model) throw new ServiceError('model_not_found', 'No TTS model here can clone voices; name one with model_id.', 'model_id');
  return model;
}

/** The voice speaking `text` through one of its ready profiles (the first whose model is online). */
async function speakWithProfiles(
  ctx: GatewayContext,
  profiles: ReadyProfile[],
  text: string,
  language: string,
  signal: AbortSignal,
): Promise<MeasuredClip | null> {
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

/** `scope`: the key of the request the voice is made for (its model list); null in the job worker (the request was checked). */
export function voiceEngines(ctx: GatewayContext, scope: ModelScope | null): VoiceEngines {
  const tts = (modelId: string) => ctx.registry.resolve(modelId, 'tts', scope);
  return {
    chooseCloneModel(modelId) {
      if (modelId === undefined) return defaultCloneModel(ctx, scope).id;
      const model = tts(modelId);
      requireCloneCapable(ctx, model);
      return model.id;
    },
    resolveModel: (modelId) => tts(modelId).id,
    requireCloneCapable: (modelId) => requireCloneCapable(ctx, tts(modelId)),
    canCloneNow: (modelId) => canCloneNow(ctx, tts(modelId)),
    decodeClip: (wav) => decodeClip(wav, undefined),
    joinClips: (clips) => joinClips(clips),
    // Runs the model's clone engine on the clip, retrying other upstreams on connection failure.
    prepare(modelId, clip, voice, mode, signal) {
      const model = tts(modelId);
      const call = backgroundCall(ctx, signal);
      const capable = { ...model, upstreams: cloneUpstreams(ctx, model) };
      return tryUpstreams(ctx, capable, call, (upstream) => {
        const engine = ctx.protocols.get(upstream.protocol)?.clone;
        if (!engine) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot clone voices.`);
        return engine.clone(upstream, { clip, name: voice.name, language: voice.language, transcript: voice.transcript, mode, ...call });
      });
    },
    speak: (profiles, text, language, signal) => speakWithProfiles(ctx, profiles, text, language, signal),
    clonesBill: (modelId) => clonesBill(ctx, tts(modelId)),
    deleteEngineCopy: (modelId, upstreamId, signal) => deleteEngineCopy(ctx, modelId, upstreamId, signal),
  };
}

/** What the voice services run with in this gateway, for a request of the key of `scope` (null: the job worker). */
export function voiceDeps(ctx: GatewayContext, scope: ModelScope | null): VoiceDeps {
  return {
    prisma: ctx.db.prisma,
    dataDir: ctx.config.dataDir,
    maxJobsPerOrg: ctx.config.jobs.maxPerOrg,
    voiceLimits: ctx.config.voiceLimits,
    // The worker starts after the routes are registered: looked up when a job is queued.
    jobQueued: () => ctx.jobs?.notify(),
    previewsWanted: () => ctx.previews?.notify(),
    engines: voiceEngines(ctx, scope),
  };
}
