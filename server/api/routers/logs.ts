// Request logs on the dashboard (docs/logs.md): the org's rows (the same query, records and
// exports as GET /v1/logs), one row with its session's turns, counts and latency per model and
// key, and the org's content and retention settings (owners change them).
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { getRequestLog } from '../../services/logs/get-request-log.ts';
import { ListRequestLogsQuery, listRequestLogs, MAX_LOG_EXPORT, MAX_LOG_PAGE } from '../../services/logs/list-request-logs.ts';
import { getLogSettings, LogSettingsInput, updateLogSettings } from '../../services/logs/log-settings.ts';
import { exportText } from '../../services/logs/present-request-log.ts';
import { orgRequestStats } from '../../services/logs/request-log-stats.ts';
import { inputOf } from '../input-parser.ts';
import { canManageOrg, createTRPCRouter, orgProcedure, ownerProcedure } from '../trpc.ts';

const ExportInput = ListRequestLogsQuery.extend({ format: z.enum(['jsonl', 'csv']) });
/** The page's infinite query adds the direction it pages in (always older: the cursor says from where). */
const ListInput = ListRequestLogsQuery.extend({ direction: z.enum(['forward', 'backward']).optional() });
const StatsInput = z.strictObject({ days: z.number().int().min(1).max(90).default(30) });

/** The gateway's retention (the dashboard runs with the same environment as the gateway). */
const retentionDays = () => loadConfig().requestLog?.retentionDays ?? 30;

export const logsRouter = createTRPCRouter({
  list: orgProcedure
    .input(inputOf(ListInput))
    .query(({ ctx, input: { direction: _direction, ...query } }) => listRequestLogs(ctx.db.prisma, ctx.org.id, query, MAX_LOG_PAGE)),

  get: orgProcedure
    .input(inputOf(z.strictObject({ id: z.string().min(1).max(64) })))
    .query(({ ctx, input }) => getRequestLog(ctx.db.prisma, ctx.org.id, input.id)),

  /** The filtered rows as a JSONL or CSV file's text (the page offers it as a download). */
  export: orgProcedure.input(inputOf(ExportInput)).mutation(async ({ ctx, input }) => {
    const { format, ...query } = input;
    const page = await listRequestLogs(ctx.db.prisma, ctx.org.id, { ...query, limit: Math.min(query.limit, MAX_LOG_EXPORT) }, MAX_LOG_EXPORT);
    return {
      filename: `svc-logs.${format}`,
      contentType: format === 'csv' ? 'text/csv' : 'application/x-ndjson',
      text: exportText(page.data, format),
      rows: page.data.length,
      nextCursor: page.next_cursor,
    };
  }),

  /** Requests, error rates and latency percentiles per model and per key over the last N days. */
  stats: orgProcedure.input(inputOf(StatsInput)).query(({ ctx, input }) => orgRequestStats(ctx.db, { orgId: ctx.org.id, days: input.days })),

  /** The org's settings, the gateway's retention (the most an org may choose), and whether this user may change them (owners). */
  settings: orgProcedure.query(async ({ ctx }) => ({
    ...(await getLogSettings(ctx.db.prisma, ctx.org.id)),
    gatewayRetentionDays: retentionDays(),
    canManage: await canManageOrg(ctx),
  })),

  updateSettings: ownerProcedure.input(inputOf(LogSettingsInput)).mutation(async ({ ctx, input }) => ({
    ...(await updateLogSettings(ctx.db.prisma, ctx.org.id, input, retentionDays())),
    gatewayRetentionDays: retentionDays(),
  })),
});
