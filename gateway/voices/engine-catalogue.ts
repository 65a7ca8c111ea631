// Reads a TTS model's engine voice catalogue (Cartesia GET /voices, ElevenLabs GET /v2/voices,
// Deepgram's Aura models) through the first of its upstreams whose protocol lists voices, for
// `svc voices import` (which imports it here) and GET /voices/engine-catalogue (the dashboard's
// Models page imports what that answers).
import type { Prisma } from '../../server/db/database.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { getModel } from '../../server/services/models/upsert-model.ts';
import { importEngineVoices, type CatalogueVoice } from '../../server/services/voices/engine-voices.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { offers, type EngineConfig, type UpstreamTarget } from '../upstreams/contract.ts';
import { asUpstreamError } from '../upstreams/engine-http.ts';
import { protocolNamed } from '../upstreams/protocols/index.ts';

/** `signal`: ends the listing early (the client left); `timeoutMs` bounds it. */
export async function listEngineVoices(
  prisma: Prisma,
  engines: EngineConfig,
  modelId: string,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<CatalogueVoice[]> {
  const { timeoutMs = 30_000 } = options;
  const model = await getModel(prisma, modelId);
  if (model.modality !== 'tts') throw new ServiceError('invalid_request', `Voices belong to TTS models; '${modelId}' is ${model.modality}.`, 'model');
  for (const u of model.upstreams) {
    const protocol = protocolNamed(u.protocol);
    if (!protocol || !offers(protocol, 'voice_catalogue')) continue;
    const apiKeyEnv = u.apiKeyEnv;
    const target: UpstreamTarget = {
      id: u.id,
      modelId,
      url: u.url.replace(/\/+$/, ''),
      protocol: u.protocol,
      upstreamModel: u.upstreamModel ?? modelId,
      settings: protocol.settings.parse(u.settings ?? {}),
      get apiKey() {
        return apiKeyEnv ? process.env[apiKeyEnv] : undefined;
      },
    };
    try {
      const deadline = AbortSignal.timeout(timeoutMs);
      const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
      return await protocol.create(engines).voiceCatalogue.listVoices(target, { signal, timeoutMs });
    } catch (e) {
      throw upstreamEnvelope(asUpstreamError(e, false), timeoutMs);
    }
  }
  const used = [...new Set(model.upstreams.map((u) => u.protocol))].join(', ') || 'none';
  throw new ServiceError(
    'invalid_request',
    `No upstream of '${modelId}' can list its engine's voices (protocols: ${used}); map voices one by one with \`svc voices map\`.`,
    'model',
  );
}

/** The whole import: list, then create or update. */
export async function importVoicesFromEngine(prisma: Prisma, engines: EngineConfig, modelId: string, options: { dryRun?: boolean } = {}) {
  const listed = await listEngineVoices(prisma, engines, modelId);
  if (options.dryRun) return { listed: listed.length, created: 0, updated: 0, voices: listed };
  return { listed: listed.length, ...(await importEngineVoices(prisma, { modelId, voices: listed })) };
}
