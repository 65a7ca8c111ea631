// Models on the dashboard: the catalog an org can pick from (playground, clone form), and the
// operators' health view of every model's upstreams (platform admins only).
import { z } from 'zod';
import { listActiveModels } from '../../services/models/list-active-models.ts';
import { listModelHealth } from '../../services/models/list-model-health.ts';
import { upstreamHistory } from '../../services/logs/request-log-stats.ts';
import { loadConfig } from '../../config/env.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, orgProcedure, platformAdminProcedure } from '../trpc.ts';

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
   * profiles (what `svc voices import` does). Loaded on use: the engines' code is the gateway's.
   */
  importVoices: platformAdminProcedure.input(inputOf(ImportVoices)).mutation(async ({ ctx, input }) => {
    // eslint-disable-next-line import-x/no-restricted-paths -- the engines' code is the gateway's until the catalogue import is a service (issue #23)
    const { importVoicesFromEngine } = await import('../../../gateway/voices/engine-catalogue.ts');
    const { listed, created, updated } = await importVoicesFromEngine(ctx.db.prisma, loadConfig().engines, input.modelId);
    return { listed, created, updated };
  }),
});
