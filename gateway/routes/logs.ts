// GET /v1/logs and GET /v1/logs/:id: the key's org's request logs (docs/logs.md), for scripts.
// Keyed but not metered: an org out of credit can still read why its requests were refused.
// Reads of the log are not logged themselves (a script tailing the log would fill it).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseInput } from '../../server/services/parse-input.ts';
import { getRequestLog } from '../../server/services/logs/get-request-log.ts';
import { ListRequestLogsQuery, listRequestLogs, MAX_LOG_EXPORT, MAX_LOG_PAGE } from '../../server/services/logs/list-request-logs.ts';
import { exportText } from '../../server/services/logs/present-request-log.ts';
import type { GatewayContext } from '../context.ts';

export const LogsQuery = ListRequestLogsQuery.extend({ format: z.enum(['json', 'jsonl', 'csv']).default('json') });
export const LogIdParams = z.strictObject({ id: z.string().min(1).max(64) });

/** The header an export's next page is named in (its body has no room for it). */
export const NEXT_CURSOR_HEADER = 'x-svc-next-cursor';

export function registerLogRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const { prisma } = ctx.db;
  const keyed = { config: { requestLog: false as const } };

  app.get('/v1/logs', keyed, async (request, reply) => {
    const { format, ...query } = parseInput(LogsQuery, request.query, { body: false });
    if (format === 'json') return { object: 'list', ...(await listRequestLogs(prisma, request.auth.orgId, query, MAX_LOG_PAGE)) };
    const page = await listRequestLogs(prisma, request.auth.orgId, query, MAX_LOG_EXPORT);
    if (page.next_cursor) reply.header(NEXT_CURSOR_HEADER, page.next_cursor);
    return reply
      .type(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8')
      .header('content-disposition', `attachment; filename="svc-logs.${format}"`)
      .send(exportText(page.data, format));
  });

  app.get('/v1/logs/:id', keyed, async (request) => {
    const { id } = parseInput(LogIdParams, request.params, { body: false });
    return getRequestLog(prisma, request.auth.orgId, id);
  });
}
