// The one translation of an engine's failure (UpstreamError, gateway/upstreams/contract.ts) into
// the client's error envelope. An engine refusing a bad request (400, 413, 422) is the caller's
// error and keeps the engine's message; everything else (auth to the engine, unknown model at the
// engine, 5xx, a broken stream) is the gateway's problem: 502, 504 or 503. What the client reads
// names no engine address (the log keeps it: the engine's failure is the error's cause).
import { ServiceError } from '../server/services/errors.ts';
import type { UpstreamError } from './upstreams/contract.ts';

const CALLERS_FAULT = new Set([400, 413, 422]);

export function upstreamEnvelope(e: UpstreamError, timeoutMs: number): ServiceError {
  const error = clientError(e, timeoutMs);
  error.cause = e;
  return error;
}

function clientError(e: UpstreamError, timeoutMs: number): ServiceError {
  switch (e.kind) {
    case 'timeout':
      return new ServiceError('upstream_timeout', `The model upstream did not answer within ${timeoutMs / 1000} s.`);
    case 'connect':
      return new ServiceError('upstream_unavailable', `The model upstream is unreachable (${withoutAddresses(e.message)}); retry with backoff.`);
    case 'unavailable':
      return new ServiceError('model_offline', withoutAddresses(e.message));
    case 'busy':
      return new ServiceError('temporarily_unavailable', e.message, null, { retryAfterSeconds: e.details.retryAfterSeconds ?? 1 });
    case 'status': {
      const status = e.details.status;
      const message = e.details.engineMessage === undefined ? undefined : withoutAddresses(e.details.engineMessage);
      if (status !== undefined && CALLERS_FAULT.has(status))
        return new ServiceError('invalid_request', message || `The model rejected the request (${status}).`, e.details.param ?? null);
      // An error event on an engine's stream has no status of its own.
      if (status === undefined) return new ServiceError('upstream_error', `The model upstream refused: ${message ?? withoutAddresses(e.message)}`);
      return new ServiceError('upstream_error', `The model upstream returned ${status}${message ? `: ${message}` : ''}`);
    }
    case 'protocol':
    case 'broken':
      return new ServiceError('upstream_error', `The model upstream failed: ${withoutAddresses(e.message)}`);
  }
}

// Engines are reached at addresses of the operator's network; what Node, undici and ws say of a
// failure names them ("connect ECONNREFUSED 10.0.0.5:8000", "getaddrinfo ENOTFOUND llm.internal").
// Word by word, each word matched whole: a pattern searched for anywhere in the text took time
// quadratic in the length of a long word.
const URL_START = /^[a-z][a-z0-9+.-]*:\/\//i;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?$/;
/** As Node writes it ("::1:8080"), or in brackets ("[fe80::1%eth0]:443"): with "::" or at least four colons. */
const IPV6 = /^\[?(?=[0-9a-f:]*::|(?:[0-9a-f]{0,4}:){4})[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,8}(?:%\w+)?(?:\](?::\d{1,5})?)?$/i;
/** host:port, the host with a letter in it ("12:30" is a time). */
const HOST_PORT = /^(?=[\w.-]*[a-z])[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{1,5}$/i;
/** What a certificate check names: "DNS:llm.internal", "IP Address:10.0.0.5". */
const CERT_NAME = /^(DNS:|Address:)(.+)$/;
/** Words after which the next one is a host name. */
const NAME_FOLLOWS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'Host:']);
const OPENING = new Set(['(', '"', "'", '{', '<']);
const CLOSING = new Set([')', '"', "'", '}', '>', '.', ',', ';']);

/** `text` with every network address and URL in it replaced by `[address]`. */
export function withoutAddresses(text: string): string {
  let previous = '';
  return text.replace(/\S+/g, (word) => {
    const after = previous;
    previous = word;
    let from = 0;
    let to = word.length;
    while (from < to && OPENING.has(word[from]!)) from++;
    while (to > from && CLOSING.has(word[to - 1]!)) to--;
    const [open, core, close] = [word.slice(0, from), word.slice(from, to), word.slice(to)];
    if (NAME_FOLLOWS.has(after) || URL_START.test(core) || IPV4.test(core) || IPV6.test(core) || HOST_PORT.test(core)) return `${open}[address]${close}`;
    const named = CERT_NAME.exec(core);
    return named ? `${open}${named[1]}[address]${close}` : word;
  });
}
