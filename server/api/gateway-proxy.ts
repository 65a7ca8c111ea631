// The dashboard's way to the gateway for what needs the engines (playground synthesis and
// transcription, clone uploads, profile preparation, job polling, clip playback): a signed-in
// browser calls /api/gateway/<path>, and the dashboard server forwards an ALLOWLIST of gateway
// routes with the org's dashboard key (server/services/keys/get-dashboard-key.ts). Bodies stream
// both ways (uploads up to 25 MB); the gateway's status, error envelope and x-svc-* headers come
// back unchanged, so the pages see exactly what an API client would.
//
// Used by app/api/gateway/[...path]/route.ts; kept free of Next so it can be tested against a
// real gateway.
import type { Config } from '../config/env.js';
import { ServiceError } from '../services/errors.js';
import { envelope } from '../../gateway/errors.js';

/** The gateway's own cap per upload is 25 MB; multipart framing and form fields need a little more. */
export const MAX_PROXY_BODY_BYTES = 26 * 1024 * 1024;

const ID = /^[A-Za-z0-9_-]{1,100}$/;

interface AllowedRoute {
  method: 'GET' | 'POST';
  /** Path segments; null matches one id segment. */
  segments: readonly (string | null)[];
}

export const ALLOWED_ROUTES: readonly AllowedRoute[] = [
  { method: 'POST', segments: ['tts', 'bytes'] },
  { method: 'POST', segments: ['v1', 'audio', 'transcriptions'] },
  { method: 'POST', segments: ['voices', 'clone'] },
  { method: 'POST', segments: ['voices', null, 'profiles'] },
  { method: 'GET', segments: ['jobs', null] },
  { method: 'GET', segments: ['blobs', null, 'content'] },
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

/** Where the dashboard server reaches the gateway: loopback when the gateway listens there, else its public URL. */
export function gatewayInternalUrl(config: Pick<Config, 'gatewayHost' | 'gatewayPort' | 'publicBaseUrl'>): string {
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
    throw new ServiceError('method_not_allowed', `Use ${matches.map((r) => r.method).join(' or ')} on this route.`, null, { allow: matches.map((r) => r.method).join(', ') });
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
    throw new ServiceError('upstream_unavailable', `The gateway did not answer (${(e as Error).message}). Is it running?`);
  }

  // Answers are served from the dashboard's origin: whatever a gateway answer holds (a stored
  // blob, say) must never run as a page here.
  const out = new Headers({ 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'; sandbox" });
  upstream.headers.forEach((value, name) => {
    if (FORWARDED_RESPONSE_HEADERS.test(name)) out.set(name, value);
  });
  return new Response(upstream.body, { status: upstream.status, headers: out });
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

function errorResponse(error: ServiceError): Response {
  const { status, body } = envelope(error);
  const headers = new Headers({ 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...error.headers });
  return new Response(JSON.stringify(body), { status, headers });
}
