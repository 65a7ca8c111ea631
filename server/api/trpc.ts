// The tRPC edge of the dashboard: the context and the procedure tiers, declared once.
//   publicProcedure           anyone
//   protectedProcedure        a signed-in session (ctx.session is non-null below it)
//   orgProcedure              + the org the user acts for and their role in it (ctx.org, ctx.role)
//   ownerProcedure            + the user is an owner of that org, or a platform admin
//   platformAdminProcedure    protectedProcedure + the user is a platform admin (ctx.user)
//   platformAdminOrgProcedure orgProcedure + the user is a platform admin: platform-wide work
//                             the gateway does, asked for as the org the admin acts for
// Procedures validate input with zod, call one service, and return JSON-safe values (money
// as 6-decimal USD strings, dates as ISO strings). Service errors are mapped in one place.
import { initTRPC, TRPCError } from '@trpc/server';
import { sharedCredentialThrottle, type CredentialThrottle } from '../auth/credential-throttle.ts';
import type { SessionUser } from '../auth/session.ts';
import { loadConfig } from '../config/env.ts';
import type { Database } from '../db/database.ts';
import { isServiceError } from '../services/errors.ts';
import type { Mailer } from '../services/users/mailer.ts';
import { getActiveMembership } from '../services/users/get-active-membership.ts';
import { getUser } from '../services/users/get-user.ts';
import { toTrpcError } from './errors.ts';
import { gatewayInternalUrl } from './gateway-proxy.ts';
import { getMailer } from './mailer.ts';

export type { SessionUser };

export interface TrpcContext {
  db: Database;
  session: { user: SessionUser } | null;
  /** The org the browser asked to act for (cookie); membership is checked by orgProcedure. */
  requestedOrgId: string | null;
  /** The browser's address as the dashboard sees it (per-IP limits); null when unknown. */
  clientIp?: string | null;
  /** Sign-up and verification-mail throttle; the process's shared one when absent. */
  credentialThrottle?: CredentialThrottle;
  /** Outgoing mail; the process's (SVC_SMTP_URL) when absent, null: none. */
  mailer?: Mailer | null;
  /** Where the dashboard server reaches the gateway; the configured one (gateway-proxy.ts gatewayInternalUrl) when absent. */
  gatewayUrl?: string;
}

function serviceErrorCode(cause: unknown): string | null {
  return isServiceError(cause) ? cause.code : null;
}

/** The field a refused input names (`changes.name`, `entries[3].alias`), so a page can mark it and word the message for people. */
function serviceErrorParam(cause: unknown): string | null {
  return isServiceError(cause) ? cause.param : null;
}

/** When a refusal that passes with time may be retried, so a page can say when (or wait that long). */
function serviceRetryAfter(cause: unknown): number | null {
  return isServiceError(cause) ? (cause.retryAfterSeconds ?? null) : null;
}

const t = initTRPC.context<TrpcContext>().create({
  errorFormatter({ shape, error }) {
    // Unexpected errors keep their details in the server log, not in the browser.
    const hidden = error.code === 'INTERNAL_SERVER_ERROR' && !isServiceError(error.cause);
    return {
      ...shape,
      message: hidden ? 'Something went wrong on the server. Try again.' : shape.message,
      data: {
        code: shape.data.code,
        httpStatus: shape.data.httpStatus,
        path: shape.data.path,
        serviceCode: serviceErrorCode(error.cause),
        serviceParam: serviceErrorParam(error.cause),
        retryAfterSeconds: serviceRetryAfter(error.cause),
      },
    };
  },
});

/** The throttle and mailer a procedure uses: the context's, else the process's. */
export const credentialThrottleOf = (ctx: TrpcContext): CredentialThrottle => ctx.credentialThrottle ?? sharedCredentialThrottle();
export const mailerOf = (ctx: TrpcContext): Mailer | null => (ctx.mailer === undefined ? getMailer() : ctx.mailer);
export const gatewayUrlOf = (ctx: TrpcContext): string => ctx.gatewayUrl ?? gatewayInternalUrl(loadConfig());

export const createTRPCRouter = t.router;
export const createCallerFactory = t.createCallerFactory;

/**
 * Runs around everything below it, input validation included: domain errors become their
 * tRPC codes (errors.ts), and failed input validation becomes one readable sentence instead
 * of a JSON dump of issues.
 */
const mapErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (result.ok) return result;
  const cause = result.error.cause;
  if (isServiceError(cause)) throw toTrpcError(cause);
  const issues = (cause as { issues?: unknown } | undefined)?.issues;
  if (result.error.code === 'BAD_REQUEST' && Array.isArray(issues) && issues.length > 0) {
    const message = issues.map((i: { message?: unknown }) => String(i.message ?? 'Invalid input.')).join(' ');
    throw new TRPCError({ code: 'BAD_REQUEST', message, cause });
  }
  return result;
});

export const publicProcedure = t.procedure.use(mapErrors);

export const protectedProcedure = publicProcedure.use(({ ctx, next }) => {
  if (!ctx.session) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'Sign in to continue.' });
  return next({ ctx: { session: ctx.session } });
});

export const orgProcedure = protectedProcedure.use(async ({ ctx, next }) => {
  const membership = await getActiveMembership(ctx.db.prisma, { userId: ctx.session.user.id, orgId: ctx.requestedOrgId });
  if (!membership) throw new TRPCError({ code: 'FORBIDDEN', message: 'Your account does not belong to an organization.' });
  return next({ ctx: { org: membership.org, role: membership.role } });
});

/**
 * The signed-in user, when a platform admin. Read from the database on every call, not from the
 * session token, so that taking the role away is effective immediately.
 */
async function platformAdmin(ctx: { db: Database; session: { user: SessionUser } }) {
  const user = await getUser(ctx.db.prisma, ctx.session.user.id);
  if (!user?.isPlatformAdmin) throw new TRPCError({ code: 'FORBIDDEN', message: 'Only platform admins can do this.' });
  return user;
}

export const platformAdminProcedure = protectedProcedure.use(async ({ ctx, next }) => next({ ctx: { user: await platformAdmin(ctx) } }));

export const platformAdminOrgProcedure = orgProcedure.use(async ({ ctx, next }) => next({ ctx: { user: await platformAdmin(ctx) } }));

/**
 * Whether the user may do what only owners of the acting org may: an owner, or a platform
 * admin who is a member of the org (operators acting for an org they were added to).
 */
export async function canManageOrg(ctx: { db: Database; session: { user: SessionUser }; role: 'owner' | 'member' }): Promise<boolean> {
  if (ctx.role === 'owner') return true;
  return (await getUser(ctx.db.prisma, ctx.session.user.id))?.isPlatformAdmin ?? false;
}

/**
 * What only an org's owners may do: create and revoke keys, confirm agent claims (they issue
 * a key), manage members, rename the org. Role and flag are read from the database on every
 * call, so a demotion is effective at once.
 */
export const ownerProcedure = orgProcedure.use(async ({ ctx, next }) => {
  if (!(await canManageOrg(ctx))) {
    throw new TRPCError({ code: 'FORBIDDEN', message: `Only owners of ${ctx.org.name} can do this. Ask an owner, or switch to an organization you own.` });
  }
  return next();
});
