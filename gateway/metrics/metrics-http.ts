// Where HTTP traffic meets the metrics: one onResponse hook counts every answer by route
// pattern (never the raw URL: ids in paths would make a series per request), sendStream
// counts streaming responses while they are open, and GET /metrics serves the registry,
// either on the public port behind SVC_METRICS_TOKEN or on a separate listener
// (SVC_METRICS_PORT, loopback by default). See docs/operations.md, "Metrics".
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { GatewayMetrics } from './gateway-metrics.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The model the request resolved to, for metrics ('' until a route resolves one). */
    modelId: string;
  }
}

/** The route pattern of a request, or 'unmatched' for 404s (unbounded raw paths never become labels). */
export const routeLabel = (request: FastifyRequest): string => (request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched'));

export function registerMetricsHooks(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.decorateRequest('modelId', '');
  // Callback style: an async hook costs a promise per request.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.request(routeLabel(request), request.method, reply.statusCode, request.modelId, reply.elapsedTime / 1000);
    done();
  });
}

/**
 * Sends a streamed body, counted in the open-streams gauge until its connection closes.
 * Streams are counted here, where routes send them, rather than by an onSend hook that
 * would run on every response.
 */
export function sendStream(reply: FastifyReply, metrics: GatewayMetrics, chunks: AsyncIterable<string | Buffer | Uint8Array>): FastifyReply {
  reply.raw.once('close', metrics.streamOpened(routeLabel(reply.request)));
  return reply.send(Readable.from(chunks));
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time check of `Authorization: Bearer <token>` (digests have equal length whatever was sent). */
export function hasMetricsToken(authorization: string | undefined, token: string): boolean {
  const presented = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? '')?.[1]?.trim() ?? '';
  return timingSafeEqual(digest(presented), digest(token));
}

/** GET /metrics on the public port, only when a token is configured (otherwise the path is a 404). */
export function registerMetricsRoute(app: FastifyInstance, ctx: GatewayContext): void {
  const token = ctx.config.metricsToken;
  if (!token) return;
  app.get('/metrics', { config: { public: true } }, async (request, reply) => {
    if (!hasMetricsToken(request.headers.authorization, token)) {
      throw new ServiceError(
        'invalid_api_key',
        'GET /metrics needs the metrics token (SVC_METRICS_TOKEN) as "Authorization: Bearer <token>"; API keys are not accepted here.',
      );
    }
    const { contentType, body } = await ctx.metrics.render();
    return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
  });
}

/**
 * The separate metrics listener: plain node:http, nothing else on it. Requires the token
 * too when one is configured. Resolves once listening.
 */
export async function startMetricsServer(metrics: GatewayMetrics, options: { host: string; port: number; token: string | undefined }): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: scrape GET /metrics\n');
      return;
    }
    if (options.token && !hasMetricsToken(req.headers.authorization, options.token)) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end('metrics token required\n');
      return;
    }
    metrics.render().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(req.method === 'HEAD' ? undefined : body),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n'),
    );
  });
  // Scrapers keep connections alive; a shutdown must not wait for them.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
