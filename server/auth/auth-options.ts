// next-auth v4: email + password (credentials provider), JWT sessions that expire after
// 7 days. Built on first use, so the secret and the database are resolved at run time.
import type { AuthOptions, DefaultSession } from 'next-auth';
import CredentialsProvider from 'next-auth/providers/credentials';
import { loadConfig } from '../config/env.js';
import { getDb } from '../api/db.js';
import { authenticateUser } from '../services/users/authenticate-user.js';
import { resolveNextAuthSecret } from './nextauth-secret.js';

declare module 'next-auth' {
  interface Session {
    user: { id: string; email: string; name: string | null } & Omit<DefaultSession['user'], 'email' | 'name'>;
  }
}

export const SESSION_MAX_AGE_SECONDS = 7 * 24 * 60 * 60;

let options: AuthOptions | undefined;

export function getAuthOptions(): AuthOptions {
  if (options) return options;
  const config = loadConfig();
  // next-auth builds its absolute URLs (redirects, cookie security) from NEXTAUTH_URL; default
  // it to the configured dashboard address instead of next-auth's own localhost:3000.
  process.env.NEXTAUTH_URL ??= config.dashboardUrl;
  options = {
    secret: resolveNextAuthSecret(process.env, config.dataDir),
    session: { strategy: 'jwt', maxAge: SESSION_MAX_AGE_SECONDS },
    jwt: { maxAge: SESSION_MAX_AGE_SECONDS },
    pages: { signIn: '/signin' },
    providers: [
      CredentialsProvider({
        name: 'Email and password',
        credentials: { email: { label: 'Email', type: 'email' }, password: { label: 'Password', type: 'password' } },
        async authorize(credentials) {
          if (!credentials?.email || !credentials.password) return null;
          const user = await authenticateUser(getDb().prisma, { email: credentials.email, password: credentials.password });
          return user ? { id: user.id, email: user.email, name: user.name } : null;
        },
      }),
    ],
    callbacks: {
      jwt({ token, user }) {
        if (user) {
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
  return options;
}
