// Where HTTP traffic meets the traces: a SERVER span from the first hook to the moment the
// response (or the WebSocket session) is closed, named by route pattern like the metrics,
// continuing the caller's `traceparent`. Registered only when tracing is on (app.ts).
//
// The span's context is made active twice: in onRequest (admission runs under it) and again
// in preHandler, because between the two the body is read on the socket's events, which are
// not guaranteed to carry the request's async context. Callback-style hooks are used for
// that: `done` runs the rest of the chain synchronously, inside the context.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_URL_PATH } from '@opentelemetry/semantic-conventions';
import { toServiceError } from '../errors.ts';
import { redactUrl } from '../redact-url.ts';
import type { GatewayTracing, RequestTrace } from './gateway-tracing.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span (only when tracing is on). */
    trace: RequestTrace | null;
    /** The error code the request was answered with, for its span. */
    traceErrorCode: string | null;
  }
}

/** The path without its query (where `api_key` and other secrets may be). */
const pathOf = (url: string): string => {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
};

function finish(tracing: GatewayTracing, request: FastifyRequest, reply: FastifyReply): void {
  const rt = request.trace;
  if (!rt) return;
  // An accepted WebSocket upgrade is hijacked and never writes an HTTP response of its own.
  const upgraded = request.headers.upgrade !== undefined && reply.sent && !reply.raw.headersSent;
  const status = upgraded ? 101 : reply.statusCode;
  const attributes: Record<string, string | number | boolean> = { [ATTR_HTTP_RESPONSE_STATUS_CODE]: status };
  if (request.modelId) attributes['svc.model'] = request.modelId;
  if (request.auth?.orgId) attributes['svc.org_id'] = request.auth.orgId;
  if (request.traceErrorCode) attributes['svc.error_code'] = request.traceErrorCode;
  // Closed before the response was complete: the client went away.
  const clientGone = !upgraded && !reply.raw.writableFinished;
  if (clientGone) attributes['svc.client_gone'] = true;
  if (status >= 500) attributes['error.type'] = request.traceErrorCode ?? String(status);
  tracing.endRequest(rt, { attributes, errorMessage: status >= 500 ? (request.traceErrorCode ?? `HTTP ${status}`) : undefined, clientGone });
}

export function registerTracingHooks(app: FastifyInstance, tracing: GatewayTracing): void {
  app.decorateRequest('trace', null);
  app.decorateRequest('traceErrorCode', null);

  app.addHook('onRequest', (request, reply, done) => {
    const route = request.is404 ? undefined : request.routeOptions.url;
    const attributes: Record<string, string> = {
      [ATTR_HTTP_REQUEST_METHOD]: request.method,
      [ATTR_URL_PATH]: redactUrl(pathOf(request.url)),
      'svc.request_id': request.id,
    };
    if (route) attributes[ATTR_HTTP_ROUTE] = route;
    const rt = tracing.startRequest(route ? `${request.method} ${route}` : request.method, request.headers, attributes);
    request.trace = rt;
    // 'close' comes after the last byte of a response, when the client goes away first, and
    // when an upgraded WebSocket's socket closes: the one moment every request reaches.
    reply.raw.once('close', () => finish(tracing, request, reply));
    tracing.run(rt.context, done);
  });

  app.addHook('preHandler', (request, _reply, done) => {
    const rt = request.trace;
    if (!rt) return done();
    tracing.bindAuth(request.auth, rt);
    tracing.run(rt.context, done);
  });

  app.addHook('onError', (request, _reply, error, done) => {
    request.traceErrorCode = toServiceError(error).code;
    done();
  });
}
