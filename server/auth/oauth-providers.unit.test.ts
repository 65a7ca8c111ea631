import { describe, expect, it } from 'vitest';
import { ConfigError } from '../config/env.ts';
import { githubPrimaryEmail, oauthSetupFromEnv, profileEmailVerified } from './oauth-providers.ts';

const GITHUB = { GITHUB_ID: 'gh-id', GITHUB_SECRET: 'gh-secret' };
const GOOGLE = { GOOGLE_CLIENT_ID: 'g-id', GOOGLE_CLIENT_SECRET: 'g-secret' };
const OIDC = { OIDC_ISSUER: 'https://login.example.com/realms/main/', OIDC_CLIENT_ID: 'o-id', OIDC_CLIENT_SECRET: 'o-secret' };

describe('OAuth providers from the environment', () => {
  it('none without variables, and blank values count as unset', () => {
    expect(oauthSetupFromEnv({})).toEqual({ info: [], providers: [] });
    expect(oauthSetupFromEnv({ GITHUB_ID: '', GITHUB_SECRET: '  ', OIDC_NAME: '' })).toEqual({ info: [], providers: [] });
  });

  it('each provider when its variables are set, in a fixed order', () => {
    expect(oauthSetupFromEnv(GITHUB).info).toEqual([{ id: 'github', name: 'GitHub' }]);
    expect(oauthSetupFromEnv(GOOGLE).info).toEqual([{ id: 'google', name: 'Google' }]);
    expect(oauthSetupFromEnv(OIDC).info).toEqual([{ id: 'oidc', name: 'Single sign-on' }]);
    const all = oauthSetupFromEnv({ ...OIDC, ...GOOGLE, ...GITHUB, OIDC_NAME: ' Acme SSO ' });
    expect(all.info).toEqual([
      { id: 'github', name: 'GitHub' },
      { id: 'google', name: 'Google' },
      { id: 'oidc', name: 'Acme SSO' },
    ]);
    expect(all.providers.map((p) => p.id)).toEqual(['github', 'google', 'oidc']);
  });

  it('passes the credentials to next-auth and asks for the email scopes', () => {
    const [github, google, oidc] = oauthSetupFromEnv({ ...GITHUB, ...GOOGLE, ...OIDC }).providers;
    // next-auth merges `options` over the provider's defaults when it loads the providers.
    expect(github!.options).toMatchObject({ clientId: 'gh-id', clientSecret: 'gh-secret' });
    expect(github!.authorization).toMatchObject({ params: { scope: 'read:user user:email' } });
    expect(typeof (github!.options as { userinfo?: { request?: unknown } }).userinfo?.request).toBe('function');
    expect(google!.options).toMatchObject({ clientId: 'g-id', clientSecret: 'g-secret' });
    expect(google!.wellKnown).toBe('https://accounts.google.com/.well-known/openid-configuration');
    expect(oidc).toMatchObject({
      type: 'oauth',
      clientId: 'o-id',
      clientSecret: 'o-secret',
      // Trailing slash of the issuer dropped, so the discovery URL has one slash.
      wellKnown: 'https://login.example.com/realms/main/.well-known/openid-configuration',
      idToken: true,
      checks: ['pkce', 'state'],
      authorization: { params: { scope: 'openid email profile' } },
    });
    expect(oidc!.profile({ sub: 'abc', email: 'a@example.com', preferred_username: 'ann' }, {})).toEqual({
      id: 'abc',
      name: 'ann',
      email: 'a@example.com',
      image: null,
    });
  });

  it.each([
    [{ GITHUB_ID: 'x' }, /GITHUB_SECRET: required when GITHUB_ID is set/],
    [{ GOOGLE_CLIENT_SECRET: 'x' }, /GOOGLE_CLIENT_ID: required when GOOGLE_CLIENT_SECRET is set/],
    [{ OIDC_ISSUER: 'https://idp.example.com', OIDC_CLIENT_ID: 'x' }, /OIDC_CLIENT_SECRET: required when OIDC_ISSUER and OIDC_CLIENT_ID are set/],
    [{ ...OIDC, OIDC_ISSUER: 'idp.example.com' }, /OIDC_ISSUER: must be the issuer URL/],
    [{ ...OIDC, OIDC_ISSUER: 'ftp://idp.example.com' }, /OIDC_ISSUER: must be the issuer URL/],
    [{ ...OIDC, OIDC_NAME: 'x'.repeat(41) }, /OIDC_NAME: must be at most 40 characters/],
    [{ OIDC_NAME: 'Acme' }, /OIDC_NAME: set only with OIDC_ISSUER/],
  ])('a partial or bad configuration stops start-up naming the variable (%j)', (env, message) => {
    expect(() => oauthSetupFromEnv(env)).toThrow(ConfigError);
    expect(() => oauthSetupFromEnv(env)).toThrow(message);
  });

  it('never puts a secret in the error message', () => {
    expect(() => oauthSetupFromEnv({ GITHUB_SECRET: 'very-secret-value' })).toThrow(/GITHUB_ID/);
    try {
      oauthSetupFromEnv({ GITHUB_SECRET: 'very-secret-value', OIDC_ISSUER: 'not a url', OIDC_CLIENT_ID: 'a', OIDC_CLIENT_SECRET: 'other-secret' });
    } catch (e) {
      expect(String(e)).not.toMatch(/very-secret-value|other-secret/);
    }
  });
});

describe('verified emails', () => {
  it("GitHub: the primary address and GitHub's verified flag, never another address", () => {
    expect(
      githubPrimaryEmail([
        { email: 'public@example.com', primary: false, verified: true },
        { email: 'main@example.com', primary: true, verified: true },
      ]),
    ).toEqual({ email: 'main@example.com', verified: true });
    expect(githubPrimaryEmail([{ email: 'main@example.com', primary: true, verified: false }])).toEqual({ email: 'main@example.com', verified: false });
    expect(githubPrimaryEmail([{ email: 'other@example.com', primary: false, verified: true }])).toEqual({ email: null, verified: false });
    expect(githubPrimaryEmail({ message: 'Requires authentication' })).toEqual({ email: null, verified: false });
    expect(githubPrimaryEmail(null)).toEqual({ email: null, verified: false });
  });

  it('Google and OIDC: email_verified true (or "true", as some identity servers send it)', () => {
    expect(profileEmailVerified({ email_verified: true })).toBe(true);
    expect(profileEmailVerified({ email_verified: 'true' })).toBe(true);
    expect(profileEmailVerified({ email_verified: false })).toBe(false);
    expect(profileEmailVerified({ email_verified: 'false' })).toBe(false);
    expect(profileEmailVerified({ email_verified: 1 })).toBe(false);
    expect(profileEmailVerified({})).toBe(false);
    expect(profileEmailVerified(undefined)).toBe(false);
  });
});
