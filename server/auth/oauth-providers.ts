// Optional OAuth sign-in, each provider switched on by its environment variables:
//   GitHub  GITHUB_ID, GITHUB_SECRET
//   Google  GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET
//   OIDC    OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET (+ OIDC_NAME for the button)
// A provider with only some of its variables set is a configuration error naming what is
// missing (a typo should not silently hide a button), validated like server/config/env.ts.
// Every provider hands the sign-in callback an `email_verified` flag on the raw profile; an
// email is only trusted when it is true (server/services/users/sign-in-with-oauth.ts).
import type { OAuthConfig } from 'next-auth/providers/oauth';
import GitHubProviderModule from 'next-auth/providers/github';
import GoogleProviderModule from 'next-auth/providers/google';
import { z } from 'zod';
import { ConfigError } from '../config/env.ts';

// The providers are CommonJS modules with `exports.default`; depending on the loader (Next's
// bundler, Node's ESM interop, vitest) the default import is the function or the exports object.
const interop = <T>(m: T | { default: T }): T => (typeof m === 'function' ? m : (m as { default: T }).default);
const GitHubProvider = interop(GitHubProviderModule);
const GoogleProvider = interop(GoogleProviderModule);

export type OAuthProviderId = 'github' | 'google' | 'oidc';

/** What the sign-in page needs to draw a button. */
export interface OAuthProviderInfo {
  id: OAuthProviderId;
  name: string;
}

const secret = z.string().trim().min(1, 'must not be empty');
const OAuthEnvSchema = z.object({
  GITHUB_ID: secret.optional(),
  GITHUB_SECRET: secret.optional(),
  GOOGLE_CLIENT_ID: secret.optional(),
  GOOGLE_CLIENT_SECRET: secret.optional(),
  OIDC_ISSUER: z
    .url({ protocol: /^https?$/, error: 'must be the issuer URL, e.g. https://login.example.com/realms/main' })
    .transform((u) => u.replace(/\/+$/, ''))
    .optional(),
  OIDC_CLIENT_ID: secret.optional(),
  OIDC_CLIENT_SECRET: secret.optional(),
  OIDC_NAME: z.string().trim().min(1, 'must not be empty').max(40, 'must be at most 40 characters').optional(),
});

type OAuthEnv = z.infer<typeof OAuthEnvSchema>;

const GROUPS: { id: OAuthProviderId; vars: (keyof OAuthEnv)[] }[] = [
  { id: 'github', vars: ['GITHUB_ID', 'GITHUB_SECRET'] },
  { id: 'google', vars: ['GOOGLE_CLIENT_ID', 'GOOGLE_CLIENT_SECRET'] },
  { id: 'oidc', vars: ['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET'] },
];

export interface OAuthSetup {
  info: OAuthProviderInfo[];
  providers: OAuthConfig<Record<string, unknown>>[];
}

/** Empty strings count as unset, as a blank line in an .env file would mean. */
function present(source: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(OAuthEnvSchema.shape)) {
    const value = source[key];
    if (value !== undefined && value.trim() !== '') out[key] = value;
  }
  return out;
}

export function oauthSetupFromEnv(source: Readonly<Record<string, string | undefined>> = process.env): OAuthSetup {
  const parsed = OAuthEnvSchema.safeParse(present(source));
  const lines = parsed.success ? [] : parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
  const env = parsed.success ? parsed.data : ({} as OAuthEnv);
  const raw = present(source);
  for (const group of GROUPS) {
    const set = group.vars.filter((v) => raw[v] !== undefined);
    if (set.length > 0 && set.length < group.vars.length) {
      for (const missing of group.vars.filter((v) => raw[v] === undefined))
        lines.push(`  ${missing}: required when ${set.join(' and ')} ${set.length > 1 ? 'are' : 'is'} set`);
    }
  }
  if (raw.OIDC_NAME !== undefined && raw.OIDC_ISSUER === undefined) lines.push('  OIDC_NAME: set only with OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET');
  if (lines.length > 0) throw new ConfigError(`invalid OAuth configuration:\n${lines.join('\n')}`);

  const setup: OAuthSetup = { info: [], providers: [] };
  if (env.GITHUB_ID && env.GITHUB_SECRET) {
    setup.info.push({ id: 'github', name: 'GitHub' });
    setup.providers.push(githubProvider(env.GITHUB_ID, env.GITHUB_SECRET));
  }
  if (env.GOOGLE_CLIENT_ID && env.GOOGLE_CLIENT_SECRET) {
    setup.info.push({ id: 'google', name: 'Google' });
    setup.providers.push(
      GoogleProvider({ clientId: env.GOOGLE_CLIENT_ID, clientSecret: env.GOOGLE_CLIENT_SECRET }) as unknown as OAuthConfig<Record<string, unknown>>,
    );
  }
  if (env.OIDC_ISSUER && env.OIDC_CLIENT_ID && env.OIDC_CLIENT_SECRET) {
    const name = env.OIDC_NAME ?? 'Single sign-on';
    setup.info.push({ id: 'oidc', name });
    setup.providers.push(oidcProvider({ issuer: env.OIDC_ISSUER, clientId: env.OIDC_CLIENT_ID, clientSecret: env.OIDC_CLIENT_SECRET, name }));
  }
  return setup;
}

let cached: OAuthSetup | undefined;
/** The process's providers, read from its environment once. */
export function processOAuthSetup(): OAuthSetup {
  return (cached ??= oauthSetupFromEnv(process.env));
}

export interface GitHubEmail {
  email: string;
  primary: boolean;
  verified: boolean;
}

/**
 * GitHub's identity email: the account's primary address and whether GitHub verified it.
 * The public profile email is not used: it can be any of the user's addresses, and the
 * profile does not say whether it is verified.
 */
export function githubPrimaryEmail(emails: unknown): { email: string | null; verified: boolean } {
  if (!Array.isArray(emails)) return { email: null, verified: false };
  const primary = (emails as Partial<GitHubEmail>[]).find((e) => e && e.primary === true && typeof e.email === 'string');
  return primary ? { email: primary.email!, verified: primary.verified === true } : { email: null, verified: false };
}

function githubProvider(clientId: string, clientSecret: string): OAuthConfig<Record<string, unknown>> {
  return GitHubProvider({
    clientId,
    clientSecret,
    userinfo: {
      url: 'https://api.github.com/user',
      // Replaces next-auth's default, which keeps the public profile email when there is one
      // and never looks at `verified`. The scope (read:user user:email) is next-auth's default.
      async request({ client, tokens }) {
        const profile = await client.userinfo(tokens.access_token!);
        const res = await fetch('https://api.github.com/user/emails', {
          headers: { Authorization: `Bearer ${tokens.access_token}`, Accept: 'application/vnd.github+json', 'User-Agent': 'svc-dashboard' },
        });
        const primary = githubPrimaryEmail(res.ok ? await res.json() : null);
        return { ...profile, email: primary.email ?? undefined, email_verified: primary.verified };
      },
    },
  }) as unknown as OAuthConfig<Record<string, unknown>>;
}

/** A generic OpenID Connect provider (discovery document, ID token, PKCE), next-auth's documented shape. */
function oidcProvider(input: { issuer: string; clientId: string; clientSecret: string; name: string }): OAuthConfig<Record<string, unknown>> {
  return {
    id: 'oidc',
    name: input.name,
    type: 'oauth',
    wellKnown: `${input.issuer}/.well-known/openid-configuration`,
    issuer: input.issuer,
    authorization: { params: { scope: 'openid email profile' } },
    idToken: true,
    checks: ['pkce', 'state'],
    clientId: input.clientId,
    clientSecret: input.clientSecret,
    profile(profile) {
      const str = (v: unknown) => (typeof v === 'string' && v ? v : null);
      return {
        id: String(profile.sub),
        name: str(profile.name) ?? str(profile.preferred_username),
        email: str(profile.email),
        image: str(profile.picture),
      };
    },
  };
}

/** Google and OIDC put `email_verified` in the ID token; some identity servers send it as a string. */
export function profileEmailVerified(profile: Record<string, unknown> | undefined): boolean {
  const v = profile?.email_verified;
  return v === true || v === 'true';
}
