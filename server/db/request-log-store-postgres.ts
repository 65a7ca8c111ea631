import pg from 'pg';
import { sqlTimestamp } from './dialect.ts';
import { ROW_COLUMNS, TURN_COLUMNS, type RequestLogRow, type RequestLogStore, type RequestLogTurnRow } from './request-log-store.ts';

/** Each column's PostgreSQL type: the rows go as one array per column through unnest(), one statement whatever their number. */
const ROW_TYPES: Record<(typeof ROW_COLUMNS)[number], string> = {
  id: 'text',
  orgId: 'text',
  requestId: 'text',
  apiKeyId: 'text',
  apiKeyName: 'text',
  kind: 'text',
  method: 'text',
  route: 'text',
  modelId: 'text',
  status: 'int',
  errorCode: 'text',
  upstreams: 'jsonb',
  servedBy: 'text',
  failoverReason: 'text',
  userAgent: 'text',
  traceId: 'text',
  ttfbMs: 'float8',
  firstAudioMs: 'float8',
  firstAudibleMs: 'float8',
  totalMs: 'float8',
  inputTokens: 'int',
  outputTokens: 'int',
  characters: 'int',
  audioMillis: 'int',
  costMicros: 'bigint',
  requestContent: 'text',
  responseContent: 'text',
  createdAt: 'timestamp',
};
const TURN_TYPES: Record<(typeof TURN_COLUMNS)[number], string> = {
  id: 'text',
  requestLogId: 'text',
  orgId: 'text',
  turnIndex: 'int',
  startMs: 'float8',
  speechEndMs: 'float8',
  endOfTurnMs: 'float8',
  llmFirstTokenMs: 'float8',
  ttsFirstAudioMs: 'float8',
  firstAudibleMs: 'float8',
  bargeInMs: 'float8',
  failoverReason: 'text',
  userText: 'text',
  assistantText: 'text',
  createdAt: 'timestamp',
};

/** `INSERT ... SELECT FROM unnest($first::type[], ...)`: json and timestamps travel as text and are cast back. */
function unnestInsert(table: string, columns: readonly string[], types: Record<string, string>, first: number): string {
  const travels = (c: string) => (types[c] === 'jsonb' || types[c] === 'timestamp' ? 'text' : types[c]!);
  return (
    `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(', ')}) ` +
    `SELECT ${columns.map((c, i) => (travels(c) === types[c] ? `c${i}` : `c${i}::${types[c]}`)).join(', ')} ` +
    `FROM unnest(${columns.map((c, i) => `$${first + i}::${travels(c)}[]`).join(', ')}) AS v(${columns.map((_, i) => `c${i}`).join(', ')})`
  );
}

export function createPostgresRequestLogStore(connectionString: string): RequestLogStore {
  // A pool of its own, small: one batch at a time, and pruning.
  const pool = new pg.Pool({ connectionString, max: 2, connectionTimeoutMillis: 5_000 });
  pool.on('error', () => {});
  const ts = (d: Date) => sqlTimestamp('postgresql', d);
  const column = <T>(items: readonly T[], read: (item: T) => unknown, isTime: boolean) =>
    items.map((item) => {
      const v = read(item);
      return isTime ? ts(new Date(v as number)) : typeof v === 'bigint' ? v.toString() : v;
    });
  // Rows and turns in one statement (so one transaction, one round trip).
  const insertBoth = `WITH r AS (${unnestInsert('RequestLog', ROW_COLUMNS, ROW_TYPES, 1)}) ${unnestInsert('RequestLogTurn', TURN_COLUMNS, TURN_TYPES, ROW_COLUMNS.length + 1)}`;
  const prune = (where: string) =>
    `WITH gone AS (DELETE FROM "RequestLog" WHERE id IN (SELECT id FROM "RequestLog" ${where} ORDER BY "createdAt" LIMIT $1) RETURNING id),
          t AS (DELETE FROM "RequestLogTurn" WHERE "requestLogId" IN (SELECT id FROM gone))
     SELECT count(*)::int AS n FROM gone`;

  return {
    async insert(rows, turns) {
      if (rows.length === 0 && turns.length === 0) return;
      await pool.query({
        name: 'svc_request_log_insert',
        text: insertBoth,
        values: [
          ...ROW_COLUMNS.map((c) => column(rows, (r: RequestLogRow) => r[c], c === 'createdAt')),
          ...TURN_COLUMNS.map((c) => column(turns, (t: RequestLogTurnRow) => t[c], c === 'createdAt')),
        ],
      });
    },
    async pruneOlderThan(before, limit, orgId) {
      const { rows } =
        orgId === undefined
          ? await pool.query<{ n: number }>(prune(`WHERE "createdAt" < $2::timestamp`), [limit, ts(before)])
          : await pool.query<{ n: number }>(prune(`WHERE "createdAt" < $2::timestamp AND "orgId" = $3`), [limit, ts(before), orgId]);
      return rows[0]?.n ?? 0;
    },
    async pruneOverCap(maxRows, limit) {
      const { rows: counted } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "RequestLog"`);
      const n = Number(counted[0]?.n ?? 0);
      if (n <= maxRows) return 0;
      const { rows } = await pool.query<{ n: number }>(prune(''), [Math.min(n - maxRows, limit)]);
      return rows[0]?.n ?? 0;
    },
    async close() {
      await pool.end();
    },
  };
}
