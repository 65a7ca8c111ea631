import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../context.ts';
import { registerOpenApiRoute } from '../openapi/openapi-document.ts';

export function registerHealthRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Liveness: the process answers. Unauthenticated, no database.
  app.get('/health', { config: { public: true } }, async () => ({ status: 'ok' }));

  // Readiness: the database answers and which models have a healthy upstream. Anyone may ask,
  // so an upstream is shown by its host alone: no credentials, query or fragment (where an
  // operator may have put a token), nor port or path (the operator's metrics label has them).
  app.get('/ready', { config: { public: true } }, async (_request, reply) => {
    let database: 'ok' | 'down' = 'ok';
    await ctx.db.hot.ping().catch(() => {
      database = 'down';
    });
    const models = ctx.registry.all().map((m) => ({
      id: m.id,
      modality: m.modality,
      serving: ctx.registry.isServing(m),
      upstreams: m.upstreams.map((u) => ({ host: upstreamHost(u.url), health: ctx.registry.healthOf(u.id), circuit: ctx.registry.circuits.stateOf(u.id) })),
    }));
    return reply.code(database === 'ok' ? 200 : 503).send({ status: database === 'ok' ? 'ok' : 'unavailable', database, models });
  });

  // The API's description (gateway/openapi/): public and unmetered like these two.
  registerOpenApiRoute(app, ctx);
}

/** An engine's host name or address; an in-process engine (`local:flite`) as it is named, which is no address. */
function upstreamHost(url: string): string {
  try {
    const parsed = new URL(url);
    return parsed.hostname || `${parsed.protocol}${parsed.pathname}`;
  } catch {
    return 'unknown';
  }
}
