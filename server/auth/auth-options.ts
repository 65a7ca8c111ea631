// next-auth v4: email + password (credentials provider) and the OAuth providers switched on
// by environment variables (oauth-providers.ts), JWT sessions that end 7 days after sign-in.
// Built on first use, so the secret and the database are resolved at run time.
//
// Session lifetime: the session cookie and the JWT inside it both carry maxAge. next-auth
// re-issues them (sliding the 7 days) only when /api/auth/session is fetched, which this
// dashboard does not do (server components read the session without writing cookies), so in
// practice a session ends 7 days after sign-in. Roles and memberships are not in the token:
// every procedure reads them from the database, so removing a member is effective at once.
import type { AuthOptions, DefaultSession } from 'next-auth';
import CredentialsProviderModule from 'next-auth/providers/credentials';
import { clientAddress } from '../config/client-address.ts';
import { loadConfig } from '../config/env.ts';
import { getDb } from '../db/dashboard-db.ts';
import type { Database } from '../db/database.ts';
import { isServiceError } from '../services/errors.ts';
import { acceptPendingInvitations } from '../services/orgs/invitations.ts';
import { authenticateUser } from '../services/users/authenticate-user.ts';
import { signInWithOAuth } from '../services/users/sign-in-with-oauth.ts';
import { sameOriginRedirect } from './callback-url.ts';
import { sharedCredentialThrottle, type CredentialThrottle } from './credential-throttle.ts';
import { resolveNextAuthSecret } from './nextauth-secret.ts';
import { processOAuthSetup, profileEmailVerified, type OAuthSetup } from './oauth-providers.ts';

declare module 'next-auth' {
  interface Session {
    user: { id: string; email: string; name: string | null } & Omit<DefaultSession['user'], 'email' | 'name'>;
  }
}

const interop = <T>(m: T | { default: T }): T => (typeof m === 'function' ? m : (m as { default: T }).default);
const CredentialsProvider = interop(CredentialsProviderModule);

export const SESSION_MAX_AGE_SECONDS = 7 * 24 * 60 * 60;

/** Error codes the sign-in page explains (`/signin?error=...`), besides next-auth's own. */
export const OAUTH_REFUSALS = {
  email_unverified: 'OAuthEmailUnverified',
  email_missing: 'OAuthEmailMissing',
  password_account_unverified: 'OAuthPasswordAccountUnverified',
} as const;

/** What a throttled credentials sign-in answers (the sign-in page explains it). */
export const SIGN_IN_THROTTLED = 'TooManySignInAttempts';

export interface AuthDeps {
  db: () => Database;
  secret: string;
  oauth: OAuthSetup;
  throttle: CredentialThrottle;
  /** SVC_TRUSTED_PROXIES, to read the client address from X-Forwarded-For. */
  trustedProxies: number;
}

/** The options from their parts; tests pass a test database, a throttle and fake OAuth setup. */
export function buildAuthOptions(deps: AuthDeps): AuthOptions {
  return {
    secret: deps.secret,
    session: { strategy: 'jwt', maxAge: SESSION_MAX_AGE_SECONDS },
    jwt: { maxAge: SESSION_MAX_AGE_SECONDS },
    // OAuth errors (next-auth's and ours) come back to the sign-in page, which explains them.
    pages: { signIn: '/signin', error: '/signin' },
    providers: [
      CredentialsProvider({
        name: 'Email and password',
        credentials: { email: { label: 'Email', type: 'email' }, password: { label: 'Password', type: 'password' } },
        async authorize(credentials, req) {
          if (!credentials?.email || !credentials.password) return null;
          const forwardedFor = (req?.headers as Record<string, string | undefined> | undefined)?.['x-forwarded-for'];
          try {
            // Before bcrypt: a throttled attempt costs a counter, not a hash.
            await deps.throttle.take('sign_in', {
              address: clientAddress({ socketAddress: null, forwardedFor, trustedProxies: deps.trustedProxies }),
              email: credentials.email,
            });
          } catch (e) {
            // next-auth hands a thrown error's message to the page as `error`.
            if (isServiceError(e) && e.code === 'rate_limit_exceeded') throw new Error(SIGN_IN_THROTTLED, { cause: e });
            throw e;
          }
          const prisma = deps.db().prisma;
          const user = await authenticateUser(prisma, { email: credentials.email, password: credentials.password });
          if (!user) return null;
          // Applied only when the account's email is verified.
          await acceptPendingInvitations(prisma, { userId: user.id });
          return { id: user.id, email: user.email, name: user.name };
        },
      }),
      ...deps.oauth.providers,
    ],
    callbacks: {
      // Never leave the dashboard after signing in (callbackUrl is the visitor's to write).
      redirect: sameOriginRedirect,
      async signIn({ user, account, profile }) {
        if (account?.type !== 'oauth') return true;
        const raw = profile as Record<string, unknown> | undefined;
        const result = await signInWithOAuth(deps.db(), {
          email: typeof raw?.email === 'string' ? raw.email : user.email,
          emailVerified: profileEmailVerified(raw),
          name: user.name,
        });
        if (!result.ok) return `/signin?error=${OAUTH_REFUSALS[result.reason]}`;
        // Without a database adapter next-auth hands this same object to the jwt callback as
        // `user`, so the session gets our user id, not the provider's account id.
        Object.assign(user, { id: result.user.id, email: result.user.email, name: result.user.name });
        return true;
      },
      jwt({ token, user, account }) {
        if (user) {
          // Belt and braces for the hand-over above: a provider's account id must never
          // become a session's user id.
          if (account?.type === 'oauth' && !user.id.startsWith('usr_')) throw new Error('OAuth sign-in did not resolve to an account');
          token.sub = user.id;
          token.email = user.email;
          token.name = user.name;
        }
        return token;
      },
      session({ session, token }) {
        session.user = { id: token.sub ?? '', email: token.email ?? '', name: token.name ?? null };
        return session;
      },
    },
  };
}

let options: AuthOptions | undefined;

export function getAuthOptions(): AuthOptions {
  if (options) return options;
  const config = loadConfig();
  // next-auth builds its absolute URLs (redirects, OAuth callback URLs, cookie security) from
  // NEXTAUTH_URL; default it to the configured dashboard address instead of localhost:3000.
  process.env.NEXTAUTH_URL ??= config.dashboardUrl;
  options = buildAuthOptions({
    db: getDb,
    secret: resolveNextAuthSecret(process.env, config.dataDir),
    oauth: processOAuthSetup(),
    throttle: sharedCredentialThrottle(),
    trustedProxies: config.trustedProxies,
  });
  return options;
}
