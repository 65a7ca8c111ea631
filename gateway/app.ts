// Builds the public HTTP edge: request ids, logging without secrets, the admission hook of
// the gateway core, the routes, and the single error handler.
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { pino, type DestinationStream } from 'pino';
import { JoinedLines } from './joined-lines.ts';
import { newTimeOrderedId } from '../server/db/ids.ts';
import { ServiceError } from '../server/services/errors.ts';
import { missingKeyError, presentedKey, type RequestAuth } from './core/gateway-core.ts';
import type { Ticket } from './core/admission.ts';
import { BodyDeadlines, boundConnections } from './client-bounds.ts';
import { onResponseClose } from './client-gone.ts';
import type { GatewayContext } from './context.ts';
import { answerClientError, drainRequest, sendError, toServiceError } from './errors.ts';
import { vendorFieldsByPath } from './vendor-error-shape.ts';
import { registerAgentAuthRoutes } from './routes/agent-auth.ts';
import { registerChatCompletionRoutes } from './routes/chat-completions.ts';
import { registerResponsesRoutes } from './routes/responses.ts';
import { registerResponsesWebSocketRoute } from './routes/responses-websocket.ts';
import { ResponseCreator } from './llm/create-response.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { registerModelRoutes } from './routes/models.ts';
import { registerTtsRoutes } from './routes/tts.ts';
import { registerTranscriptionRoutes } from './routes/transcriptions.ts';
import { ELEVENLABS_ERROR_SHAPE, registerElevenLabsRoutes } from './routes/elevenlabs.ts';
import { registerSttWebSocketRoutes } from './routes/stt-websocket.ts';
import { registerSttTurnsWebSocketRoutes } from './routes/stt-turns-websocket.ts';
import { registerTtsWebSocketRoutes } from './routes/tts-websocket.ts';
import { registerElevenLabsWebSocketRoutes } from './routes/elevenlabs-websocket.ts';
import { registerDeepgramSpeakRoutes } from './routes/deepgram-speak.ts';
import { registerListenV2Routes } from './routes/listen-v2.ts';
import { DEEPGRAM_ERROR_SHAPE, registerListenRoutes } from './routes/listen.ts';
import { registerRealtimeRoutes } from './routes/realtime.ts';
import { registerPhoneRoutes } from './routes/phone.ts';
import { registerRealtimeCallRoutes } from './routes/realtime-calls.ts';
import { registerAccessTokenRoutes } from './routes/access-token.ts';
import { RealtimeCalls } from './realtime/realtime-calls.ts';
import { registerVoiceRoutes } from './routes/voices.ts';
import { registerBlobRoutes } from './routes/blobs.ts';
import { registerJobRoutes } from './routes/jobs.ts';
import { registerPronunciationDictRoutes } from './routes/pronunciation-dicts.ts';
import { registerLogRoutes } from './routes/logs.ts';
import { refuseWhileDraining } from './lifecycle.ts';
import { lazyRequestLoggers, writeAccessLine, type LazyRequestLogger } from './request-logger.ts';
import { redactUrl } from './redact-url.ts';
import { registerMetricsHooks, registerMetricsRoute } from './metrics/metrics-http.ts';
import { registerTracingHooks } from './tracing/tracing-http.ts';
import { registerRequestLogHooks } from './request-log/request-log-hooks.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Unauthenticated route (liveness, discovery, registration). */
    public?: boolean;
    /** Metered route: admitted only with a positive balance. */
    metered?: boolean;
    /** A WebSocket upgrade: the key may also come in the query or a subprotocol (presentedKey). */
    keyInQuery?: boolean;
    /** A streaming-session route (WebSocket): admitted by the session caps, not as a request in flight. */
    session?: boolean;
    /**
     * A WebSocket whose protocol may carry the key in its first message (ElevenLabs' `xi_api_key`):
     * an upgrade that presents none is let through unadmitted (`request.auth` unset), and the
     * route admits the key that message names (routes/tts-socket-route.ts). A wrong key presented
     * the usual way is still refused before the upgrade.
     */
    keyInFirstMessage?: boolean;
    /**
     * For clients that cannot send a key (a phone carrier's media stream, a browser's WebRTC
     * offer): reads the route's own credential (a phone token, a client secret) and answers the
     * hash of the key it was issued for, which is then admitted as if presented; throws a
     * ServiceError (401) for a wrong or expired credential. null: the request carries no such
     * credential, and its key is read as on any route (POST /v1/realtime/calls takes both).
     */
    credential?: (request: FastifyRequest) => Promise<{ keyHash: string } | null>;
  }
  interface FastifyRequest {
    auth: RequestAuth;
    /** A metered request's place in its key's requests in flight; released when its response closes. */
    ticket: Ticket | null;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

/**
 * One access-log line per answer, at its end (Fastify logs two: "incoming request" and
 * "request completed"): request id, method, redacted URL, client address, status, ms.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Through the parent of the request's logger (the same line as its child would write),
    // so that a request that logs nothing else never makes one (request-logger.ts).
    const log = (reply.log as unknown as LazyRequestLogger).parent;
    if (error) log.error({ reqId: request.id, req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else writeAccessLine(log, request, reply);
  }
}

/**
 * Standard output, written in batches: a line per request written at once would be a
 * syscall per request (5-20 us each on a loaded VM). Lines wait at most 100 ms, or until
 * 16 K characters are pending; what is left is written synchronously when the process exits
 * (also on a crash), so only a SIGKILL can lose the last 100 ms of lines. Each batch is written
 * from the event loop (pino's default), not handed to libuv's thread pool: that handover
 * cost ~3 % of maximum throughput on 2 cores (bench/ab-gateway.ts, two runs).
 */
function logDestination(): DestinationStream {
  const destination = pino.destination({ dest: 1, sync: true, minLength: 0 });
  const lines = new JoinedLines(destination, 16 * 1024);
  setInterval(() => lines.flush(), 100).unref();
  // pino flushes at exit only the destinations it writes asynchronously; without this the lines
  // of a shutdown ("shut down" included) were lost whenever the process exited within 100 ms.
  process.once('exit', () => lines.flushSync());
  return lines;
}

/** The gateway's pino options (exported for request-logger.unit.test.ts). */
export function gatewayLoggerOptions(level: string, stream: DestinationStream) {
  return {
    level,
    // No `redact` paths: nothing logs request headers (the only `req` serializer is this
    // one), and pino's redaction would copy every line's `req` to look for them.
    serializers: {
      req: (req: FastifyRequest) => ({ method: req.method, url: redactUrl(req.url), remoteAddress: req.ip }),
    },
    stream,
  };
}

/**
 * `tls`: serve HTTPS (HTTP/1.1) and WSS on the same listener with this PEM certificate and key
 * (SVC_TLS_CERT / SVC_TLS_KEY, read by the runtime).
 */
export async function buildGateway(ctx: GatewayContext, options: { logger?: boolean; tls?: { cert: Buffer; key: Buffer } } = {}): Promise<FastifyInstance> {
  // Typed as the plain HTTP instance either way: what the routes use of the server (upgrade
  // events, closing connections) is the same on node:https's, which extends node:tls's.
  const app = Fastify({
    https: options.tls ?? null,
    logger: options.logger === false ? false : gatewayLoggerOptions(ctx.config.logLevel, logDestination()),
    logController: new AccessLog(),
    childLoggerFactory: lazyRequestLoggers,
    bodyLimit: DEFAULT_BODY_LIMIT,
    requestIdHeader: false,
    // Time-ordered: the request log indexes rows by request id, and random ids put each row's
    // index entry on a page of its own (docs/performance.md, "Request logs").
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : newTimeOrderedId('req');
    },
    // No inactivity timeout on sockets: an answer may be silent up to the upstream deadline
    // (300 s) and must still reach the client. How long a request may take to arrive, and how many
    // connections a client may hold, is gateway/client-bounds.ts's.
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    // Router errors (an over-long or malformed path segment) come before any hook or route;
    // without this Fastify answers them in its own shape instead of the envelope.
    frameworkErrors: (err, request, reply) => sendError(request, reply.header('x-request-id', request.id), err, unroutedVendorFields(request)),
    // Requests the HTTP parser refuses never reach routing, and Fastify's own answer to them
    // is not the envelope. (Fastify calls this with the instance as `this`.)
    clientErrorHandler(this: FastifyInstance, err, socket) {
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') ctx.metrics.connectionDropped('headers_timeout');
      answerClientError(err, socket, this.log);
    },
    // Off: a closing gateway answers in the error envelope instead (refuseWhileDraining).
    return503OnClosing: false,
  });

  boundConnections(app.server, ctx.config.http, ctx.config.trustedProxies, ctx.metrics);
  const bodies = new BodyDeadlines(ctx.config.http, app.log, ctx.metrics);
  // Once every connection has ended: slow bodies are timed through a shutdown's grace period too.
  app.server.once('close', () => bodies.stop());

  app.decorateRequest('auth', null as unknown as RequestAuth);
  app.decorateRequest('ticket', null);
  registerMetricsHooks(app, ctx.metrics);
  registerRequestLogHooks(app, ctx);
  // Before the admission hook, so that its refusals are spans too.
  if (ctx.tracing) registerTracingHooks(app, ctx.tracing);

  // One hook for every request (each hook is a cost on every request): drain, request id,
  // then the gateway core's admission of keyed routes.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    refuseWhileDraining(ctx.lifecycle, reply);
    // No id, name or text holds a NUL (and PostgreSQL cannot store one): refused before anything reads the URL.
    if (request.url.includes('%00')) throw new ServiceError('invalid_request', 'The URL contains a NUL character (%00); no path or query value may hold one.');
    const routeConfig = request.routeOptions.config;
    if (routeConfig.public || request.is404) return bodies.watch(request);
    const key = (routeConfig.credential ? await routeConfig.credential(request) : null) ?? presentedKey(request, routeConfig.keyInQuery ?? false);
    if (!key) {
      if (routeConfig.keyInFirstMessage && request.headers.upgrade?.toLowerCase() === 'websocket') return bodies.watch(request);
      throw missingKeyError(routeConfig.keyInQuery ?? false);
    }
    request.auth = await ctx.core.admit(key, routeConfig.metered ?? false);
    // After an await: a body that came with its headers has been read by now, and is not watched.
    bodies.watch(request);
    if (routeConfig.metered && !routeConfig.session) {
      const ticket = ctx.admission.enterRequest(request.auth);
      request.ticket = ticket;
      onResponseClose(reply, ticket.release);
    }
  });

  app.setErrorHandler(async (err, request, reply) => {
    // A client that announced its length will finish sending soon: read the rest (bounded)
    // so it sees the 413 rather than a reset. An open-ended upload is answered at once.
    // An early answer must not leave the rest of the body to be read as the next request on
    // the connection. A client that announced its length gets it read and discarded (bounded:
    // any small body, and an oversize upload so that it sees the 413 rather than a reset);
    // otherwise the connection ends after the answer.
    if (!request.raw.complete) {
      // Refused before its body was read (no key, draining): the rest of it must still arrive in time.
      bodies.watch(request);
      const declared = Number(request.headers['content-length']);
      const drain = declared > 0 && (declared <= DEFAULT_BODY_LIMIT || (toServiceError(err).code === 'body_too_large' && declared <= MAX_DRAIN_BYTES));
      if (drain) await drainRequest(request.raw, MAX_DRAIN_BYTES);
      else reply.header('connection', 'close');
    }
    // A request no route took (its body refused before the not-found answer): no vendor scope's hook shapes it.
    return sendError(request, reply, err, request.is404 ? unroutedVendorFields(request) : undefined);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const otherMethods = (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter((method) => method !== request.method && routeExists(app, method, path));
    if (otherMethods.length > 0) {
      reply.header('allow', otherMethods.join(', '));
      return sendError(
        request,
        reply,
        new ServiceError('method_not_allowed', `Method ${request.method} is not allowed on ${path}; use ${otherMethods.join(' or ')}.`),
        unroutedVendorFields(request),
      );
    }
    return sendError(request, reply, new ServiceError('not_found', `Unknown route: ${request.method} ${path}.`), unroutedVendorFields(request));
  });

  registerHealthRoutes(app, ctx);
  registerMetricsRoute(app, ctx);
  registerModelRoutes(app, ctx);
  registerTtsRoutes(app, ctx);
  registerAccessTokenRoutes(app, ctx);
  registerPronunciationDictRoutes(app, ctx);
  registerLogRoutes(app, ctx);
  // One for POST /v1/responses and its WebSocket: one item store, one memory of chat-only upstreams.
  const responses = new ResponseCreator();
  await app.register((scope, _opts, done) => {
    registerChatCompletionRoutes(scope, ctx);
    registerResponsesRoutes(scope, ctx, responses);
    done();
  });
  await app.register((scope) => registerTranscriptionRoutes(scope, ctx));
  await registerElevenLabsRoutes(app, ctx);
  // WebRTC calls: answered by POST /v1/realtime/calls, joined by GET /v1/realtime?call_id=.
  const calls = new RealtimeCalls(ctx.config.webrtc.maxCalls);
  app.addHook('onClose', () => calls.endAll(1001, 'shutdown'));
  await app.register((scope) => registerRealtimeCallRoutes(scope, ctx, calls));
  // One scope for the WebSocket routes: @fastify/websocket is registered in it (by the STT routes).
  await app.register(async (scope) => {
    await registerSttWebSocketRoutes(scope, ctx);
    registerSttTurnsWebSocketRoutes(scope, ctx);
    registerTtsWebSocketRoutes(scope, ctx);
    await registerElevenLabsWebSocketRoutes(scope, ctx);
    await registerDeepgramSpeakRoutes(scope, ctx);
    await registerListenV2Routes(scope, ctx);
    await registerListenRoutes(scope, ctx);
    registerRealtimeRoutes(scope, ctx, calls);
    registerResponsesWebSocketRoute(scope, ctx, responses);
    registerPhoneRoutes(scope, ctx);
  });
  await app.register((scope) => registerAgentAuthRoutes(scope, ctx));
  // Voices, blobs and jobs share a scope: clone and blob upload take multipart and raw audio.
  await app.register(async (scope) => {
    await registerVoiceRoutes(scope, ctx);
    registerBlobRoutes(scope, ctx);
    registerJobRoutes(scope, ctx);
  });
  return app;
}

/** Whether a route answers `method` at `path`; a path the router cannot read as a route (`*` inside it) has none. */
/** Vendor APIs served under their own paths: their errors carry the vendor's fields even when no route of theirs was reached. */
const VENDOR_ERROR_SHAPES = [ELEVENLABS_ERROR_SHAPE, DEEPGRAM_ERROR_SHAPE];
const unroutedVendorFields = (request: FastifyRequest) => vendorFieldsByPath(VENDOR_ERROR_SHAPES, request.url);

function routeExists(app: FastifyInstance, method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string): boolean {
  try {
    return app.hasRoute({ method, url: path });
  } catch {
    return false;
  }
}
