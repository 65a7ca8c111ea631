import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { WINDOW_MS, createMemoryRateLimiter } from '../../rate-limit/rate-limiter.ts';
import { manualClock } from '../../../test/support/manual-clock.ts';
import { createCredentialThrottle } from '../../auth/credential-throttle.ts';
import { authenticateUser } from '../../services/users/authenticate-user.ts';
import { FIRST_ADMIN_MARKER } from '../../services/users/sign-up.ts';
import { createCaller } from '../root.ts';
import { createApiHarness, TEST_PASSWORD, type ApiHarness } from '../test-harness.ts';

let h: ApiHarness;

beforeAll(async () => {
  h = await createApiHarness();
});
afterAll(async () => {
  await h?.drop();
});

const anonymous = () => h.callerFor(null);

describe('sign-up: happy path', () => {
  it('creates the user (first one is platform admin), a personal org and an owner membership', async () => {
    await expect(anonymous().auth.signUp({ email: '  First@Example.COM ', password: 'password-one', name: 'Ada' })).resolves.toEqual({
      email: 'first@example.com',
      verificationEmail: 'off',
    });
    const user = await h.db.prisma.user.findUniqueOrThrow({ where: { email: 'first@example.com' }, include: { memberships: { include: { org: true } } } });
    // The address was typed, not proven.
    expect(user).toMatchObject({ name: 'Ada', isPlatformAdmin: true, emailVerifiedAt: null });
    expect(user.passwordHash).toMatch(/^\$2[aby]\$11\$/);
    expect(user.passwordHash).not.toContain('password-one');
    expect(user.memberships).toHaveLength(1);
    expect(user.memberships[0]).toMatchObject({ role: 'owner', org: { name: "Ada's org", balanceMicros: 0n } });
    const marker = await h.db.prisma.serverSecret.findUniqueOrThrow({ where: { name: FIRST_ADMIN_MARKER } });
    expect(marker.value).toBe(user.id);
  });

  it('makes later users ordinary members of their own org', async () => {
    await anonymous().auth.signUp({ email: 'second@example.com', password: 'password-two' });
    const user = await h.db.prisma.user.findUniqueOrThrow({ where: { email: 'second@example.com' }, include: { memberships: { include: { org: true } } } });
    expect(user.isPlatformAdmin).toBe(false);
    expect(user.memberships[0]).toMatchObject({ role: 'owner', org: { name: "second's org" } });
  });

  it('signs in with the normalised email and the right password only', async () => {
    await expect(authenticateUser(h.db.prisma, { email: 'SECOND@example.com ', password: 'password-two' })).resolves.toMatchObject({
      email: 'second@example.com',
    });
    await expect(authenticateUser(h.db.prisma, { email: 'second@example.com', password: 'password-TWO' })).resolves.toBeNull();
    await expect(authenticateUser(h.db.prisma, { email: 'nobody@example.com', password: 'password-two' })).resolves.toBeNull();
    await expect(authenticateUser(h.db.prisma, { email: 'not an email', password: 'password-two' })).resolves.toBeNull();
  });

  it('tells the signed-in user who they are', async () => {
    const user = await h.signUpUser('carol@example.com');
    await expect(user.caller.account.me()).resolves.toEqual({
      user: { id: user.user.id, email: 'carol@example.com', name: null, isPlatformAdmin: false, emailVerified: true },
      org: { id: user.orgId, name: "carol's org" },
      role: 'owner',
      canManage: true,
      mailEnabled: false,
    });
    // The dashboard's own key (made by a Play on the Voices page, say) is not one of the org's keys.
    await getOrCreateDashboardKey(h.db, user.orgId);
    await expect(user.caller.account.overview()).resolves.toMatchObject({ keys: { active: 0, total: 0 } });
    await user.caller.keys.create({ name: 'a' });
    const revoked = await user.caller.keys.create({ name: 'b' });
    await user.caller.keys.revoke({ id: revoked.id });
    await expect(user.caller.account.overview()).resolves.toEqual({
      org: { id: user.orgId, name: "carol's org" },
      role: 'owner',
      balanceUsd: '0.000000',
      keys: { active: 1, total: 2 },
      gatewayUrl: expect.stringMatching(/^https?:\/\//),
    });
  });
});

describe('sign-up: errors', () => {
  it('refuses a duplicate email, whatever its case', async () => {
    await expect(anonymous().auth.signUp({ email: 'SECOND@EXAMPLE.com', password: 'another-password' })).rejects.toMatchObject({
      code: 'CONFLICT',
      message: 'An account with this email already exists. Sign in instead.',
    });
    expect(await h.db.prisma.user.count({ where: { email: 'second@example.com' } })).toBe(1);
  });

  it('refuses short passwords and malformed emails', async () => {
    await expect(anonymous().auth.signUp({ email: 'short@example.com', password: '1234567' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'Password must be at least 8 characters.',
    });
    await expect(anonymous().auth.signUp({ email: 'no-at-sign', password: TEST_PASSWORD })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'Enter a valid email address.',
    });
    await expect(anonymous().auth.signUp({ email: 'long@example.com', password: 'é'.repeat(40) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect(await h.db.prisma.user.count({ where: { email: { in: ['short@example.com', 'long@example.com'] } } })).toBe(0);
  });

  it('requires a session for account procedures', async () => {
    await expect(anonymous().account.me()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous().account.overview()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('sign-up: throttled before the password is hashed', () => {
  // Its own throttle on a clock held inside one window, moved on by hand.
  const clock = manualClock(32_000_000 * WINDOW_MS);
  const throttle = createCredentialThrottle(createMemoryRateLimiter(clock));
  const from = (clientIp: string | null) =>
    createCaller({ db: h.db, session: null, requestedOrgId: null, clientIp, credentialThrottle: throttle, mailer: null });
  const outcomes = (calls: Array<Promise<unknown>>) =>
    Promise.all(
      calls.map((c) =>
        c.then(
          () => 'created',
          (e: { code: string }) => e.code,
        ),
      ),
    );

  it('per client address: the 6th sign-up in a minute is TOO_MANY_REQUESTS and creates nothing; other addresses go on', async () => {
    clock.advance(WINDOW_MS);
    const results = [];
    for (let i = 0; i < 7; i++) results.push(await outcomes([from('192.0.2.50').auth.signUp({ email: `flood-${i}@example.com`, password: TEST_PASSWORD })]));
    expect(results.flat()).toEqual(['created', 'created', 'created', 'created', 'created', 'TOO_MANY_REQUESTS', 'TOO_MANY_REQUESTS']);
    expect(await h.db.prisma.user.count({ where: { email: { in: ['flood-5@example.com', 'flood-6@example.com'] } } })).toBe(0);
    await expect(from('192.0.2.51').auth.signUp({ email: 'flood-5@example.com', password: TEST_PASSWORD })).resolves.toMatchObject({
      email: 'flood-5@example.com',
    });
    await expect(from('192.0.2.50').auth.signUp({ email: 'flood-7@example.com', password: TEST_PASSWORD })).rejects.toMatchObject({
      code: 'TOO_MANY_REQUESTS',
      message: expect.stringMatching(/^Too many sign-ups\. Try again in \d+ seconds?\.$/),
    });
  });

  it('per email, from any address', async () => {
    clock.advance(WINDOW_MS);
    const results = await outcomes(Array.from({ length: 4 }, (_, i) => from(`198.51.100.${i}`).auth.signUp({ email: 'Same@Example.com', password: 'short' })));
    expect(results).toEqual(['BAD_REQUEST', 'BAD_REQUEST', 'BAD_REQUEST', 'TOO_MANY_REQUESTS']);
  });

  it('clients whose address the dashboard cannot know (no trusted proxy) share one bucket', async () => {
    clock.advance(WINDOW_MS);
    const results = await outcomes(Array.from({ length: 22 }, (_, i) => from(null).auth.signUp({ email: `unknown-${i}@example.com`, password: 'short' })));
    expect(results.filter((r) => r === 'BAD_REQUEST')).toHaveLength(20);
    expect(results.filter((r) => r === 'TOO_MANY_REQUESTS')).toHaveLength(2);
  });
});

describe('sign-up: concurrency', () => {
  it('makes exactly one platform admin when the first sign-ups race', async () => {
    const fresh = await (await import('../test-harness.ts')).createApiHarness();
    try {
      const results = await Promise.allSettled(
        ['r1@example.com', 'r2@example.com', 'r3@example.com'].map((email) => fresh.callerFor(null).auth.signUp({ email, password: TEST_PASSWORD })),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      expect(ok).toBeGreaterThanOrEqual(1);
      expect(await fresh.db.prisma.user.count({ where: { isPlatformAdmin: true } })).toBe(1);
    } finally {
      await fresh.drop();
    }
  });
});
