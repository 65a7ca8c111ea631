// The one HTTP client for engines: one keep-alive pool per engine origin for the whole process,
// requests through undici's low-level dispatch (gateway/upstreams/dispatch-call.ts), and every
// failure as an UpstreamError. A non-2xx answer carries the engine's own message, with the
// engine's key cut out should the engine echo it. No answer is read whole without a bound: a
// broken or hostile engine must not be able to fill the gateway's memory.
import { Agent } from 'undici';
import { dispatchCall, dispatchTarget, type DispatchResponse } from './dispatch-call.ts';
import { UpstreamError, type CallOptions } from './contract.ts';

export type { DispatchResponse } from './dispatch-call.ts';

/** The most of a JSON answer (transcription, catalogue page, clone) read whole; past it the answer is an engine fault (502). */
export const ANSWER_MAX_BYTES = 1024 * 1024;
/** A chat completion read whole: `n` choices with log-probabilities make legitimate answers large. */
export const CHAT_ANSWER_MAX_BYTES = 8 * 1024 * 1024;
/** What an error answer's message is read from; the rest is not read (the message is cut far shorter anyway). */
export const ERROR_BODY_MAX_BYTES = 8 * 1024;

// One keep-alive pool per upstream origin, shared by all requests of the process.
export const httpDispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

const CONNECT_FAILURES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED',
]);

/** True when the request certainly never reached the engine, so another upstream may be tried. */
export function isConnectFailure(e: unknown): boolean {
  if (e instanceof UpstreamError) return e.kind === 'connect';
  const code = (e as { code?: string } | null)?.code;
  return typeof code === 'string' && CONNECT_FAILURES.has(code);
}

export function isTimeout(e: unknown): boolean {
  if (e instanceof UpstreamError) return e.kind === 'timeout';
  const code = (e as { code?: string } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || (e as Error | null)?.name === 'TimeoutError';
}

/**
 * Any failure as an UpstreamError, by one rule for every caller: an UpstreamError as it is; a
 * timeout; `connect` only when the request certainly never reached the engine (it had not begun
 * answering and the error's code says the connection failed), because only then may another
 * upstream be tried; anything else a broken answer.
 * `started`: the engine had begun answering (a failure now is a broken stream, whatever its code).
 */
export function asUpstreamError(e: unknown, started: boolean): UpstreamError {
  if (e instanceof UpstreamError) return e;
  const message = (e as Error | null)?.message ?? String(e);
  if (isTimeout(e)) return new UpstreamError('timeout', message, { cause: e });
  if (!started && isConnectFailure(e)) return new UpstreamError('connect', message, { cause: e });
  return new UpstreamError('broken', started ? `The engine broke off its answer: ${message}` : message, { cause: e });
}

/**
 * A failure of an engine call: the call's own abort (client gone, key revoked, shutdown) passed
 * through as its reason for the caller to recognise, the call's deadline as `timeout`, anything
 * else as asUpstreamError says.
 */
export function engineFailure(e: unknown, call: CallOptions, started: boolean): unknown {
  if (e instanceof UpstreamError) return e;
  if (call.signal.aborted) {
    const reason = call.signal.reason as Error | undefined;
    return reason?.name === 'TimeoutError'
      ? new UpstreamError('timeout', `The engine did not answer within ${call.timeoutMs / 1000} s.`, { cause: e })
      : reason;
  }
  return asUpstreamError(e, started);
}

/** The engine's key replaced where an engine echoes it back in an error message. */
export function redactKey(text: string, apiKey: string | undefined): string {
  return apiKey && apiKey.length >= 4 ? text.split(apiKey).join('[redacted]') : text;
}

/**
 * An error status with the engine's message: JSON `{error:{message,param}}`, `{error:"..."}`,
 * `{message}`, `{detail}` (FastAPI: a string or a list of `{msg}`; `{detail:{message}}` as ElevenLabs sends), `{err_msg}`
 * (Deepgram), `{title,message}` (Cartesia), or the text itself.
 */
export function statusError(status: number, text: string, apiKey: string | undefined): UpstreamError {
  let message = text.slice(0, 2000).trim();
  let param: string | null = null;
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const err = parsed.error as { message?: unknown; param?: unknown } | string | undefined;
    const detail = parsed.detail as { message?: unknown } | { msg?: unknown }[] | string | undefined;
    if (typeof err === 'string') message = err;
    else if (err && typeof err.message === 'string') {
      message = err.message;
      if (typeof err.param === 'string') param = err.param;
    } else if (typeof parsed.message === 'string') message = parsed.message;
    else if (typeof parsed.err_msg === 'string') message = parsed.err_msg;
    else if (typeof detail === 'string') message = detail;
    // FastAPI's validation errors: a list of {loc, msg}.
    else if (Array.isArray(detail))
      message =
        detail
          .map((d) => (typeof d?.msg === 'string' ? d.msg : ''))
          .filter(Boolean)
          .join('; ') || message;
    else if (detail && typeof detail.message === 'string') message = detail.message;
  } catch {
    // not JSON: keep the text
  }
  message = redactKey(message, apiKey).slice(0, 500);
  return new UpstreamError('status', `The engine answered ${status}${message ? `: ${message}` : ''}`, { status, param, engineMessage: message });
}

export interface EngineRequest {
  method: 'GET' | 'POST' | 'DELETE';
  /** Appended to the target's URL (`/v1/listen?model=nova-3`). */
  path: string;
  headers?: Record<string, string>;
  /** JSON (serialised here), raw bytes, or a multipart form. */
  json?: unknown;
  body?: Buffer | string | FormData;
}

/**
 * One request to an engine; resolves at a 2xx answer's headers. Everything else rejects with an
 * UpstreamError (or the call's abort reason).
 */
export async function engineRequest(url: string, apiKeyForRedaction: string | undefined, req: EngineRequest, call: CallOptions): Promise<DispatchResponse> {
  const headers: Record<string, string> = { ...req.headers };
  let body: Buffer | string | null = null;
  if (req.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(req.json);
  } else if (req.body instanceof FormData) {
    // Encoded once here (the forms are clips of at most a few MB).
    const encoded = new Response(req.body);
    headers['content-type'] = encoded.headers.get('content-type')!;
    body = Buffer.from(await encoded.arrayBuffer());
  } else if (req.body !== undefined) body = req.body;
  const { origin, path } = dispatchTarget(`${url}${req.path}`);
  let res: DispatchResponse;
  try {
    res = await dispatchCall(httpDispatcher, { origin, path, method: req.method, headers, body, signal: call.signal, timeoutMs: call.timeoutMs });
  } catch (e) {
    throw engineFailure(e, call, false);
  }
  if (res.statusCode >= 300) throw statusError(res.statusCode, await errorText(res.body), apiKeyForRedaction);
  return res;
}

/**
 * The start of an error answer (at most ERROR_BODY_MAX_BYTES), for its message: the rest is
 * abandoned, and a failure while reading leaves what had arrived.
 */
export async function errorText(body: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Uint8Array[] = [];
  let bytes = 0;
  try {
    for await (const chunk of body) {
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes >= ERROR_BODY_MAX_BYTES) break; // leaving the loop aborts the request
    }
  } catch {
    // what arrived is the message
  }
  return Buffer.concat(parts).subarray(0, ERROR_BODY_MAX_BYTES).toString('utf8');
}

/**
 * A 2xx answer's body as JSON, read whole up to `maxBytes` (larger: the request is aborted and
 * the answer is an engine fault); anything not JSON is the engine breaking the protocol.
 */
export async function engineJson<T>(res: DispatchResponse, call: CallOptions, what: string, maxBytes = ANSWER_MAX_BYTES): Promise<T> {
  let text: string;
  try {
    text = await res.text(maxBytes);
  } catch (e) {
    throw engineFailure(e, call, true);
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError('protocol', `The engine answered ${what} with something that is not JSON.`);
  }
}

/** The body's chunks, with a failure mid-way as an UpstreamError (`broken` or `timeout`). */
export async function* engineBody(res: DispatchResponse, call: CallOptions): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of res.body) yield chunk;
  } catch (e) {
    throw engineFailure(e, call, true);
  }
}

/**
 * Reads and drops a 2xx answer whose content does not matter, so its connection goes back to the
 * pool; one longer than ANSWER_MAX_BYTES is abandoned instead (the connection closed).
 */
export async function drainAnswer(res: DispatchResponse, call: CallOptions): Promise<void> {
  let bytes = 0;
  for await (const chunk of engineBody(res, call)) {
    bytes += chunk.length;
    if (bytes > ANSWER_MAX_BYTES) return;
  }
}

/** DELETE {url}{path}; an engine that no longer has what it names (404) is as good as one that deleted it. */
export async function engineDelete(url: string, apiKey: string | undefined, path: string, headers: Record<string, string>, call: CallOptions): Promise<void> {
  try {
    await drainAnswer(await engineRequest(url, apiKey, { method: 'DELETE', path, headers }, call), call);
  } catch (e) {
    if (e instanceof UpstreamError && e.kind === 'status' && e.details.status === 404) return;
    throw e;
  }
}

/** GET {url}{path} answering 2xx means healthy. `apiKey`: cut out of the error should the engine echo it. */
export async function checkHttpHealth(
  url: string,
  path: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  apiKey?: string,
): Promise<{ ok: boolean; latencyMs: number; error?: string }> {
  const started = performance.now();
  try {
    const call = { signal, timeoutMs: 10_000 };
    await drainAnswer(await engineRequest(url, apiKey, { method: 'GET', path, headers }, call), call);
    return { ok: true, latencyMs: Math.round(performance.now() - started) };
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return { ok: false, latencyMs: Math.round(performance.now() - started), error: `GET ${path}: ${message}` };
  }
}
