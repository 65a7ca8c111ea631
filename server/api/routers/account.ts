import { TRPCError } from '@trpc/server';
import { loadConfig } from '../../config/env.js';
import { formatUsd } from '../../services/credits/money.js';
import { listApiKeys } from '../../services/keys/list-api-keys.js';
import { getUser } from '../../services/users/get-user.js';
import { createTRPCRouter, orgProcedure } from '../trpc.js';

export const accountRouter = createTRPCRouter({
  /** Who is signed in, for which org, with which rights. */
  me: orgProcedure.query(async ({ ctx }) => {
    const user = await getUser(ctx.db.prisma, ctx.session.user.id);
    if (!user) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'Sign in to continue.' });
    return {
      user: { id: user.id, email: user.email, name: user.name, isPlatformAdmin: user.isPlatformAdmin },
      org: { id: ctx.org.id, name: ctx.org.name },
      role: ctx.role,
      /** May do what only owners may (ownerProcedure): the page hides or explains those actions otherwise. */
      canManage: ctx.role === 'owner' || user.isPlatformAdmin,
    };
  }),

  /** The overview page: org, balance, a count of keys, and where the gateway answers. */
  overview: orgProcedure.query(async ({ ctx }) => {
    const keys = await listApiKeys(ctx.db.prisma, { orgId: ctx.org.id });
    return {
      org: { id: ctx.org.id, name: ctx.org.name },
      role: ctx.role,
      balanceUsd: formatUsd(ctx.org.balanceMicros),
      keys: { active: keys.filter((k) => k.status === 'active').length, total: keys.length },
      gatewayUrl: loadConfig().publicBaseUrl,
    };
  }),
});
