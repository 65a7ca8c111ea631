// What routes, sessions and the gateway's hook tell the request log (request-log.ts) of a
// request, and how a row takes it in.
import type { RequestLogRow } from '../../server/db/request-log-store.ts';

/** Which request a call is about: its org, and the id it was answered with (x-request-id). */
export interface LogRef {
  orgId: string;
  requestId: string;
}

/** One upstream tried for a request, in order. */
export interface UpstreamAttempt {
  upstreamId: string;
  /** 'ok', or how it failed: 'connect', 'timeout', 'http_status', 'broken', 'stream_broken', 'cancelled'. */
  outcome: string;
  /** From the attempt's start to its answer or failure. */
  ms?: number;
}

/** What a route or session adds to its request's row (milliseconds from the request's arrival). */
export interface RequestLogPatch {
  modelId?: string;
  errorCode?: string;
  servedBy?: string;
  failoverReason?: string;
  ttfbMs?: number;
  firstAudioMs?: number;
  firstAudibleMs?: number;
  /** The answer's text (a transcript, a completion); kept only when the org opted in. */
  responseContent?: string;
}

/** One turn of a live session: milliseconds from the turn's start (the user began speaking), which is `startMs` after the session's. */
export interface SessionTurn {
  turnIndex: number;
  startMs: number;
  speechEndMs?: number;
  endOfTurnMs?: number;
  llmFirstTokenMs?: number;
  ttsFirstAudioMs?: number;
  firstAudibleMs?: number;
  bargeInMs?: number;
  failoverReason?: string;
  /** What the user said and what was answered; kept only when the org opted in. */
  userText?: string;
  assistantText?: string;
}

/** What the gateway's hook knows of a request once it is answered (or its session closed). */
export interface FinishedRequest {
  orgId: string;
  requestId: string;
  apiKeyId: string | null;
  kind: 'http' | 'session';
  method: string;
  route: string;
  modelId: string | null;
  status: number;
  errorCode: string | null;
  userAgent: string | null;
  traceId: string | null;
  ttfbMs: number | null;
  totalMs: number;
  /** When the request arrived (epoch milliseconds). */
  startedAt: number;
  requestContent: string | null;
  responseContent: string | null;
}

/** Text kept with a row (when the org opted in) is cut to this many characters. */
export const CONTENT_MAX_CHARS = 16_384;

export function clip(text: string | null | undefined): string | null {
  if (text === null || text === undefined) return null;
  return text.length > CONTENT_MAX_CHARS ? text.slice(0, CONTENT_MAX_CHARS) : text;
}

export function applyPatch(row: RequestLogRow, patch: RequestLogPatch, content: boolean): void {
  if (patch.modelId !== undefined) row.modelId = patch.modelId;
  if (patch.errorCode !== undefined) row.errorCode = patch.errorCode;
  if (patch.servedBy !== undefined) row.servedBy = patch.servedBy;
  if (patch.failoverReason !== undefined) row.failoverReason = patch.failoverReason;
  if (patch.ttfbMs !== undefined) row.ttfbMs = patch.ttfbMs;
  if (patch.firstAudioMs !== undefined) row.firstAudioMs = patch.firstAudioMs;
  if (patch.firstAudibleMs !== undefined) row.firstAudibleMs = patch.firstAudibleMs;
  if (patch.responseContent !== undefined && content) row.responseContent = clip(patch.responseContent);
}
