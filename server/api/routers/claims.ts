// The verification page of agent registration ({dashboard_url}/claim): the signed-in user
// enters the 6-digit code the agent showed them, sees what they authorise, and confirms or
// denies. Every call takes the code again (it is the capability; nothing is kept between
// calls); wrong codes count against the per-code, per-user and per-IP limits
// (server/services/registrations/describe-claim.ts).
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { confirmClaim } from '../../services/registrations/confirm-claim.ts';
import { denyClaim } from '../../services/registrations/deny-claim.ts';
import { describeClaim, type CodeEntry } from '../../services/registrations/describe-claim.ts';
import { sharedGuessThrottle } from '../../services/registrations/guess-throttle.ts';
import { registrationSettings, type RegistrationDeps } from '../../services/registrations/registration-rules.ts';
import { canManageOrg, createTRPCRouter, orgProcedure, ownerProcedure, type TrpcContext, type SessionUser } from '../trpc.ts';

const CodeInput = z.object({
  code: z.string({ error: 'Enter the 6-digit code the agent showed you.' }).max(32, 'Enter the 6-digit code the agent showed you.'),
});

const deps = (ctx: TrpcContext): RegistrationDeps => ({ db: ctx.db, settings: registrationSettings(loadConfig()), now: () => new Date() });

const entry = (ctx: TrpcContext & { session: { user: SessionUser } }, code: string): CodeEntry => ({
  code,
  user: { id: ctx.session.user.id, email: ctx.session.user.email },
  ip: ctx.clientIp ?? null,
  throttle: sharedGuessThrottle(),
});

export const claimsRouter = createTRPCRouter({
  /** What the code would authorise, and for which of the user's orgs. A mutation: a wrong code counts. */
  check: orgProcedure.input(CodeInput).mutation(async ({ ctx, input }) => {
    const claim = await describeClaim(deps(ctx), entry(ctx, input.code));
    return {
      ...claim,
      registeredAt: claim.registeredAt.toISOString(),
      codeExpiresAt: claim.codeExpiresAt.toISOString(),
      org: { id: ctx.org.id, name: ctx.org.name },
      /** Only owners may confirm (it issues a key); the page says so before the user tries. */
      canConfirm: await canManageOrg(ctx),
    };
  }),

  /** The agent's next poll receives a new key on the org the user acts for: owners only, as creating a key is. */
  confirm: ownerProcedure.input(CodeInput).mutation(async ({ ctx, input }) => {
    const confirmed = await confirmClaim(deps(ctx), { ...entry(ctx, input.code), orgId: ctx.org.id });
    return { ...confirmed, orgName: ctx.org.name };
  }),

  deny: orgProcedure.input(CodeInput).mutation(async ({ ctx, input }) => denyClaim(deps(ctx), entry(ctx, input.code))),
});
