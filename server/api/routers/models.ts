// Models on the dashboard: the catalog an org can pick from (playground, clone form), the
// operators' health view of every model's upstreams, and the import of an engine's voices
// (platform admins only).
import { z } from 'zod';
import { getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { listActiveModels } from '../../services/models/list-active-models.ts';
import { listModelHealth } from '../../services/models/list-model-health.ts';
import { EngineCatalogue, importEngineVoices } from '../../services/voices/engine-voices.ts';
import { getFromGateway } from '../gateway-proxy.ts';
import { upstreamHistory } from '../../services/logs/request-log-stats.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, gatewayUrlOf, orgProcedure, platformAdminOrgProcedure, platformAdminProcedure } from '../trpc.ts';

const Catalog = z.strictObject({ modality: z.enum(['llm', 'tts', 'stt']).optional() });
const ImportVoices = z.strictObject({ modelId: z.string().min(1).max(128) });
const iso = (d: Date | null) => d?.toISOString() ?? null;

export const modelsRouter = createTRPCRouter({
  /** Active models, optionally of one modality. */
  catalog: orgProcedure.input(inputOf(Catalog)).query(({ ctx, input }) => listActiveModels(ctx.db.prisma, input)),

  /** Platform admins: each model with its upstreams' URL (no secrets), protocol, health, latency, last error and check time. */
  health: platformAdminProcedure.query(async ({ ctx }) => {
    const models = await listModelHealth(ctx.db.prisma);
    return models.map((m) => ({ ...m, upstreams: m.upstreams.map((u) => ({ ...u, lastCheckedAt: iso(u.lastCheckedAt) })) }));
  }),

  /** Platform admins: each upstream's last 24 hours, hour by hour: calls, failures, latency (null where nothing was measured). */
  upstreamHistory: platformAdminProcedure.query(async ({ ctx }) => Object.fromEntries(await upstreamHistory(ctx.db, { hours: 24 }))),

  /**
   * Platform admins: a TTS model's engine voice catalogue imported as platform voices with ready
   * profiles (what `svc voices import` does). The engines are the gateway's: the catalogue is read
   * through it (GET /voices/engine-catalogue, with the acting org's dashboard key), then imported here.
   */
  importVoices: platformAdminOrgProcedure.input(inputOf(ImportVoices)).mutation(async ({ ctx, input }) => {
    const key = await getOrCreateDashboardKey(ctx.db, ctx.org.id);
    const answer = await getFromGateway({ gatewayUrl: gatewayUrlOf(ctx), key }, ['voices', 'engine-catalogue'], { model: input.modelId });
    const { voices } = EngineCatalogue.parse(answer);
    const { created, updated } = await importEngineVoices(ctx.db.prisma, { modelId: input.modelId, voices });
    return { listed: voices.length, created, updated };
  }),
});
