// Pronunciation dictionaries (docs/pronunciation-dicts.md): list, create, get,
// update (rename and/or replace the entries) and soft-delete, scoped to the key's org.
// Metered like the other native keyed routes (the spec lists 402 for GET /pronunciation-dicts):
// admitted only with a positive balance, never debited.
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import { createDict } from '../../server/services/dicts/create-dict.ts';
import { deleteDict } from '../../server/services/dicts/delete-dict.ts';
import { parseCreateDict, parseUpdateDict } from '../../server/services/dicts/dict-input.ts';
import { getDict } from '../../server/services/dicts/get-dict.ts';
import { listDicts } from '../../server/services/dicts/list-dicts.ts';
import { updateDict } from '../../server/services/dicts/update-dict.ts';
import type { GatewayContext } from '../context.ts';

/**
 * Room for 10,000 entries of ~800 bytes (dict-input.ts): at every per-entry maximum a full
 * dictionary would be ~23 MB, which is more JSON to parse on the event loop than it is worth.
 */
export const DICT_BODY_LIMIT = 8 * 1024 * 1024;

const COLLECTION = '/pronunciation-dicts';
const ITEM = '/pronunciation-dicts/:id';

export function registerPronunciationDictRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const prisma = ctx.db.prisma;
  const metered = { config: { metered: true } };
  const dictId = (params: unknown) => (params as { id: string }).id;

  app.get(COLLECTION, metered, async (request) => ({ dicts: await listDicts(prisma, { orgId: request.auth.orgId }) }));

  app.post(COLLECTION, { ...metered, bodyLimit: DICT_BODY_LIMIT }, async (request, reply) => {
    const dict = parseCreateDict(request.body);
    return reply.code(201).send(await createDict(prisma, { orgId: request.auth.orgId, dict }));
  });

  app.get(ITEM, metered, async (request) => getDict(prisma, { orgId: request.auth.orgId, dictId: dictId(request.params) }));

  app.patch(ITEM, { ...metered, bodyLimit: DICT_BODY_LIMIT }, async (request) => {
    const update = parseUpdateDict(request.body);
    return updateDict(prisma, { orgId: request.auth.orgId, dictId: dictId(request.params), update });
  });

  app.delete(ITEM, metered, async (request) => deleteDict(prisma, { orgId: request.auth.orgId, dictId: dictId(request.params) }));

  // The app's not-found handler answers 405 only for static paths; a parametric one needs
  // its own, so that PUT /pronunciation-dicts/{id} says "use PATCH" rather than "unknown route".
  app.route({
    method: ['POST', 'PUT'],
    url: ITEM,
    config: { public: true },
    handler: async (request, reply) => {
      // Kept by the error handler, which answers the error.
      reply.header('allow', 'GET, PATCH, DELETE');
      throw new ServiceError('method_not_allowed', `Method ${request.method} is not allowed on ${COLLECTION}/{id}; use GET, PATCH or DELETE.`);
    },
  });
}
