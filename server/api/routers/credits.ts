import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import { grantCredits } from '../../services/credits/grant-credits.ts';
import { listLedger } from '../../services/credits/list-ledger.ts';
import { listOrgBalances } from '../../services/credits/list-org-balances.ts';
import { formatUsd, parseUsdToMicros } from '../../money.ts';
import { createTRPCRouter, orgProcedure, platformAdminProcedure } from '../trpc.ts';

export const LEDGER_PAGE_SIZE = 20;

export const creditsRouter = createTRPCRouter({
  /** The org's balance and one page of its ledger, newest first. */
  ledger: orgProcedure
    .input(z.object({ cursor: z.string().max(100).nullish(), limit: z.number().int().min(1).max(100).default(LEDGER_PAGE_SIZE) }))
    .query(async ({ ctx, input }) => {
      const page = await listLedger(ctx.db.prisma, { orgId: ctx.org.id, cursor: input.cursor, limit: input.limit });
      return {
        balanceUsd: formatUsd(ctx.org.balanceMicros),
        total: page.total,
        nextCursor: page.nextCursor,
        entries: page.entries.map((e) => ({
          id: e.id,
          kind: e.kind,
          amountUsd: formatUsd(e.amountMicros),
          balanceAfterUsd: formatUsd(e.balanceAfterMicros),
          description: e.description,
          createdAt: e.createdAt.toISOString(),
        })),
      };
    }),

  /** Platform admins: orgs to grant credit to. */
  orgs: platformAdminProcedure.input(z.object({ query: z.string().max(200).optional() })).query(async ({ ctx, input }) => {
    const orgs = await listOrgBalances(ctx.db.prisma, { query: input.query, limit: 50 });
    return orgs.map((o) => ({ id: o.id, name: o.name, isTrial: o.isTrial, balanceUsd: formatUsd(o.balanceMicros) }));
  }),

  /**
   * Platform admins: add credit to any org. A negative amount (removing credit) is taken only as an
   * explicit adjustment (`adjustment: true`, which the Credits page sends after a confirmation), so a
   * stray minus in a grant box never puts an org below zero.
   */
  grant: platformAdminProcedure
    .input(
      z.object({
        orgId: z.string().min(1).max(100),
        amountUsd: z.string().max(40),
        description: z.string().trim().max(200, 'Note must be at most 200 characters.').optional(),
        adjustment: z.boolean().optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      let amountMicros: bigint;
      try {
        amountMicros = parseUsdToMicros(input.amountUsd);
      } catch {
        throw new TRPCError({ code: 'BAD_REQUEST', message: 'Enter an amount in USD with at most 6 decimals, e.g. 10 or 2.50.' });
      }
      if (amountMicros === 0n) throw new TRPCError({ code: 'BAD_REQUEST', message: 'The amount must not be zero.' });
      if (amountMicros < 0n && !input.adjustment) {
        throw new TRPCError({
          code: 'BAD_REQUEST',
          message: 'Enter an amount above zero. To remove credit, use "Remove credit" on the Credits page.',
        });
      }
      const note = input.description || (amountMicros > 0n ? 'credit grant' : 'credit adjustment');
      const result = await grantCredits(ctx.db, { orgId: input.orgId, amountMicros, description: `${note} (by ${ctx.user.email})` });
      return { orgId: result.orgId, balanceUsd: formatUsd(result.balanceMicros) };
    }),
});
