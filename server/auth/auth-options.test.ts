// The sign-in callbacks with the profiles OAuth providers hand over, against a real database.
// A real OAuth round trip needs the providers' servers, which tests cannot reach; what is
// ours (which email is trusted, which account it signs into, what is created) is tested here.
import type { Account, AuthOptions, Profile, User } from 'next-auth';
import type { JWT } from 'next-auth/jwt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRateLimiter, WINDOW_MS } from '../rate-limit/rate-limiter.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { signUp } from '../services/users/sign-up.ts';
import { OAUTH_REFUSALS, SESSION_MAX_AGE_SECONDS, SIGN_IN_THROTTLED, buildAuthOptions, type AuthDeps } from './auth-options.ts';
import { CREDENTIAL_LIMITS, createCredentialThrottle } from './credential-throttle.ts';
import { oauthSetupFromEnv } from './oauth-providers.ts';

let t: TestDatabase;
let options: AuthOptions;
let n = 0;
// A clock held inside one window, moved on by hand: no test depends on the wall clock.
const clock = manualClock(30_000_000 * WINDOW_MS);

const deps = (): AuthDeps => ({
  db: () => t.db,
  secret: 'test-secret',
  oauth: oauthSetupFromEnv({ GITHUB_ID: 'id', GITHUB_SECRET: 'secret', GOOGLE_CLIENT_ID: 'id', GOOGLE_CLIENT_SECRET: 'secret' }),
  throttle: createCredentialThrottle(createMemoryRateLimiter(clock)),
  trustedProxies: 1,
});

beforeAll(async () => {
  t = await createTestDatabase();
  options = buildAuthOptions(deps());
});
afterAll(async () => {
  await t?.drop();
});

const email = (what: string) => `oauth-${what}-${++n}@example.com`;

/** One OAuth sign-in as next-auth runs it: signIn callback, then (if allowed) the jwt callback. */
async function oauthSignIn(provider: 'github' | 'google' | 'oidc', profile: Record<string, unknown>) {
  const user: User = {
    id: String(profile.sub ?? profile.id ?? '12345'),
    email: (profile.email as string | undefined) ?? null,
    name: (profile.name as string | undefined) ?? null,
  };
  const account: Account = { provider, type: 'oauth', providerAccountId: user.id };
  const allowed = await options.callbacks!.signIn!({ user, account, profile: profile as Profile });
  if (allowed !== true) return { allowed, token: null };
  const token = (await options.callbacks!.jwt!({ token: { sub: user.id }, user, account, profile: profile as Profile, trigger: 'signIn' })) as JWT;
  return { allowed, token };
}

const userByEmail = (address: string) => t.db.prisma.user.findUnique({ where: { email: address }, include: { memberships: { include: { org: true } } } });

describe('OAuth sign-in', () => {
  it('the first user of the instance signing in by OAuth becomes platform admin, with a personal org', async () => {
    const address = email('first');
    const { allowed, token } = await oauthSignIn('google', { sub: 'g-1', email: address, email_verified: true, name: 'Ada First' });
    expect(allowed).toBe(true);
    const user = await userByEmail(address);
    expect(user).toMatchObject({ name: 'Ada First', passwordHash: null, isPlatformAdmin: true });
    expect(user!.memberships).toEqual([expect.objectContaining({ role: 'owner', org: expect.objectContaining({ name: "Ada First's org" }) })]);
    // The session carries our user id, not Google's subject.
    expect(token).toMatchObject({ sub: user!.id, email: address, name: 'Ada First' });
  });

  it('a new verified email gets a new account (not admin), with pending invitations applied', async () => {
    const owner = await signUp(t.db, { email: email('owner'), password: 'correct horse battery' });
    const address = email('new');
    await t.db.prisma.invitation.create({
      data: { id: `inv_${n}`, orgId: owner.orgId, email: address, role: 'member', expiresAt: new Date(Date.now() + 86_400_000) },
    });
    const { allowed, token } = await oauthSignIn('oidc', { sub: 'oidc-7', email: address.toUpperCase(), email_verified: 'true' });
    expect(allowed).toBe(true);
    const user = await userByEmail(address);
    expect(user).toMatchObject({ isPlatformAdmin: false, passwordHash: null });
    expect(user!.memberships.map((m) => [m.orgId === owner.orgId ? 'invited' : 'personal', m.role]).sort()).toEqual([
      ['invited', 'member'],
      ['personal', 'owner'],
    ]);
    expect(token?.sub).toBe(user!.id);
  });

  it('an existing password account with a verified email is signed into when the provider verified it too; nothing new is created', async () => {
    const address = email('existing');
    const existing = await signUp(t.db, { email: address, password: 'correct horse battery', name: 'Kept Name' });
    await t.db.prisma.user.update({ where: { id: existing.userId }, data: { emailVerifiedAt: new Date() } });
    const users = await t.db.prisma.user.count();
    // GitHub: our userinfo request puts the primary email and its verified flag on the profile.
    const { allowed, token } = await oauthSignIn('github', { id: 987, login: 'kept', email: address, email_verified: true, name: 'GitHub Name' });
    expect(allowed).toBe(true);
    expect(token).toMatchObject({ sub: existing.userId, email: address, name: 'Kept Name' });
    expect(await t.db.prisma.user.count()).toBe(users);
    expect((await userByEmail(address))!.memberships).toHaveLength(1);
  });

  it('never attaches to a password account that did not prove its email: refused, with no session and no invitation taken', async () => {
    // Someone signed up with the address first (by password, so nothing proved they own it),
    // and an org invited the address. The address's real owner then signs in with Google.
    const squatted = email('squatted');
    const squatter = await signUp(t.db, { email: squatted, password: 'correct horse battery' });
    const inviter = await signUp(t.db, { email: email('inviter'), password: 'correct horse battery' });
    await t.db.prisma.invitation.create({
      data: { id: `inv_sq_${n}`, orgId: inviter.orgId, email: squatted, role: 'owner', expiresAt: new Date(Date.now() + 86_400_000) },
    });
    for (const [provider, profile] of [
      ['google', { sub: 'g-sq', email: squatted, email_verified: true }],
      ['github', { id: 77, email: squatted.toUpperCase(), email_verified: true }],
    ] as const) {
      const { allowed, token } = await oauthSignIn(provider, profile);
      expect(allowed).toBe(`/signin?error=${OAUTH_REFUSALS.password_account_unverified}`);
      expect(token).toBeNull();
    }
    const user = await userByEmail(squatted);
    expect(user).toMatchObject({ id: squatter.userId, emailVerifiedAt: null });
    expect(user!.memberships.map((m) => m.orgId)).toEqual([squatter.orgId]);
    expect(await t.db.prisma.invitation.count({ where: { email: squatted } })).toBe(1);
  });

  it('an account made by OAuth has its email verified, and a later OAuth sign-in to it works', async () => {
    const address = email('made-by-oauth');
    await oauthSignIn('google', { sub: 'g-v', email: address, email_verified: true });
    expect((await userByEmail(address))!.emailVerifiedAt).toBeInstanceOf(Date);
    await expect(oauthSignIn('github', { id: 78, email: address, email_verified: true })).resolves.toMatchObject({ allowed: true });
  });

  it('an existing account is refused when the provider did not verify the email', async () => {
    const address = email('unverified-existing');
    const existing = await signUp(t.db, { email: address, password: 'correct horse battery' });
    for (const [provider, profile] of [
      ['github', { id: 1, email: address, email_verified: false }],
      ['google', { sub: 'g', email: address, email_verified: false }],
      ['oidc', { sub: 'o', email: address }],
    ] as const) {
      const { allowed, token } = await oauthSignIn(provider, profile);
      expect(allowed).toBe(`/signin?error=${OAUTH_REFUSALS.email_unverified}`);
      expect(token).toBeNull();
    }
    expect((await userByEmail(address))!.id).toBe(existing.userId);
  });

  it('a new but unverified email is refused too, and no account is created', async () => {
    const address = email('unverified-new');
    const { allowed } = await oauthSignIn('oidc', { sub: 'o-2', email: address, email_verified: false });
    expect(allowed).toBe('/signin?error=OAuthEmailUnverified');
    expect(await userByEmail(address)).toBeNull();
  });

  it('a profile without a usable email is refused', async () => {
    const users = await t.db.prisma.user.count();
    for (const profile of [
      { id: 5, email_verified: true },
      { sub: 'x', email: 'not-an-email', email_verified: true },
      { sub: 'y', email: 'nul\u0000@example.com', email_verified: true },
    ]) {
      const { allowed } = await oauthSignIn('github', profile);
      expect(allowed).toBe('/signin?error=OAuthEmailMissing');
    }
    expect(await t.db.prisma.user.count()).toBe(users);
  });

  it('the same new email signing in twice at once makes one account', async () => {
    const address = email('twice');
    const both = await Promise.all([
      oauthSignIn('google', { sub: 'a', email: address, email_verified: true }),
      oauthSignIn('google', { sub: 'a', email: address, email_verified: true }),
    ]);
    expect(both.map((r) => r.allowed)).toEqual([true, true]);
    const user = await userByEmail(address);
    expect(both.map((r) => r.token?.sub)).toEqual([user!.id, user!.id]);
    expect(await t.db.prisma.org.count({ where: { memberships: { some: { userId: user!.id } } } })).toBe(1);
  });

  it('the jwt callback refuses a provider account id that did not become one of our user ids', async () => {
    await expect(
      (async () =>
        options.callbacks!.jwt!({
          token: {},
          user: { id: '12345', email: 'x@example.com' },
          account: { provider: 'github', type: 'oauth', providerAccountId: '12345' },
        }))(),
    ).rejects.toThrow(/did not resolve/);
  });
});

describe('email and password sign-in', () => {
  /** As next-auth calls it in the App Router: the request's headers as a plain object. */
  const authorize = (credentials: Record<string, string>, headers: Record<string, string> = {}) => {
    // next-auth merges `options` (where our authorize is) over the provider's defaults at load time.
    const provider = options.providers[0] as unknown as { options: { authorize: (c: Record<string, string>, req: unknown) => Promise<User | null> } };
    return provider.options.authorize(credentials, { headers, method: 'POST', body: credentials, query: {} });
  };

  it('signs in with the right password; invitations for the email apply only once the email is verified', async () => {
    const owner = await signUp(t.db, { email: email('inviter'), password: 'correct horse battery' });
    const address = email('pw');
    const created = await signUp(t.db, { email: address, password: 'correct horse battery' });
    await t.db.prisma.invitation.create({
      data: { id: `inv_pw_${n}`, orgId: owner.orgId, email: address, role: 'member', expiresAt: new Date(Date.now() + 86_400_000) },
    });
    await expect(authorize({ email: address, password: 'wrong password!' })).resolves.toBeNull();
    // Signed in, but the address was only typed at sign-up: the invitation waits.
    await expect(authorize({ email: address, password: 'correct horse battery' })).resolves.toEqual({ id: created.userId, email: address, name: null });
    expect((await userByEmail(address))!.memberships.map((m) => m.orgId)).toEqual([created.orgId]);
    await t.db.prisma.user.update({ where: { id: created.userId }, data: { emailVerifiedAt: new Date() } });
    await expect(authorize({ email: address, password: 'correct horse battery' })).resolves.toMatchObject({ id: created.userId });
    expect((await userByEmail(address))!.memberships.map((m) => m.orgId).sort()).toEqual([created.orgId, owner.orgId].sort());
  });

  it('is throttled per email before the password is checked: the 6th attempt in a minute is refused, even with the right password', async () => {
    clock.advance(WINDOW_MS);
    const address = email('throttled');
    const created = await signUp(t.db, { email: address, password: 'correct horse battery' });
    const from = (i: number) => ({ 'x-forwarded-for': `203.0.113.${i}` });
    for (let i = 0; i < CREDENTIAL_LIMITS.sign_in.perEmail; i++)
      await expect(authorize({ email: address, password: `wrong password ${i}` }, from(i))).resolves.toBeNull();
    // Another address, another case: still this email's bucket.
    await expect(authorize({ email: ` ${address.toUpperCase()}`, password: 'correct horse battery' }, from(99))).rejects.toThrow(SIGN_IN_THROTTLED);
    clock.advance(WINDOW_MS);
    await expect(authorize({ email: address, password: 'correct horse battery' }, from(99))).resolves.toMatchObject({ id: created.userId });
  });

  it('is throttled per client address (X-Forwarded-For through the trusted proxy) across emails', async () => {
    clock.advance(WINDOW_MS);
    const proxied = { 'x-forwarded-for': 'made-up, 198.51.100.23' };
    for (let i = 0; i < CREDENTIAL_LIMITS.sign_in.perAddress; i++)
      await expect(authorize({ email: email('spray'), password: 'guess guess' }, proxied)).resolves.toBeNull();
    await expect(authorize({ email: email('spray'), password: 'guess guess' }, proxied)).rejects.toThrow(SIGN_IN_THROTTLED);
    // The client-written entry on the left does not make a new bucket; another client is unaffected.
    await expect(authorize({ email: email('spray'), password: 'guess guess' }, { 'x-forwarded-for': 'fresh-each-time, 198.51.100.23' })).rejects.toThrow(
      SIGN_IN_THROTTLED,
    );
    await expect(authorize({ email: email('spray'), password: 'guess guess' }, { 'x-forwarded-for': '198.51.100.24' })).resolves.toBeNull();
  });

  it('an account made by OAuth has no password to sign in with', async () => {
    const address = email('oauth-only');
    await oauthSignIn('google', { sub: 'z', email: address, email_verified: true });
    await expect(authorize({ email: address, password: 'anything at all' })).resolves.toBeNull();
  });
});

describe('redirect after sign-in', () => {
  const redirect = (url: string) =>
    (options.callbacks!.redirect as (p: { url: string; baseUrl: string }) => string)({ url, baseUrl: 'https://dash.example.com' });

  it.each([
    // What arrives as callbackUrl=%2F%09%2Fevil.example: a browser drops the tab and reads //evil.example.
    '/\t/evil.example',
    '/\n/evil.example',
    '//evil.example',
    '/\\evil.example',
    'https://evil.example/',
    'https://dash.example.com.evil.example/',
    'javascript:alert(1)',
  ])('%j goes to the dashboard home', (url) => {
    expect(redirect(url)).toBe('https://dash.example.com/');
  });

  it('keeps same-origin paths and URLs', () => {
    expect(redirect('/claim?code=123456')).toBe('https://dash.example.com/claim?code=123456');
    expect(redirect('https://dash.example.com/invite/abc')).toBe('https://dash.example.com/invite/abc');
  });
});

describe('sessions', () => {
  it('expire: JWT sessions of 7 days, cookie and token alike', () => {
    expect(SESSION_MAX_AGE_SECONDS).toBe(604_800);
    expect(options.session).toMatchObject({ strategy: 'jwt', maxAge: SESSION_MAX_AGE_SECONDS });
    expect(options.jwt).toMatchObject({ maxAge: SESSION_MAX_AGE_SECONDS });
  });

  it('lists credentials first, then the configured OAuth providers', () => {
    expect(options.providers.map((p) => p.id)).toEqual(['credentials', 'github', 'google']);
  });
});
