// Where HTTP traffic meets the request log: one row per keyed request, made when its response
// closes from what the request already carries (its id, key, route, model, status, timings);
// usage and cost come from its debits (RequestLog.observeCore). The response's 'close' comes
// after the last byte of an answer, when the client goes away first (Fastify's onResponse never
// runs then), and when an upgraded WebSocket's socket closes, so a session is one row too. Nothing
// here reads headers but the User-Agent, nor the URL (whose query may carry a key): the route
// is its pattern. Registered by buildGateway (gateway/app.ts) when the log is on.
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { SIGNED_SECRET_IN_TEXT } from '../../server/services/keys/client-secret-format.ts';
import type { GatewayContext } from '../context.ts';
import { toServiceError } from '../errors.ts';
import { CONTENT_MAX_CHARS, type RequestLog } from './request-log.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** false: the route's requests are not logged (the log's own reads). */
    requestLog?: false;
  }
  interface FastifyRequest {
    /** When the answer started to be sent (ms from arrival), for the request log; -1 until then. */
    logSentMs: number;
    /** The error the request was answered with, for the request log. */
    logError: unknown;
    /** The code of the error envelope the request was answered with. */
    logErrorCode: string | null;
    /** The answer's text, kept only for orgs that opted in. */
    logResponseText: string | null;
  }
}

export function registerRequestLogHooks(app: FastifyInstance, ctx: GatewayContext): void {
  const log = ctx.requestLog;
  if (!log) return;
  app.decorateRequest('logSentMs', -1);
  app.decorateRequest('logError', null);
  app.decorateRequest('logErrorCode', null);
  app.decorateRequest('logResponseText', null);

  // A session's turns name its row before it exists: the row's id is kept from the upgrade on.
  // Added to session routes only (after the gateway's onRequest hook has admitted the key).
  const sessionOpened: onRequestHookHandler = (request, _reply, done) => {
    if (request.auth) log.opened({ orgId: request.auth.orgId, requestId: request.id });
    done();
  };
  app.addHook('onRoute', (route) => {
    if (!route.config?.session) return;
    route.onRequest = [...(route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]), sessionOpened];
  });

  // Callback-style hooks: an async hook costs a promise per request.
  app.addHook('onError', (request, _reply, error, done) => {
    request.logError = error;
    done();
  });

  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.logSentMs < 0) {
      request.logSentMs = reply.elapsedTime;
      if (reply.statusCode >= 400 && typeof payload === 'string') request.logErrorCode = envelopeCode(payload);
      if (request.auth && log.keepsContent(request.auth.orgId)) request.logResponseText = textOf(payload, reply.getHeader('content-type'));
    }
    done();
  });

  // One listener function for every response (`this` is the response): no closure per request.
  function onClose(this: ServerResponse & { [REPLY]?: FastifyReply }): void {
    const reply = this[REPLY]!;
    if ((reply.request as FastifyRequest & { [DEFERRED]?: true })[DEFERRED]) return;
    finish(log!, reply.request, reply);
  }
  app.addHook('onRequest', (_request, reply, done) => {
    (reply.raw as ServerResponse & { [REPLY]?: FastifyReply })[REPLY] = reply;
    // `on`, not `once`: a response closes once, and once() wraps the listener anew per request.
    reply.raw.on('close', onClose);
    done();
  });
}

const REPLY = Symbol('svc request-log reply');
const DEFERRED = Symbol('svc request-log deferred');

/**
 * For a route whose session outlives its HTTP answer (a WebRTC call, POST /v1/realtime/calls):
 * its row is not written when the answer is sent but when the returned function is called (the
 * session's end), as a session's row, with the usage and turns gathered until then. Called
 * before the answer is sent; a no-op when the log is off.
 */
export function deferRequestLogRow(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply): () => void {
  const log = ctx.requestLog;
  if (!log) return () => {};
  (request as FastifyRequest & { [DEFERRED]?: true })[DEFERRED] = true;
  const started = performance.now() - reply.elapsedTime;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    finish(log, request, reply, performance.now() - started);
  };
}

/** A client that left before the whole answer was sent: nginx's 499 when no status had been sent. */
const CLIENT_GONE_STATUS = 499;

/** `sessionMs`: a deferred session's length (deferRequestLogRow); its row is a session's. */
function finish(log: RequestLog, request: FastifyRequest, reply: FastifyReply, sessionMs?: number): void {
  if (request.is404) return;
  // Read once: Fastify builds this object anew at every read.
  const route = request.routeOptions;
  if (route.config.requestLog === false) return;
  const refused = request.auth ? undefined : log.refusedAuth(request.logError);
  const orgId = request.auth?.orgId ?? refused?.orgId;
  if (orgId === undefined) return; // no key, or not a valid one: no org's log to write to
  // An accepted WebSocket upgrade is hijacked and never writes an HTTP answer of its own.
  const upgraded = request.headers.upgrade !== undefined && reply.sent && !reply.raw.headersSent;
  const totalMs = sessionMs ?? reply.elapsedTime;
  const clientGone = !upgraded && !reply.raw.writableFinished;
  const status = upgraded ? 101 : clientGone && !reply.raw.headersSent ? CLIENT_GONE_STATUS : reply.statusCode;
  let errorCode = status >= 400 ? (request.logErrorCode ?? (request.logError ? toServiceError(request.logError).code : null)) : null;
  if (clientGone) errorCode ??= 'client_gone';
  log.finish({
    orgId,
    requestId: request.id,
    apiKeyId: request.auth?.keyId ?? refused?.keyId ?? null,
    kind: (upgraded && route.config.session) || sessionMs !== undefined ? 'session' : 'http',
    method: request.method,
    route: route.url ?? 'unmatched',
    modelId: request.modelId || null,
    status,
    errorCode,
    userAgent: request.headers['user-agent'] ?? null,
    traceId: request.trace?.span.spanContext().traceId ?? null,
    ttfbMs: upgraded || sessionMs !== undefined || request.logSentMs < 0 ? null : request.logSentMs,
    totalMs,
    startedAt: Date.now() - totalMs,
    requestContent: log.keepsContent(orgId) ? textOf(request.body, request.headers['content-type']) : null,
    responseContent: request.logResponseText,
  });
}

/** The `code` of an error envelope (`{"error":{..., "code":"..."}}`); an escaped quote inside a message cannot match. */
function envelopeCode(payload: string): string | null {
  const at = payload.lastIndexOf('"code":"');
  if (at === -1) return null;
  const end = payload.indexOf('"', at + 8);
  return end === -1 ? null : payload.slice(at + 8, end);
}

/** The text of a JSON or text body (never audio or a form upload), cut short, with anything shaped like an API key, a client secret or an access token masked. */
export function textOf(body: unknown, contentType: unknown): string | null {
  if (body === null || body === undefined || typeof contentType !== 'string') return null;
  if (!/json|^text\//i.test(contentType)) return null;
  let text: string;
  if (typeof body === 'string') text = body;
  else if (Buffer.isBuffer(body)) text = body.toString('utf8', 0, Math.min(body.length, CONTENT_MAX_CHARS * 4));
  else if (typeof body === 'object') text = JSON.stringify(body);
  else return null;
  return text
    .slice(0, CONTENT_MAX_CHARS)
    .replace(/sk_svc_[A-Za-z0-9_-]+/g, 'sk_svc_[redacted]')
    .replace(SIGNED_SECRET_IN_TEXT, '$1[redacted]');
}
