// The dashboard's way to the gateway for what needs the engines (playground chat, synthesis and
// transcription, clone uploads, profile preparation, job polling, clip and preview playback): a signed-in
// browser calls /api/gateway/<path>, and the dashboard server forwards an ALLOWLIST of gateway
// routes with the org's dashboard key (server/services/keys/get-dashboard-key.ts). Bodies stream
// both ways (uploads up to 25 MB); the gateway's status, error envelope and x-svc-* headers come
// back unchanged, so the pages see exactly what an API client would. tRPC procedures whose work
// is the engines' (the voice import) call the gateway the same way, with getFromGateway.
//
// Used by app/api/gateway/[...path]/route.ts; kept free of Next so it can be tested against a
// real gateway.
import type { Config } from '../config/env.ts';
import { ServiceError } from '../services/errors.ts';
import { envelope, errorHeaders, serviceErrorOf } from '../error-envelope.ts';

/** The gateway's own cap per upload is 25 MB; multipart framing and form fields need a little more. */
export const MAX_PROXY_BODY_BYTES = 26 * 1024 * 1024;

const ID = /^[A-Za-z0-9_-]{1,100}$/;

interface AllowedRoute {
  method: 'GET' | 'POST';
  /** Path segments; null matches one id segment. */
  segments: readonly (string | null)[];
  /** Answered in byte ranges when asked (Range: bytes=...): audio players seek with them. */
  ranges?: boolean;
}

export const ALLOWED_ROUTES: readonly AllowedRoute[] = [
  { method: 'POST', segments: ['tts', 'bytes'] },
  { method: 'POST', segments: ['v1', 'chat', 'completions'] },
  { method: 'POST', segments: ['v1', 'audio', 'transcriptions'] },
  { method: 'POST', segments: ['voices', 'clone'] },
  { method: 'POST', segments: ['voices', null, 'profiles'] },
  { method: 'GET', segments: ['jobs', null] },
  { method: 'GET', segments: ['blobs', null, 'content'], ranges: true },
  // A voice's preview: free, heard at any balance (the Play buttons of the voices pages).
  { method: 'GET', segments: ['voices', null, 'preview'], ranges: true },
];

// Request headers the gateway needs; never cookies (the dashboard session stays here) and never
// the browser's Authorization.
const FORWARDED_REQUEST_HEADERS = ['content-type', 'content-length', 'accept'];
const FORWARDED_RESPONSE_HEADERS = /^(content-type|content-length|content-disposition|retry-after|x-request-id|x-svc-.*|x-ratelimit-.*)$/i;

export interface GatewayProxyDeps {
  gatewayUrl: string;
  /** The org the signed-in user acts for; null when there is no session (or no org). */
  resolveOrg(request: Request): Promise<{ orgId: string } | null>;
  /** The org's dashboard key (plaintext); never logged. */
  keyFor(orgId: string): Promise<string>;
  fetch?: typeof fetch;
}

/**
 * Where the dashboard server reaches the gateway: loopback when the gateway listens there, else
 * its public URL. A gateway serving TLS (SVC_TLS_CERT) is reached at its public URL, the name its
 * certificate is issued for (127.0.0.1 seldom is one), and the certificate is verified as any
 * client would: a private or self-signed one needs NODE_EXTRA_CA_CERTS in the dashboard's environment.
 */
export function gatewayInternalUrl(config: Pick<Config, 'gatewayHost' | 'gatewayPort' | 'publicBaseUrl'> & Partial<Pick<Config, 'tls'>>): string {
  if (config.tls) return config.publicBaseUrl;
  const host = config.gatewayHost.trim();
  const local = ['0.0.0.0', '::', '[::]', '127.0.0.1', 'localhost', '::1', '[::1]', ''].includes(host);
  return local ? `http://127.0.0.1:${config.gatewayPort}` : config.publicBaseUrl;
}

export async function proxyToGateway(request: Request, path: readonly string[], deps: GatewayProxyDeps): Promise<Response> {
  try {
    return await forward(request, path, deps);
  } catch (e) {
    if (e instanceof ServiceError) return errorResponse(e);
    throw e;
  }
}

/**
 * A GET the dashboard server makes itself, as the org whose dashboard key it is given: the
 * gateway's JSON answer, or its error envelope as the ServiceError it stands for (so a tRPC
 * procedure fails as if a service had thrown it).
 */
export async function getFromGateway(
  deps: { gatewayUrl: string; key: string; fetch?: typeof fetch },
  path: readonly string[],
  query: Record<string, string>,
): Promise<unknown> {
  const url = `${deps.gatewayUrl.replace(/\/+$/, '')}/${path.map(encodeURIComponent).join('/')}?${new URLSearchParams(query)}`;
  let answer: Response;
  try {
    answer = await (deps.fetch ?? fetch)(url, { headers: { authorization: `Bearer ${deps.key}`, accept: 'application/json' }, redirect: 'manual' });
  } catch (e) {
    throw gatewayUnreachable(e);
  }
  const body: unknown = await answer.json().catch(() => null);
  if (answer.ok && body !== null) return body;
  throw serviceErrorOf(answer.status, body, answer.headers.get('retry-after'));
}

/**
 * A JSON POST the dashboard server makes itself with the org's dashboard key (the Talk page's
 * client secret): the gateway's JSON answer, or its error envelope as a ServiceError.
 */
export async function postToGateway(deps: { gatewayUrl: string; key: string; fetch?: typeof fetch }, path: readonly string[], body: unknown): Promise<unknown> {
  const url = `${deps.gatewayUrl.replace(/\/+$/, '')}/${path.map(encodeURIComponent).join('/')}`;
  let answer: Response;
  try {
    answer = await (deps.fetch ?? fetch)(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${deps.key}`, accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
    });
  } catch (e) {
    throw gatewayUnreachable(e);
  }
  const json: unknown = await answer.json().catch(() => null);
  if (answer.ok && json !== null) return json;
  throw serviceErrorOf(answer.status, json, answer.headers.get('retry-after'));
}

const gatewayUnreachable = (e: unknown) => new ServiceError('upstream_unavailable', `The gateway did not answer (${(e as Error).message}). Is it running?`);

async function forward(request: Request, path: readonly string[], deps: GatewayProxyDeps): Promise<Response> {
  // A cross-site page must not spend the org's credit through the user's cookie. The session
  // cookie is SameSite=Lax already; this refuses any cross-site request that still carries it.
  const site = request.headers.get('sec-fetch-site');
  const origin = request.headers.get('origin');
  if ((site && site !== 'same-origin' && site !== 'none') || (origin && !sameOrigin(origin, request))) {
    throw new ServiceError('forbidden', 'Cross-site requests to the dashboard gateway proxy are refused.');
  }

  const org = await deps.resolveOrg(request);
  if (!org) throw new ServiceError('invalid_api_key', 'Sign in to the dashboard to continue.');

  const method = request.method.toUpperCase();
  const matches = ALLOWED_ROUTES.filter((r) => matchesPath(r, path));
  if (matches.length === 0) throw new ServiceError('not_found', 'The dashboard does not forward this gateway route.');
  if (!matches.some((r) => r.method === method)) {
    const allowed = matches.map((r) => r.method);
    return errorResponse(new ServiceError('method_not_allowed', `Use ${allowed.join(' or ')} on this route.`), { allow: allowed.join(', ') });
  }

  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > MAX_PROXY_BODY_BYTES) throw tooLarge();

  const headers = new Headers();
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = request.headers.get(name);
    if (value !== null) headers.set(name, value);
  }
  headers.set('authorization', `Bearer ${await deps.keyFor(org.orgId)}`);

  const search = new URL(request.url).search;
  const target = `${deps.gatewayUrl.replace(/\/+$/, '')}/${path.map(encodeURIComponent).join('/')}${search}`;
  const limited = method === 'POST' && request.body ? limitBytes(request.body, MAX_PROXY_BODY_BYTES) : null;
  let upstream: Response;
  try {
    upstream = await (deps.fetch ?? fetch)(target, {
      method,
      headers,
      body: limited?.stream ?? null,
      // Streams the upload instead of buffering it; required by fetch for a stream body.
      ...(limited ? { duplex: 'half' } : {}),
      // The browser going away cancels the gateway request (and so the engine work).
      signal: request.signal,
      redirect: 'manual',
    } as RequestInit);
  } catch (e) {
    if (limited?.exceeded()) throw tooLarge();
    if (request.signal.aborted) return new Response(null, { status: 499 });
    throw gatewayUnreachable(e);
  }

  // Answers are served from the dashboard's origin: whatever a gateway answer holds (a stored
  // blob, say) must never run as a page here. no-transform: Next's compression would otherwise
  // hold a streamed chat answer back in its gzip buffer instead of passing each event on.
  const out = new Headers({
    'cache-control': 'no-store, no-transform',
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
  });
  upstream.headers.forEach((value, name) => {
    if (FORWARDED_RESPONSE_HEADERS.test(name)) out.set(name, value);
  });
  if (upstream.status === 200 && matches.some((r) => r.method === method && r.ranges)) return withRanges(request, upstream, out);
  return new Response(upstream.body, { status: upstream.status, headers: out });
}

/**
 * A whole answer of known length as the browser asked for it: 200 with Content-Length and
 * Accept-Ranges, or 206 with the one byte range of a `Range: bytes=` header (what <audio>
 * sends to learn the length and to seek; without it the source recording showed 0:00 / 0:00
 * and could not seek). The gateway sends the whole blob; the proxy skips to the range and
 * stops reading after it. A range past the end is 416; a header it does not understand (or
 * several ranges) gets the whole answer, as RFC 9110 allows.
 *
 * Next's route handlers drop Content-Length on the way out (next/dist/server/send-response.js,
 * FORBIDDEN_HEADERS), so in the browser the length arrives in Content-Range: the player's
 * first request is always `Range: bytes=0-`.
 */
function withRanges(request: Request, upstream: Response, headers: Headers): Response {
  const size = Number(upstream.headers.get('content-length'));
  if (!upstream.body || !Number.isSafeInteger(size) || size < 0) return new Response(upstream.body, { status: upstream.status, headers });
  headers.set('accept-ranges', 'bytes');
  const range = parseByteRange(request.headers.get('range'), size);
  if (range === 'unsatisfiable') {
    void upstream.body.cancel().catch(() => undefined);
    headers.delete('content-type');
    headers.set('content-range', `bytes */${size}`);
    headers.set('content-length', '0');
    return new Response(null, { status: 416, headers });
  }
  if (range === null) {
    headers.set('content-length', String(size));
    return new Response(upstream.body, { status: 200, headers });
  }
  headers.set('content-range', `bytes ${range.start}-${range.end}/${size}`);
  headers.set('content-length', String(range.end - range.start + 1));
  return new Response(sliceBytes(upstream.body, range.start, range.end), { status: 206, headers });
}

/**
 * One range of `Range: bytes=a-b`, `bytes=a-` or `bytes=-n` (the last n bytes), clamped to the
 * size; null for no header, one this does not take (other units, several ranges, malformed),
 * or an empty answer; 'unsatisfiable' for a range that starts past the end.
 */
export function parseByteRange(header: string | null, size: number): { start: number; end: number } | 'unsatisfiable' | null {
  const m = header === null ? null : /^bytes=(\d{0,15})-(\d{0,15})$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '') || size === 0) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    return suffix === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  return end < start ? null : { start, end };
}

/** Bytes start..end (inclusive) of a stream; the source is cancelled once they have passed. */
function sliceBytes(body: ReadableStream<Uint8Array>, start: number, end: number): ReadableStream<Uint8Array> {
  let offset = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const from = Math.max(start - offset, 0);
        const to = Math.min(end + 1 - offset, chunk.byteLength);
        offset += chunk.byteLength;
        if (from < to) controller.enqueue(chunk.subarray(from, to));
        // Past the range: ending the output cancels the rest of the gateway's answer.
        if (offset > end) controller.terminate();
      },
    }),
  );
}

function matchesPath(route: AllowedRoute, path: readonly string[]): boolean {
  return route.segments.length === path.length && route.segments.every((s, i) => (s === null ? ID.test(path[i]!) : s === path[i]));
}

function sameOrigin(origin: string, request: Request): boolean {
  try {
    const host = request.headers.get('x-forwarded-host') ?? request.headers.get('host') ?? new URL(request.url).host;
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** Counts bytes as they pass and fails the stream past `max`, whatever Content-Length said. */
function limitBytes(body: ReadableStream<Uint8Array>, max: number): { stream: ReadableStream<Uint8Array>; exceeded: () => boolean } {
  let seen = 0;
  let over = false;
  const stream = body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > max) {
          over = true;
          controller.error(new Error('body too large'));
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
  return { stream, exceeded: () => over };
}

const tooLarge = () => new ServiceError('body_too_large', 'The upload is larger than 25 MB.', 'file');

function errorResponse(error: ServiceError, extraHeaders: Record<string, string> = {}): Response {
  const { status, body } = envelope(error);
  const headers = new Headers({ 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...errorHeaders(error), ...extraHeaders });
  return new Response(JSON.stringify(body), { status, headers });
}
