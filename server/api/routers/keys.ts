import { z } from 'zod';
import { createApiKey } from '../../services/keys/create-api-key.js';
import { listApiKeys } from '../../services/keys/list-api-keys.js';
import { revokeApiKey } from '../../services/keys/revoke-api-key.js';
import { createTRPCRouter, orgProcedure } from '../trpc.js';

const iso = (d: Date | null) => d?.toISOString() ?? null;

export const keysRouter = createTRPCRouter({
  list: orgProcedure.query(async ({ ctx }) => {
    const keys = await listApiKeys(ctx.db.prisma, { orgId: ctx.org.id });
    return keys.map((k) => ({ ...k, createdAt: k.createdAt.toISOString(), lastUsedAt: iso(k.lastUsedAt), revokedAt: iso(k.revokedAt) }));
  }),

  /** Returns the full key: the only time it is ever shown. */
  create: orgProcedure
    .input(z.object({ name: z.string().trim().min(1, 'Give the key a name.').max(100, 'Name must be at most 100 characters.') }))
    .mutation(async ({ ctx, input }) => {
      const created = await createApiKey(ctx.db.prisma, { orgId: ctx.org.id, name: input.name });
      return { id: created.id, key: created.key, prefix: created.prefix, name: created.name };
    }),

  /** Scoped to the caller's org: another org's key id is "not found", never revoked. */
  revoke: orgProcedure.input(z.object({ id: z.string().min(1).max(100) })).mutation(async ({ ctx, input }) => {
    return revokeApiKey(ctx.db.prisma, { id: input.id, orgId: ctx.org.id });
  }),
});
