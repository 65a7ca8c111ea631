import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../context.ts';
import { upstreamLabel } from '../metrics/gateway-metrics.ts';
import { registerOpenApiRoute } from '../openapi/openapi-document.ts';

export function registerHealthRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Liveness: the process answers. Unauthenticated, no database.
  app.get('/health', { config: { public: true } }, async () => ({ status: 'ok' }));

  // Readiness: the database answers and which models have a healthy upstream. Anyone may ask,
  // so upstreams are shown as their metrics label: no credentials, query or fragment, where an
  // operator may have put a token.
  app.get('/ready', { config: { public: true } }, async (_request, reply) => {
    let database: 'ok' | 'down' = 'ok';
    await ctx.db.hot.ping().catch(() => {
      database = 'down';
    });
    const models = ctx.registry.all().map((m) => ({
      id: m.id,
      modality: m.modality,
      serving: ctx.registry.isServing(m),
      upstreams: m.upstreams.map((u) => ({ url: upstreamLabel(u.url), health: ctx.registry.healthOf(u.id) })),
    }));
    return reply.code(database === 'ok' ? 200 : 503).send({ status: database === 'ok' ? 'ok' : 'unavailable', database, models });
  });

  // The API's description (gateway/openapi/): public and unmetered like these two.
  registerOpenApiRoute(app, ctx);
}
