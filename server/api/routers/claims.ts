// The verification page of agent registration ({dashboard_url}/claim): the signed-in user
// enters the 6-digit code the agent showed them, sees what they authorise, and confirms or
// denies. Every call takes the code again (it is the capability; nothing is kept between
// calls); wrong codes count against the per-code, per-user and per-IP limits
// (server/services/registrations/describe-claim.ts).
import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { getUser } from '../../services/users/get-user.ts';
import { listUserOrgs } from '../../services/users/list-user-orgs.ts';
import { confirmClaim } from '../../services/registrations/confirm-claim.ts';
import { denyClaim } from '../../services/registrations/deny-claim.ts';
import { describeClaim, type CodeEntry } from '../../services/registrations/describe-claim.ts';
import { sharedGuessThrottle } from '../../services/registrations/guess-throttle.ts';
import { registrationSettings, type RegistrationDeps } from '../../services/registrations/registration-rules.ts';
import { createTRPCRouter, orgProcedure, type TrpcContext, type SessionUser } from '../trpc.ts';

const CodeInput = z.object({
  code: z.string({ error: 'Enter the 6-digit code the agent showed you.' }).max(32, 'Enter the 6-digit code the agent showed you.'),
});

const ConfirmInput = CodeInput.extend({
  /** The org that pays and gets the key: one the user owns; the org they act for when left out. */
  orgId: z.string().min(1).max(100).optional(),
});

/**
 * The orgs the user may authorise an agent for (it issues a key there): those they own, and, for a
 * platform admin, every org they belong to (as canManageOrg allows). Oldest membership first.
 */
async function payingOrgs(ctx: TrpcContext & { session: { user: SessionUser } }): Promise<Array<{ id: string; name: string }>> {
  const [orgs, user] = await Promise.all([listUserOrgs(ctx.db.prisma, { userId: ctx.session.user.id }), getUser(ctx.db.prisma, ctx.session.user.id)]);
  return orgs.filter((o) => o.role === 'owner' || user?.isPlatformAdmin).map((o) => ({ id: o.id, name: o.name }));
}

const deps = (ctx: TrpcContext): RegistrationDeps => ({ db: ctx.db, settings: registrationSettings(loadConfig()), now: () => new Date() });

const entry = (ctx: TrpcContext & { session: { user: SessionUser } }, code: string): CodeEntry => ({
  code,
  user: { id: ctx.session.user.id, email: ctx.session.user.email },
  ip: ctx.clientIp ?? null,
  throttle: sharedGuessThrottle(),
});

export const claimsRouter = createTRPCRouter({
  /**
   * What the code would authorise: who the agent is (its name, when and from which network it
   * registered), and the orgs the user may have pay for it, the one they act for first when they
   * own it. A mutation: a wrong code counts.
   */
  check: orgProcedure.input(CodeInput).mutation(async ({ ctx, input }) => {
    const claim = await describeClaim(deps(ctx), entry(ctx, input.code));
    const orgs = await payingOrgs(ctx);
    const acting = orgs.find((o) => o.id === ctx.org.id);
    return {
      ...claim,
      registeredAt: claim.registeredAt.toISOString(),
      codeExpiresAt: claim.codeExpiresAt.toISOString(),
      org: { id: ctx.org.id, name: ctx.org.name },
      /** The orgs the key may land in (the user owns them), the default first. */
      orgs: acting ? [acting, ...orgs.filter((o) => o !== acting)] : orgs,
      /** Only owners may confirm (it issues a key); the page says so before the user tries. */
      canConfirm: orgs.length > 0,
    };
  }),

  /** The agent's next poll receives a new key on the org the user chose (one they own), else the one they act for. */
  confirm: orgProcedure.input(ConfirmInput).mutation(async ({ ctx, input }) => {
    const orgId = input.orgId ?? ctx.org.id;
    const org = (await payingOrgs(ctx)).find((o) => o.id === orgId);
    if (!org) {
      const which = orgId === ctx.org.id ? ctx.org.name : 'that organization';
      throw new TRPCError({ code: 'FORBIDDEN', message: `Only owners of ${which} can do this. The agent gets a key there: choose an organization you own.` });
    }
    const confirmed = await confirmClaim(deps(ctx), { ...entry(ctx, input.code), orgId: org.id });
    return { ...confirmed, orgName: org.name };
  }),

  deny: orgProcedure.input(CodeInput).mutation(async ({ ctx, input }) => denyClaim(deps(ctx), entry(ctx, input.code))),
});
