import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../context.ts';

export function registerModelRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Every active model with a healthy upstream, of all modalities: the same ids work on the
  // chat, speech and transcription routes, as on OpenAI's /v1/models (docs/api-conventions.md, "Models").
  // A key with a model list sees only the models it may use.
  app.get('/v1/models', async (request) => ({
    object: 'list',
    data: ctx.registry
      .all()
      .filter((m) => ctx.registry.isServing(m) && (request.auth.allowedModels === null || request.auth.allowedModels.has(m.id)))
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((m) => ({ id: m.id, object: 'model', created: Math.floor(m.createdAt.getTime() / 1000), owned_by: 'svc', modality: m.modality })),
  }));
}
