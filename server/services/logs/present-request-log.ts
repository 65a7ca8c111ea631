// The API's request-log record (snake_case, ISO timestamps, money as 6-decimal USD): one shape
// for GET /v1/logs, its JSONL and CSV exports, and the dashboard.
import type { Prisma } from '../../db/database.ts';
import { formatUsd } from '../../money.ts';

type LogRow = NonNullable<Awaited<ReturnType<Prisma['requestLog']['findFirst']>>>;
type TurnRow = NonNullable<Awaited<ReturnType<Prisma['requestLogTurn']['findFirst']>>>;

export interface UpstreamAttemptRecord {
  upstream_id: string;
  outcome: string;
  ms: number | null;
}

export interface RequestLogRecord {
  id: string;
  object: 'request_log';
  request_id: string;
  created_at: string;
  /** http: one answer; session: a WebSocket from its upgrade to its close. */
  kind: 'http' | 'session';
  method: string;
  route: string;
  model: string | null;
  status: number;
  error_code: string | null;
  key: { id: string | null; name: string };
  upstreams: UpstreamAttemptRecord[];
  served_by: string | null;
  failover_reason: string | null;
  user_agent: string | null;
  trace_id: string | null;
  /** Milliseconds from the request's arrival; null where nothing was measured. */
  timings: { ttfb_ms: number | null; first_audio_ms: number | null; first_audible_ms: number | null; total_ms: number };
  usage: { input_tokens: number; output_tokens: number; characters: number; audio_ms: number };
  cost_usd: string;
  /** Only for orgs that keep content (null otherwise, and where there was none). */
  content: { request: string | null; response: string | null } | null;
}

export interface RequestLogTurnRecord {
  turn_index: number;
  /** From the session's start to the turn's (the user began speaking). */
  start_ms: number;
  /** From the turn's start; null where nothing was measured. */
  speech_end_ms: number | null;
  end_of_turn_ms: number | null;
  llm_first_token_ms: number | null;
  tts_first_audio_ms: number | null;
  first_audible_ms: number | null;
  barge_in_ms: number | null;
  failover_reason: string | null;
  user_text: string | null;
  assistant_text: string | null;
}

/** Milliseconds as stored, to a hundredth (they are measured in fractions). */
const ms = (v: number | null): number | null => (v === null ? null : Math.round(v * 100) / 100);

function attemptsOf(value: unknown): UpstreamAttemptRecord[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((a: unknown) => {
    const o = a as { upstreamId?: unknown; outcome?: unknown; ms?: unknown } | null;
    if (typeof o?.upstreamId !== 'string') return [];
    return [{ upstream_id: o.upstreamId, outcome: typeof o.outcome === 'string' ? o.outcome : 'unknown', ms: typeof o.ms === 'number' ? ms(o.ms) : null }];
  });
}

export function presentRequestLog(r: LogRow): RequestLogRecord {
  // SQLite hands a Json column back as text when it was written as text by raw SQL.
  const upstreams = typeof r.upstreams === 'string' ? (JSON.parse(r.upstreams) as unknown) : r.upstreams;
  return {
    id: r.id,
    object: 'request_log',
    request_id: r.requestId,
    created_at: r.createdAt.toISOString(),
    kind: r.kind === 'session' ? 'session' : 'http',
    method: r.method,
    route: r.route,
    model: r.modelId,
    status: r.status,
    error_code: r.errorCode,
    key: { id: r.apiKeyId, name: r.apiKeyName },
    upstreams: attemptsOf(upstreams),
    served_by: r.servedBy,
    failover_reason: r.failoverReason,
    user_agent: r.userAgent,
    trace_id: r.traceId,
    timings: { ttfb_ms: ms(r.ttfbMs), first_audio_ms: ms(r.firstAudioMs), first_audible_ms: ms(r.firstAudibleMs), total_ms: ms(r.totalMs)! },
    usage: { input_tokens: r.inputTokens, output_tokens: r.outputTokens, characters: r.characters, audio_ms: r.audioMillis },
    cost_usd: formatUsd(r.costMicros),
    content: r.requestContent === null && r.responseContent === null ? null : { request: r.requestContent, response: r.responseContent },
  };
}

export function presentTurn(t: TurnRow): RequestLogTurnRecord {
  return {
    turn_index: t.turnIndex,
    start_ms: ms(t.startMs)!,
    speech_end_ms: ms(t.speechEndMs),
    end_of_turn_ms: ms(t.endOfTurnMs),
    llm_first_token_ms: ms(t.llmFirstTokenMs),
    tts_first_audio_ms: ms(t.ttsFirstAudioMs),
    first_audible_ms: ms(t.firstAudibleMs),
    barge_in_ms: ms(t.bargeInMs),
    failover_reason: t.failoverReason,
    user_text: t.userText,
    assistant_text: t.assistantText,
  };
}

/** The CSV export's columns, in order (content last: it is the longest). */
export const CSV_COLUMNS = [
  'id',
  'created_at',
  'request_id',
  'kind',
  'method',
  'route',
  'model',
  'status',
  'error_code',
  'key_id',
  'key_name',
  'served_by',
  'failover_reason',
  'user_agent',
  'trace_id',
  'ttfb_ms',
  'first_audio_ms',
  'first_audible_ms',
  'total_ms',
  'input_tokens',
  'output_tokens',
  'characters',
  'audio_ms',
  'cost_usd',
  'request_content',
  'response_content',
] as const;

function csvCell(value: string | number | null): string {
  if (value === null) return '';
  const s = String(value);
  // A cell a spreadsheet would run as a formula is prefixed with a quote (OWASP's CSV-injection advice).
  const safe = /^[=+\-@\t\r]/.test(s) && typeof value === 'string' ? `'${s}` : s;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** One CSV line (RFC 4180, CRLF) of a record. */
export function csvLine(r: RequestLogRecord): string {
  const cells: Record<(typeof CSV_COLUMNS)[number], string | number | null> = {
    id: r.id,
    created_at: r.created_at,
    request_id: r.request_id,
    kind: r.kind,
    method: r.method,
    route: r.route,
    model: r.model,
    status: r.status,
    error_code: r.error_code,
    key_id: r.key.id,
    key_name: r.key.name,
    served_by: r.served_by,
    failover_reason: r.failover_reason,
    user_agent: r.user_agent,
    trace_id: r.trace_id,
    ttfb_ms: r.timings.ttfb_ms,
    first_audio_ms: r.timings.first_audio_ms,
    first_audible_ms: r.timings.first_audible_ms,
    total_ms: r.timings.total_ms,
    input_tokens: r.usage.input_tokens,
    output_tokens: r.usage.output_tokens,
    characters: r.usage.characters,
    audio_ms: r.usage.audio_ms,
    cost_usd: r.cost_usd,
    request_content: r.content?.request ?? null,
    response_content: r.content?.response ?? null,
  };
  return `${CSV_COLUMNS.map((c) => csvCell(cells[c])).join(',')}\r\n`;
}

export const CSV_HEADER = `${CSV_COLUMNS.join(',')}\r\n`;

/** The records as one export file: JSON Lines, or CSV with its header. */
export function exportText(records: readonly RequestLogRecord[], format: 'jsonl' | 'csv'): string {
  if (format === 'jsonl') return records.map((r) => `${JSON.stringify(r)}\n`).join('');
  return CSV_HEADER + records.map(csvLine).join('');
}
