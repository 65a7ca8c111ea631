// Where request-log rows are written and pruned: raw SQL per dialect, like the hot store,
// because the gateway writes them in batches of hundreds and an ORM round per batch would
// cost more than the rows themselves. Reading them is the services' (server/services/logs/),
// through Prisma. The gateway's buffer and timers are gateway/request-log/request-log.ts;
// `openRequestLogStore` (request-log-store-open.ts) picks the dialect.

/** One RequestLog row as written (prisma/schema.prisma has what each column means). */
export interface RequestLogRow {
  id: string;
  orgId: string;
  requestId: string;
  apiKeyId: string | null;
  apiKeyName: string;
  kind: 'http' | 'session';
  method: string;
  route: string;
  modelId: string | null;
  status: number;
  errorCode: string | null;
  /** JSON text of the upstreams tried, or null. */
  upstreams: string | null;
  servedBy: string | null;
  failoverReason: string | null;
  userAgent: string | null;
  traceId: string | null;
  ttfbMs: number | null;
  firstAudioMs: number | null;
  firstAudibleMs: number | null;
  totalMs: number;
  inputTokens: number;
  outputTokens: number;
  characters: number;
  audioMillis: number;
  costMicros: bigint;
  requestContent: string | null;
  responseContent: string | null;
  /** When the request arrived, epoch milliseconds (a number: rows wait in memory by the thousand). */
  createdAt: number;
}

/** One RequestLogTurn row as written. */
export interface RequestLogTurnRow {
  id: string;
  requestLogId: string;
  orgId: string;
  turnIndex: number;
  startMs: number;
  speechEndMs: number | null;
  endOfTurnMs: number | null;
  llmFirstTokenMs: number | null;
  ttsFirstAudioMs: number | null;
  firstAudibleMs: number | null;
  bargeInMs: number | null;
  failoverReason: string | null;
  userText: string | null;
  assistantText: string | null;
  /** Epoch milliseconds. */
  createdAt: number;
}

export interface RequestLogStore {
  /** Writes the rows and turns in one transaction, as multi-row inserts. */
  insert(rows: readonly RequestLogRow[], turns: readonly RequestLogTurnRow[]): Promise<void>;
  /**
   * Deletes at most `limit` of the oldest rows created before `before` (of one org when
   * `orgId` is given), with their turns; returns how many rows went.
   */
  pruneOlderThan(before: Date, limit: number, orgId?: string): Promise<number>;
  /** Deletes at most `limit` of the oldest rows while the table holds more than `maxRows` (counted approximately on SQLite); returns how many went. */
  pruneOverCap(maxRows: number, limit: number): Promise<number>;
  close(): Promise<void>;
}

/** The columns of RequestLog in insert order (both dialects). */
export const ROW_COLUMNS = [
  'id',
  'orgId',
  'requestId',
  'apiKeyId',
  'apiKeyName',
  'kind',
  'method',
  'route',
  'modelId',
  'status',
  'errorCode',
  'upstreams',
  'servedBy',
  'failoverReason',
  'userAgent',
  'traceId',
  'ttfbMs',
  'firstAudioMs',
  'firstAudibleMs',
  'totalMs',
  'inputTokens',
  'outputTokens',
  'characters',
  'audioMillis',
  'costMicros',
  'requestContent',
  'responseContent',
  'createdAt',
] as const satisfies readonly (keyof RequestLogRow)[];

export const TURN_COLUMNS = [
  'id',
  'requestLogId',
  'orgId',
  'turnIndex',
  'startMs',
  'speechEndMs',
  'endOfTurnMs',
  'llmFirstTokenMs',
  'ttsFirstAudioMs',
  'firstAudibleMs',
  'bargeInMs',
  'failoverReason',
  'userText',
  'assistantText',
  'createdAt',
] as const satisfies readonly (keyof RequestLogTurnRow)[];
