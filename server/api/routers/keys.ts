import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { createApiKey } from '../../services/keys/create-api-key.ts';
import { findDashboardKeyId } from '../../services/keys/get-dashboard-key.ts';
import { listApiKeys } from '../../services/keys/list-api-keys.ts';
import { listAgentKeyOrigins } from '../../services/registrations/list-agent-keys.ts';
import { revokeApiKey } from '../../services/keys/revoke-api-key.ts';
import { MAX_KEY_RATE_LIMIT_RPM, setKeyRateLimit } from '../../services/keys/set-key-rate-limit.ts';
import { getUser } from '../../services/users/get-user.ts';
import { createTRPCRouter, orgProcedure, ownerProcedure, platformAdminProcedure } from '../trpc.ts';

const iso = (d: Date | null) => d?.toISOString() ?? null;

const RPM_RANGE = `from 1 to ${MAX_KEY_RATE_LIMIT_RPM.toLocaleString('en')}`;
/** A key's own limit in requests per minute; null puts the key back on the gateway default. */
const rateLimitRpm = z
  .number({ error: `The rate limit must be a whole number of requests per minute ${RPM_RANGE}.` })
  .int(`The rate limit must be a whole number of requests per minute ${RPM_RANGE}.`)
  .min(1, 'The rate limit must be at least 1 request per minute.')
  .max(MAX_KEY_RATE_LIMIT_RPM, `The rate limit can be at most ${MAX_KEY_RATE_LIMIT_RPM.toLocaleString('en')} requests per minute.`)
  .nullable();

export const keysRouter = createTRPCRouter({
  /**
   * Each key with its own limit (rateLimitRpm, null = default) and the gateway default it falls
   * back to, and what made it: `dashboard` (the playground's key, made by the dashboard),
   * `agent` (issued to a claimed agent registration: `agent` says which and who authorised it)
   * or `api` (created on this page).
   */
  list: orgProcedure.query(async ({ ctx }) => {
    const keys = await listApiKeys(ctx.db.prisma, { orgId: ctx.org.id });
    const [dashboardKeyId, agents] = await Promise.all([
      findDashboardKeyId(ctx.db.prisma, ctx.org.id),
      listAgentKeyOrigins(
        ctx.db.prisma,
        keys.map((k) => k.id),
      ),
    ]);
    const defaultRateLimitRpm = loadConfig().defaultRpm;
    return keys.map((k) => {
      const agent = agents.get(k.id);
      return {
        ...k,
        defaultRateLimitRpm,
        createdAt: k.createdAt.toISOString(),
        lastUsedAt: iso(k.lastUsedAt),
        revokedAt: iso(k.revokedAt),
        origin: k.id === dashboardKeyId ? ('dashboard' as const) : agent ? ('agent' as const) : ('api' as const),
        agent: agent ? { ...agent, confirmedAt: iso(agent.confirmedAt) } : null,
      };
    });
  }),

  /**
   * Returns the full key: the only time it is ever shown. rateLimitRpm (platform admins only)
   * gives the key its own limit from the start; anyone else gets FORBIDDEN for passing it.
   */
  create: ownerProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, 'Give the key a name.').max(100, 'Name must be at most 100 characters.'),
        rateLimitRpm: rateLimitRpm.optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (input.rateLimitRpm !== undefined) {
        // Read from the database, as platformAdminProcedure does: a revoked role is effective at once.
        const user = await getUser(ctx.db.prisma, ctx.session.user.id);
        if (!user?.isPlatformAdmin) throw new TRPCError({ code: 'FORBIDDEN', message: 'Only platform admins can set a rate limit on a key.' });
      }
      const created = await createApiKey(ctx.db.prisma, { orgId: ctx.org.id, name: input.name, rateLimitRpm: input.rateLimitRpm ?? null });
      return { id: created.id, key: created.key, prefix: created.prefix, name: created.name };
    }),

  /** Scoped to the caller's org: another org's key id is "not found", never revoked. */
  revoke: ownerProcedure.input(z.object({ id: z.string().min(1).max(100) })).mutation(async ({ ctx, input }) => {
    return revokeApiKey(ctx.db.prisma, { id: input.id, orgId: ctx.org.id });
  }),

  /**
   * Platform admins: a key's own rate limit (rpm null = back to the gateway default). Any
   * org's key by id, since operators manage the instance. Effective on the key's next request.
   */
  setRateLimit: platformAdminProcedure.input(z.object({ id: z.string().min(1).max(100), rpm: rateLimitRpm })).mutation(async ({ ctx, input }) => {
    return setKeyRateLimit(ctx.db.prisma, { id: input.id, rpm: input.rpm });
  }),
});
