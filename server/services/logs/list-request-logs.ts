// An org's request logs, newest first, keyset-paginated and filtered (GET /v1/logs and the
// dashboard's Logs page). The cursor is the (created_at, id) of the last row of the page, so a
// page never repeats or skips a row however many are written meanwhile. Every query is scoped
// to the org: no filter can reach another org's rows.
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { presentRequestLog, type RequestLogRecord } from './present-request-log.ts';

export const DEFAULT_LOG_PAGE = 50;
export const MAX_LOG_PAGE = 200;
/** An export (JSONL or CSV) may carry this many rows per call. */
export const MAX_LOG_EXPORT = 10_000;

/** `ok`: below 400 (101 for a session); `error`: 400 and above; `4xx`/`5xx`; or one exact status. */
const StatusFilter = z.union([z.enum(['ok', 'error', '4xx', '5xx']), z.coerce.number().int().min(100).max(599)]);
const isoTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 time, e.g. 2026-11-27T10:00:00Z' }).transform((s) => new Date(s));

export const ListRequestLogsQuery = z.strictObject({
  from: isoTime.optional(),
  to: isoTime.optional(),
  key: z.string().trim().min(1).max(64).optional(),
  model: z.string().trim().min(1).max(200).optional(),
  route: z.string().trim().min(1).max(200).optional(),
  status: StatusFilter.optional(),
  kind: z.enum(['http', 'session']).optional(),
  request_id: z.string().trim().min(1).max(128).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_LOG_EXPORT).default(DEFAULT_LOG_PAGE),
  cursor: z.string().min(1).max(200).optional(),
});
export type ListRequestLogsQuery = z.infer<typeof ListRequestLogsQuery>;

interface Cursor {
  createdAt: Date;
  id: string;
}

const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify([c.createdAt.getTime(), c.id])).toString('base64url');

function decodeCursor(value: string): Cursor {
  try {
    const [time, id] = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown[];
    const createdAt = typeof time === 'number' ? new Date(time) : new Date(NaN);
    if (!Number.isNaN(createdAt.getTime()) && typeof id === 'string' && id.length > 0 && id.length <= 64 && !id.includes('\u0000')) return { createdAt, id };
  } catch {
    // fall through
  }
  throw new ServiceError('invalid_request', 'cursor is not a next_cursor returned by GET /v1/logs.', 'cursor');
}

function statusWhere(status: z.infer<typeof StatusFilter>): object {
  switch (status) {
    case 'ok':
      return { status: { lt: 400 } };
    case 'error':
      return { status: { gte: 400 } };
    case '4xx':
      return { status: { gte: 400, lt: 500 } };
    case '5xx':
      return { status: { gte: 500 } };
    default:
      return { status };
  }
}

/** `maxLimit`: the page size allowed (MAX_LOG_PAGE for a page, MAX_LOG_EXPORT for an export). */
export async function listRequestLogs(
  prisma: Prisma,
  orgId: string,
  query: ListRequestLogsQuery,
  maxLimit: number = MAX_LOG_PAGE,
): Promise<{ data: RequestLogRecord[]; has_more: boolean; next_cursor: string | null }> {
  if (query.limit > maxLimit) throw new ServiceError('invalid_request', `limit: must be at most ${maxLimit}`, 'limit');
  if (query.from && query.to && query.from > query.to) throw new ServiceError('invalid_request', 'from: must not be after to', 'from');
  const and: object[] = [{ orgId }];
  if (query.from) and.push({ createdAt: { gte: query.from } });
  if (query.to) and.push({ createdAt: { lt: query.to } });
  if (query.key) and.push({ apiKeyId: query.key });
  if (query.model) and.push({ modelId: query.model });
  if (query.route) and.push({ route: query.route });
  if (query.status !== undefined) and.push(statusWhere(query.status));
  if (query.kind) and.push({ kind: query.kind });
  if (query.request_id) and.push({ requestId: query.request_id });
  if (query.cursor) {
    const c = decodeCursor(query.cursor);
    and.push({ OR: [{ createdAt: { lt: c.createdAt } }, { createdAt: c.createdAt, id: { lt: c.id } }] });
  }
  const rows = await prisma.requestLog.findMany({ where: { AND: and }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: query.limit + 1 });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  const hasMore = rows.length > query.limit;
  return { data: page.map(presentRequestLog), has_more: hasMore, next_cursor: hasMore && last ? encodeCursor(last) : null };
}
