// Reads a TTS model's engine voice catalogue (Cartesia GET /voices, ElevenLabs GET /v1/voices,
// Deepgram's model list...) through the first of its upstreams whose protocol lists voices.
import type { Prisma } from '../../server/db/database.js';
import { ServiceError } from '../../server/services/errors.js';
import { importEngineVoices, type CatalogueVoice } from '../../server/services/voices/engine-voices.js';
import { ModelRegistry } from '../registry/model-registry.js';
import { upstreamEnvelope } from '../upstream-envelope.js';
import { UpstreamError } from '../upstreams/contract.js';
import type { EngineConfig } from '../upstreams/contract.js';
import { ProtocolRuntimes } from '../upstreams/protocols/index.js';

export async function listEngineVoices(prisma: Prisma, protocols: ProtocolRuntimes, modelId: string, timeoutMs = 30_000): Promise<CatalogueVoice[]> {
  const registry = new ModelRegistry(prisma);
  await registry.refresh();
  const model = registry.all().find((m) => m.id === modelId);
  if (!model) throw new ServiceError('model_not_found', `The model '${modelId}' does not exist.`);
  const upstream = model.upstreams.find((u) => protocols.get(u.protocol)?.voiceCatalogue);
  if (!upstream) {
    const used = [...new Set(model.upstreams.map((u) => u.protocol))].join(', ') || 'none';
    throw new ServiceError('invalid_request', `No upstream of '${modelId}' can list its engine's voices (protocols: ${used}); map voices one by one with \`svc voices map\`.`, 'model');
  }
  try {
    return await protocols.get(upstream.protocol)!.voiceCatalogue!.listVoices(upstream, { signal: AbortSignal.timeout(timeoutMs), timeoutMs });
  } catch (e) {
    throw upstreamEnvelope(e instanceof UpstreamError ? e : new UpstreamError('timeout', String(e)), timeoutMs);
  }
}

/** The whole import (`svc voices import`, the dashboard's Models page): list, then create or update. */
export async function importVoicesFromEngine(prisma: Prisma, engines: EngineConfig, modelId: string, options: { dryRun?: boolean } = {}) {
  const listed = await listEngineVoices(prisma, new ProtocolRuntimes(engines), modelId);
  if (options.dryRun) return { listed: listed.length, created: 0, updated: 0, voices: listed };
  return { listed: listed.length, ...(await importEngineVoices(prisma, { modelId, voices: listed })) };
}
