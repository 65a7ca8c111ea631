import { TRPCError } from '@trpc/server';
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { formatUsd } from '../../money.ts';
import { ServiceError } from '../../services/errors.ts';
import { findDashboardKeyId } from '../../services/keys/get-dashboard-key.ts';
import { listApiKeys } from '../../services/keys/list-api-keys.ts';
import { getUser } from '../../services/users/get-user.ts';
import { sendVerificationEmail, verifyEmail } from '../../services/users/verify-email.ts';
import { createTRPCRouter, credentialThrottleOf, mailerOf, orgProcedure, protectedProcedure } from '../trpc.ts';

const Token = z.object({ token: z.string({ error: 'The link is incomplete: open it again from the email.' }).max(100, 'The link is not valid.') });

export const accountRouter = createTRPCRouter({
  /** Who is signed in, for which org, with which rights. */
  me: orgProcedure.query(async ({ ctx }) => {
    const user = await getUser(ctx.db.prisma, ctx.session.user.id);
    if (!user) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'Sign in to continue.' });
    return {
      user: { id: user.id, email: user.email, name: user.name, isPlatformAdmin: user.isPlatformAdmin, emailVerified: user.emailVerified },
      org: { id: ctx.org.id, name: ctx.org.name },
      role: ctx.role,
      /** May do what only owners may (ownerProcedure): the page hides or explains those actions otherwise. */
      canManage: ctx.role === 'owner' || user.isPlatformAdmin,
      /** Whether this server mails verification links (SVC_SMTP_URL). */
      mailEnabled: mailerOf(ctx) !== null,
    };
  }),

  /**
   * The overview page: org, balance, a count of keys, and where the gateway answers. The keys
   * counted are the org's own: not the dashboard's key, which the dashboard makes itself (a Play
   * on the Voices page at $0 makes it), so "Create an API key" is done only when someone did.
   */
  overview: orgProcedure.query(async ({ ctx }) => {
    const [all, dashboardKeyId] = await Promise.all([listApiKeys(ctx.db.prisma, { orgId: ctx.org.id }), findDashboardKeyId(ctx.db.prisma, ctx.org.id)]);
    const keys = all.filter((k) => k.id !== dashboardKeyId);
    return {
      org: { id: ctx.org.id, name: ctx.org.name },
      role: ctx.role,
      balanceUsd: formatUsd(ctx.org.balanceMicros),
      keys: { active: keys.filter((k) => k.status === 'active').length, total: keys.length },
      gatewayUrl: loadConfig().publicBaseUrl,
    };
  }),

  /** Mails a new verification link to the signed-in account's address. */
  sendVerificationEmail: protectedProcedure.mutation(async ({ ctx }) => {
    const mailer = mailerOf(ctx);
    if (!mailer)
      throw new ServiceError(
        'mail_unavailable',
        'This server does not send email, so addresses cannot be verified by mail. Ask whoever invites you for an invite link.',
      );
    await credentialThrottleOf(ctx).take('verification_mail', { address: ctx.clientIp ?? null, email: ctx.session.user.email });
    const sent = await sendVerificationEmail({ db: ctx.db, mailer, dashboardUrl: loadConfig().dashboardUrl }, { userId: ctx.session.user.id });
    return { email: sent.email, expiresAt: sent.expiresAt.toISOString() };
  }),

  /** Follows a verification link (the page at /verify-email/<token>) as the signed-in account. */
  verifyEmail: protectedProcedure.input(Token).mutation(async ({ ctx, input }) => {
    const verified = await verifyEmail(ctx.db, { token: input.token, userId: ctx.session.user.id });
    return { email: verified.email, joinedOrgs: verified.joinedOrgIds.length };
  }),
});
