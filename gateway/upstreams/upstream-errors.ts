// How upstream failures become the spec's errors, in one place for every adapter.
import type { ChatResponse } from './chat-types.js';
import { ServiceError } from '../../server/services/errors.js';

const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** True when the request certainly never reached the upstream, so another upstream may be tried. */
export function isConnectFailure(e: unknown): boolean {
  const code = (e as { code?: string } | null)?.code;
  return typeof code === 'string' && CONNECT_FAILURES.has(code);
}

export function isTimeout(e: unknown): boolean {
  const code = (e as { code?: string } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || (e as Error | null)?.name === 'TimeoutError';
}

export function upstreamTimeout(seconds: number): ServiceError {
  return new ServiceError('upstream_timeout', `The model upstream did not answer within ${seconds} s.`);
}

export function upstreamUnavailable(detail: string): ServiceError {
  return new ServiceError('upstream_unavailable', `The model upstream is unreachable (${detail}); retry with backoff.`);
}

/**
 * An upstream's error response in our envelope. Request validation errors (400, 413, 422)
 * are the caller's and keep the engine's message; everything else (auth to the engine,
 * unknown model at the engine, 5xx) is the gateway's problem and becomes 502.
 */
export async function upstreamErrorFromResponse(res: Pick<ChatResponse, 'statusCode' | 'text'>): Promise<ServiceError> {
  const text = await res.text().catch(() => '');
  let message = text.slice(0, 2000);
  let param: string | null = null;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; param?: unknown } | string; message?: unknown; detail?: unknown };
    const err = parsed.error;
    if (typeof err === 'string') message = err;
    else if (err && typeof err.message === 'string') {
      message = err.message;
      if (typeof err.param === 'string') param = err.param;
    } else if (typeof parsed.message === 'string') message = parsed.message;
    else if (typeof parsed.detail === 'string') message = parsed.detail;
  } catch {
    // not JSON: keep the text
  }
  if (res.statusCode === 400 || res.statusCode === 413 || res.statusCode === 422) {
    return new ServiceError('invalid_request', message || `The model rejected the request (${res.statusCode}).`, param);
  }
  return new ServiceError('upstream_error', `The model upstream returned ${res.statusCode}${message ? `: ${message}` : ''}`);
}
