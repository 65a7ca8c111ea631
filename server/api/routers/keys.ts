import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { formatUsd, parseUsdToMicros } from '../../money.ts';
import { createApiKey } from '../../services/keys/create-api-key.ts';
import { MAX_KEY_MODELS, SPEND_WINDOWS } from '../../services/keys/key-budget.ts';
import { findDashboardKeyId } from '../../services/keys/get-dashboard-key.ts';
import { listApiKeys } from '../../services/keys/list-api-keys.ts';
import { listAgentKeyOrigins } from '../../services/registrations/list-agent-keys.ts';
import { revokeApiKey } from '../../services/keys/revoke-api-key.ts';
import { updateApiKeyLimits } from '../../services/keys/update-api-key-limits.ts';
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

/** A USD amount as typed (at most 6 decimals): a key's spend limit. */
const spendLimitUsd = z
  .string()
  .trim()
  .regex(/^\d{1,7}(\.\d{1,6})?$/, { error: 'The spend limit must be an amount in USD, such as 25 or 2.50.', abort: true })
  .refine((v) => parseUsdToMicros(v) > 0n, 'The spend limit must be more than $0.');

const expiry = z.iso.datetime({ offset: true, error: 'The expiry must be a date and time.' });
const modelList = z.array(z.string().min(1).max(200)).min(1, 'Choose at least one model, or allow every model.').max(MAX_KEY_MODELS);

export const keysRouter = createTRPCRouter({
  /**
   * Each key with its own limit (rateLimitRpm, null = default) and the gateway default it falls
   * back to, and what made it: `dashboard` (the playground's key, made by the dashboard),
   * `agent` (issued to a claimed agent registration: `agent` says which and who authorised it)
   * or `api` (created on this page). Its budget and scope: the spend limit with this window's
   * spend (USD strings), the expiry (and whether it has passed), the models it may use.
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
    const now = Date.now();
    return keys.map((k) => {
      const agent = agents.get(k.id);
      return {
        ...k,
        defaultRateLimitRpm,
        budget: k.budget && {
          limitUsd: formatUsd(k.budget.limitMicros),
          window: k.budget.window,
          spentUsd: formatUsd(k.budget.spentMicros),
          resetsAt: k.budget.resetsAt.toISOString(),
        },
        expiresAt: iso(k.expiresAt),
        expired: k.expiresAt !== null && k.expiresAt.getTime() <= now,
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
   * A spend limit per day or month, an expiry and a model list only narrow what the key may do:
   * an owner sets them (docs/api-conventions.md, "Key budgets and scopes").
   */
  create: ownerProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, 'Give the key a name.').max(100, 'Name must be at most 100 characters.'),
        rateLimitRpm: rateLimitRpm.optional(),
        spendLimitUsd: spendLimitUsd.optional(),
        spendWindow: z.enum(SPEND_WINDOWS).optional(),
        expiresAt: expiry.optional(),
        models: modelList.optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      if (input.rateLimitRpm !== undefined) {
        // Read from the database, as platformAdminProcedure does: a revoked role is effective at once.
        const user = await getUser(ctx.db.prisma, ctx.session.user.id);
        if (!user?.isPlatformAdmin) throw new TRPCError({ code: 'FORBIDDEN', message: 'Only platform admins can set a rate limit on a key.' });
      }
      const created = await createApiKey(ctx.db.prisma, {
        orgId: ctx.org.id,
        name: input.name,
        rateLimitRpm: input.rateLimitRpm ?? null,
        spendLimitMicros: input.spendLimitUsd === undefined ? null : parseUsdToMicros(input.spendLimitUsd),
        spendWindow: input.spendWindow,
        expiresAt: input.expiresAt === undefined ? null : new Date(input.expiresAt),
        models: input.models ?? null,
      });
      return { id: created.id, key: created.key, prefix: created.prefix, name: created.name };
    }),

  /**
   * An owner changes a key's limits (docs/api-conventions.md, "Key budgets and scopes"): each
   * field left out stays, null removes it. Scoped to the caller's org: another org's key is "not
   * found", never changed; a revoked key is CONFLICT. Effective on the key's next request.
   */
  update: ownerProcedure
    .input(
      z.object({
        id: z.string().min(1).max(100),
        spendLimitUsd: spendLimitUsd.nullable().optional(),
        spendWindow: z.enum(SPEND_WINDOWS).optional(),
        expiresAt: expiry.nullable().optional(),
        models: modelList.nullable().optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const updated = await updateApiKeyLimits(ctx.db.prisma, {
        id: input.id,
        orgId: ctx.org.id,
        spendLimitMicros: input.spendLimitUsd == null ? input.spendLimitUsd : parseUsdToMicros(input.spendLimitUsd),
        spendWindow: input.spendWindow,
        expiresAt: input.expiresAt == null ? input.expiresAt : new Date(input.expiresAt),
        models: input.models,
      });
      return {
        id: updated.id,
        spendLimitUsd: updated.spendLimitMicros === null ? null : formatUsd(updated.spendLimitMicros),
        spendWindow: updated.spendWindow,
        expiresAt: iso(updated.expiresAt),
        models: updated.models,
      };
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
