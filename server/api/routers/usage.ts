// Usage on the dashboard: spend per UTC day and model (the chart), per model with units, and
// per key, over the last N days. Money as 6-decimal USD strings, as everywhere on this edge.
import { z } from 'zod';
import { formatUsd } from '../../money.ts';
import { DEFAULT_USAGE_DAYS, MAX_USAGE_DAYS, usageSummary } from '../../services/credits/usage-summary.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, orgProcedure } from '../trpc.ts';

const SummaryInput = z.strictObject({ days: z.number().int().min(1).max(MAX_USAGE_DAYS).default(DEFAULT_USAGE_DAYS) });

export const usageRouter = createTRPCRouter({
  summary: orgProcedure.input(inputOf(SummaryInput)).query(async ({ ctx, input }) => {
    const s = await usageSummary(ctx.db, { orgId: ctx.org.id, days: input.days });
    return {
      from: s.from.toISOString(),
      to: s.to.toISOString(),
      totalRequests: s.totalRequests,
      totalUsd: formatUsd(s.totalCostMicros),
      days: s.days.map((d) => ({
        day: d.day,
        requests: d.requests,
        costUsd: formatUsd(d.costMicros),
        byModel: d.byModel.map((m) => ({ modelId: m.modelId, requests: m.requests, costUsd: formatUsd(m.costMicros) })),
      })),
      models: s.models.map(({ costMicros, ...m }) => ({ ...m, costUsd: formatUsd(costMicros) })),
      keys: s.keys.map((k) => ({ keyId: k.keyId, name: k.name, prefix: k.prefix, status: k.status, requests: k.requests, costUsd: formatUsd(k.costMicros) })),
    };
  }),
});
