// The one translation of an engine's failure (UpstreamError, gateway/upstreams/contract.ts) into
// the client's error envelope. An engine refusing a bad request (400, 413, 422) is the caller's
// error and keeps the engine's message; everything else (auth to the engine, unknown model at the
// engine, 5xx, a broken stream) is the gateway's problem: 502, 504 or 503.
import { ServiceError } from '../server/services/errors.ts';
import type { UpstreamError } from './upstreams/contract.ts';

const CALLERS_FAULT = new Set([400, 413, 422]);

export function upstreamEnvelope(e: UpstreamError, timeoutMs: number): ServiceError {
  switch (e.kind) {
    case 'timeout':
      return new ServiceError('upstream_timeout', `The model upstream did not answer within ${timeoutMs / 1000} s.`);
    case 'connect':
      return new ServiceError('upstream_unavailable', `The model upstream is unreachable (${e.message}); retry with backoff.`);
    case 'unavailable':
      return new ServiceError('model_offline', e.message);
    case 'busy':
      return new ServiceError('temporarily_unavailable', e.message, null, { retryAfterSeconds: e.details.retryAfterSeconds ?? 1 });
    case 'status': {
      const status = e.details.status;
      const message = e.details.engineMessage;
      if (status !== undefined && CALLERS_FAULT.has(status))
        return new ServiceError('invalid_request', message || `The model rejected the request (${status}).`, e.details.param ?? null);
      // An error event on an engine's stream has no status of its own.
      if (status === undefined) return new ServiceError('upstream_error', `The model upstream refused: ${message ?? e.message}`);
      return new ServiceError('upstream_error', `The model upstream returned ${status}${message ? `: ${message}` : ''}`);
    }
    case 'protocol':
    case 'broken':
      return new ServiceError('upstream_error', `The model upstream failed: ${e.message}`);
  }
}
