// Models on the dashboard: the catalog an org can pick from (playground, clone form), and the
// operators' health view of every model's upstreams (platform admins only).
import { z } from 'zod';
import { listActiveModels } from '../../services/models/list-active-models.js';
import { listModelHealth } from '../../services/models/list-model-health.js';
import { inputOf } from '../input-parser.js';
import { createTRPCRouter, orgProcedure, platformAdminProcedure } from '../trpc.js';

const Catalog = z.strictObject({ modality: z.enum(['llm', 'tts', 'stt']).optional() });
const iso = (d: Date | null) => d?.toISOString() ?? null;

export const modelsRouter = createTRPCRouter({
  /** Active models, optionally of one modality. */
  catalog: orgProcedure.input(inputOf(Catalog)).query(({ ctx, input }) => listActiveModels(ctx.db.prisma, input)),

  /** Platform admins: each model with its upstreams' URL (no secrets), protocol, health, latency, last error and check time. */
  health: platformAdminProcedure.query(async ({ ctx }) => {
    const models = await listModelHealth(ctx.db.prisma);
    return models.map((m) => ({ ...m, upstreams: m.upstreams.map((u) => ({ ...u, lastCheckedAt: iso(u.lastCheckedAt) })) }));
  }),
});
