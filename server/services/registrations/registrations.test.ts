// The registration services against a real database (SQLite, or PostgreSQL with
// TEST_DB=postgresql), with an injected clock: every row of the spec's claim table, the
// jwt-bearer grant, the verification page's lookups and their guess limits, erasure of the
// sealed keys, and the races (two exchanges, two polls at confirmation).
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import type { Database } from '../../db/database.ts';
import { verifyApiKey } from '../keys/verify-api-key.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { signUp } from '../users/sign-up.ts';
import { confirmClaim } from './confirm-claim.ts';
import { denyClaim } from './deny-claim.ts';
import { WRONG_CODE, describeClaim } from './describe-claim.ts';
import { eraseExpiredRegistrationSecrets } from './erase-expired-registration-secrets.ts';
import { exchangeAssertion } from './exchange-assertion.ts';
import { createGuessThrottle, type GuessThrottle } from './guess-throttle.ts';
import { pollClaim } from './poll-claim.ts';
import type { RegistrationDeps, RegistrationSettings } from './registration-rules.ts';
import { startClaim } from './start-claim.ts';
import { startRegistration } from './start-registration.ts';

let t: TestDatabase;
let clock: number;
let throttle: GuessThrottle;
let settings: RegistrationSettings;
let deps: RegistrationDeps;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const advance = (ms: number) => {
  clock += ms;
};

const baseSettings = (): RegistrationSettings => ({
  enabled: true,
  anonymousEnabled: true,
  trialCreditsMicros: 100_000n,
  trialMaxPerHour: 1000,
  trialMaxPerAddressPerHour: 3,
  ipRpm: 60,
  authUrl: 'https://auth.example.test',
  dashboardUrl: 'https://dash.example.test',
});

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(() => {
  clock = Date.now();
  throttle = createGuessThrottle();
  settings = baseSettings();
  deps = { db: t.db, settings, now: () => new Date(clock) };
});

let userCount = 0;
let addressCount = 0;
async function newUser(email = `user${++userCount}-${Date.now()}@example.com`) {
  const u = await signUp(t.db, { email, password: 'correct horse battery' });
  return { id: u.userId, email: u.email, orgId: u.orgId };
}
type User = Awaited<ReturnType<typeof newUser>>;

const entry = (user: User, code: string, ip: string | null = null) => ({ code, user: { id: user.id, email: user.email }, ip, throttle, orgId: user.orgId });

/** Polls after waiting out the interval, so the poll is never "too fast". */
async function pollLater(claimToken: string) {
  advance(5 * SECOND);
  return pollClaim(deps, { claimToken });
}

async function anonymousWithTrial() {
  const reg = await startRegistration(deps, { type: 'anonymous' });
  const trial = await exchangeAssertion(deps, { assertion: reg.identityAssertion });
  return { reg, trial };
}

describe('anonymous registration and the jwt-bearer grant', () => {
  it('returns an assertion, a claim token (stored only as SHA-256) and the pre-claim scopes', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    expect(reg.identityAssertion.split('.')).toHaveLength(3);
    expect(reg.claimToken).toMatch(/^claim_[A-Za-z0-9_-]{43}$/);
    expect(reg.claimTokenExpiresAt.getTime()).toBe(clock + 24 * 3600 * SECOND);
    const row = await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } });
    expect(row.claimTokenHash).toBe(createHash('sha256').update(reg.claimToken).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(reg.claimToken);
    expect(row).toMatchObject({ type: 'anonymous', status: 'pending', trialKeyId: null });
  });

  it('exchanges the assertion for an sk_svc_ trial key on a new trial org with the trial budget', async () => {
    const { reg, trial } = await anonymousWithTrial();
    expect(trial.accessToken).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
    expect(trial.scope).toBe('api:trial');
    const auth = await verifyApiKey(t.db.hot, trial.accessToken);
    expect(auth.balanceMicros).toBe(100_000n);
    const org = await t.db.prisma.org.findUniqueOrThrow({ where: { id: auth.orgId } });
    expect(org.isTrial).toBe(true);
    const ledger = await t.db.prisma.ledgerEntry.findMany({ where: { orgId: org.id } });
    expect(ledger.map((l) => l.amountMicros)).toEqual([100_000n]);
    const row = await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } });
    expect(row.trialKeyId).toBe(trial.keyId);
    expect(row.trialKeySealed).not.toContain(trial.accessToken);
  });

  it('repeating the exchange returns the same key, never a second one, also when exchanges race', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const raced = await Promise.all(Array.from({ length: 6 }, () => exchangeAssertion(deps, { assertion: reg.identityAssertion })));
    expect(new Set(raced.map((r) => r.accessToken)).size).toBe(1);
    advance(5 * MINUTE);
    const again = await exchangeAssertion(deps, { assertion: reg.identityAssertion });
    expect(again.accessToken).toBe(raced[0]!.accessToken);
    const row = await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } });
    expect(await t.db.prisma.apiKey.count({ where: { orgId: row.trialOrgId! } })).toBe(1);
    expect(await t.db.prisma.org.count({ where: { name: `Agent trial (${reg.registrationId})` } })).toBe(1);
  });

  it('refuses an expired assertion, and the sealed trial key is erased once the assertion has expired', async () => {
    const { reg } = await anonymousWithTrial();
    advance(10 * MINUTE);
    await expect(exchangeAssertion(deps, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'invalid_grant', param: 'assertion' });
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).trialKeySealed).not.toBeNull();
    await eraseExpiredRegistrationSecrets(deps);
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).trialKeySealed).toBeNull();
  });

  it('refuses tampered, foreign and garbage assertions with invalid_grant', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const [h, p, s] = reg.identityAssertion.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...payload, sub: 'reg_other' })).toString('base64url')}.${s}`;
    for (const assertion of [forged, `${h}.${p}.${s.slice(0, -2)}AA`, 'not-a-jwt', '', 'a.b.c']) {
      await expect(exchangeAssertion(deps, { assertion })).rejects.toMatchObject({ code: 'invalid_grant' });
    }
    // Signed by this server but for another issuer (the server's URL changed): refused.
    const elsewhere = { ...deps, settings: { ...settings, authUrl: 'https://other.example.test' } };
    await expect(exchangeAssertion(elsewhere, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'invalid_grant' });
  });

  it('only HS256 assertions under the server key with every claim it sets: no exp, no iat, another alg, alg none, another typ are refused', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const key = await getServerSecret(t.db.prisma, 'agent-auth:assertion-signing-key');
    const iat = Math.floor(clock / 1000);
    const claims = {
      registration_type: 'anonymous',
      iss: settings.authUrl,
      aud: settings.authUrl,
      sub: reg.registrationId,
      jti: reg.registrationId,
      iat,
      exp: iat + 600,
    };
    const sign = (payload: Record<string, unknown>, header: { alg: string; typ?: string } = { alg: 'HS256', typ: 'JWT' }) =>
      new SignJWT(payload).setProtectedHeader(header).sign(key);
    // The control: this server's own shape verifies.
    await expect(exchangeAssertion(deps, { assertion: await sign(claims) })).resolves.toMatchObject({ scope: 'api:trial' });
    const { exp: _exp, ...noExp } = claims;
    const { iat: _iat, ...noIat } = claims;
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    for (const assertion of [
      await sign(noExp),
      await sign(noIat),
      await sign(claims, { alg: 'HS512', typ: 'JWT' }),
      await sign(claims, { alg: 'HS256', typ: 'at+jwt' }),
      await sign({ ...claims, aud: 'https://other.example.test' }),
      unsigned,
    ]) {
      await expect(exchangeAssertion(deps, { assertion })).rejects.toMatchObject({ code: 'invalid_grant', param: 'assertion' });
    }
  });

  it('caps new trial orgs per rolling hour on the instance (429 slow_down), then allows them again', async () => {
    // Trials made by earlier tests count too: cap at what exists + 1.
    const existing = await t.db.prisma.org.count({ where: { isTrial: true, createdAt: { gt: new Date(clock - 3600 * SECOND) } } });
    settings.trialMaxPerHour = existing + 1;
    await anonymousWithTrial();
    const second = await startRegistration(deps, { type: 'anonymous' });
    await expect(exchangeAssertion(deps, { assertion: second.identityAssertion })).rejects.toMatchObject({ code: 'slow_down', retryAfterSeconds: 600 });
    settings.trialMaxPerHour = 0;
    await expect(exchangeAssertion(deps, { assertion: second.identityAssertion })).rejects.toMatchObject({ code: 'slow_down' });
    settings.trialMaxPerHour = existing + 1;
    advance(61 * MINUTE);
    const third = await startRegistration(deps, { type: 'anonymous' });
    await expect(exchangeAssertion(deps, { assertion: third.identityAssertion })).resolves.toMatchObject({ scope: 'api:trial' });
  });

  it('caps anonymous registrations per client address per rolling hour (429 slow_down, Retry-After), other addresses unaffected', async () => {
    const address = `198.51.100.${++addressCount}`;
    const first = await startRegistration(deps, { type: 'anonymous', clientAddress: address });
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: first.registrationId } })).clientAddress).toBe(address);
    advance(10 * MINUTE);
    await startRegistration(deps, { type: 'anonymous', clientAddress: address });
    await startRegistration(deps, { type: 'anonymous', clientAddress: address });
    advance(5 * MINUTE);
    // The fourth waits until the first has left the hour: 60 - 15 minutes.
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: address })).rejects.toMatchObject({
      code: 'slow_down',
      retryAfterSeconds: 45 * 60,
    });
    // The refused one left no row behind (it would count against the address).
    expect(await t.db.prisma.agentRegistration.count({ where: { clientAddress: address } })).toBe(3);
    // Another address, an unknown one, and service_auth (no trial) are not held by it.
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: `198.51.100.${++addressCount}` })).resolves.toMatchObject({
      registrationType: 'anonymous',
    });
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: null })).resolves.toMatchObject({ registrationType: 'anonymous' });
    await expect(startRegistration(deps, { type: 'service_auth', loginHint: 'cap@example.com', clientAddress: address })).resolves.toMatchObject({
      registrationType: 'service_auth',
    });
    advance(45 * MINUTE - 1);
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: address })).rejects.toMatchObject({ code: 'slow_down', retryAfterSeconds: 1 });
    advance(1);
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: address })).resolves.toMatchObject({ registrationType: 'anonymous' });
  });

  it('per-address cap under concurrency: 20 registrations at once from one address never pass it together', async () => {
    const address = `198.51.100.${++addressCount}`;
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => startRegistration(deps, { type: 'anonymous', clientAddress: address })));
    const admitted = results.filter((r) => r.status === 'fulfilled').length;
    expect(admitted).toBeLessThanOrEqual(3);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'slow_down' });
    expect(await t.db.prisma.agentRegistration.count({ where: { clientAddress: address } })).toBe(admitted);
    // A burst may be refused more than the cap requires (each counts the others' rows before
    // they are deleted), but the refused leave nothing behind: one at a time, the address
    // gets exactly the rest of its three.
    for (let i = admitted; i < 3; i++) await startRegistration(deps, { type: 'anonymous', clientAddress: address });
    await expect(startRegistration(deps, { type: 'anonymous', clientAddress: address })).rejects.toMatchObject({ code: 'slow_down' });
    expect(await t.db.prisma.agentRegistration.count({ where: { clientAddress: address } })).toBe(3);
  });

  it('a trial budget of 0 gives a key on an org with no credit and no ledger row', async () => {
    settings.trialCreditsMicros = 0n;
    const { trial } = await anonymousWithTrial();
    const auth = await verifyApiKey(t.db.hot, trial.accessToken);
    expect(auth.balanceMicros).toBe(0n);
    expect(await t.db.prisma.ledgerEntry.count({ where: { orgId: auth.orgId } })).toBe(0);
  });
});

describe('registration errors', () => {
  it('anonymous_not_enabled when anonymous registration is off (start and exchange)', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    settings.anonymousEnabled = false;
    await expect(startRegistration(deps, { type: 'anonymous' })).rejects.toMatchObject({ code: 'anonymous_not_enabled' });
    await expect(exchangeAssertion(deps, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'anonymous_not_enabled' });
    // service_auth still works.
    await expect(startRegistration(deps, { type: 'service_auth', loginHint: 'a@example.com' })).resolves.toMatchObject({ registrationType: 'service_auth' });
  });

  it('identity_assertion_not_enabled for ID-JAG assertions', async () => {
    await expect(startRegistration(deps, { type: 'identity_assertion' })).rejects.toMatchObject({ code: 'identity_assertion_not_enabled' });
  });

  it.each([
    '',
    'not-an-email',
    'a@b',
    ' @example.com',
    'x'.repeat(250) + '@example.com',
    'two@@example.com',
    'nul\u0000byte@example.com',
    'bell\u0007@example.com',
    'del\u007f@example.com',
  ])('invalid_login_hint for %j', async (hint) => {
    await expect(startRegistration(deps, { type: 'service_auth', loginHint: hint })).rejects.toMatchObject({ code: 'invalid_login_hint', param: 'login_hint' });
    const reg = await startRegistration(deps, { type: 'anonymous' });
    await expect(startClaim(deps, { claimToken: reg.claimToken, email: hint })).rejects.toMatchObject({ code: 'invalid_login_hint', param: 'email' });
  });

  it('invalid_login_hint for the first claim of an anonymous registration without an email', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    await expect(startClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'invalid_login_hint' });
  });

  it('agent_auth_unavailable on every operation when registration is turned off', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    settings.enabled = false;
    const calls = [
      startRegistration(deps, { type: 'anonymous' }),
      startRegistration(deps, { type: 'service_auth', loginHint: 'a@example.com' }),
      exchangeAssertion(deps, { assertion: reg.identityAssertion }),
      startClaim(deps, { claimToken: reg.claimToken, email: 'a@example.com' }),
      pollClaim(deps, { claimToken: reg.claimToken }),
    ];
    for (const call of calls) await expect(call).rejects.toMatchObject({ code: 'agent_auth_unavailable' });
  });

  it('a store that fails answers 503: agent_auth_unavailable to start/claim, temporarily_unavailable to the token grants', async () => {
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const down = { ...deps, db: brokenDatabase(t.db) };
    await expect(startRegistration(down, { type: 'anonymous' })).rejects.toMatchObject({ code: 'agent_auth_unavailable' });
    await expect(startClaim(down, { claimToken: reg.claimToken, email: 'a@example.com' })).rejects.toMatchObject({ code: 'agent_auth_unavailable' });
    await expect(pollClaim(down, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'temporarily_unavailable' });
    await expect(exchangeAssertion(down, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'temporarily_unavailable' });
    // Retrying once the store is back is safe: one key.
    const first = await exchangeAssertion(deps, { assertion: reg.identityAssertion });
    await expect(exchangeAssertion(deps, { assertion: reg.identityAssertion })).resolves.toMatchObject({ accessToken: first.accessToken });
  });

  it("an unknown claim token: 410 claim_expired on the claim endpoint, invalid_grant on the poll (the spec's claim table)", async () => {
    await expect(startClaim(deps, { claimToken: 'claim_nope', email: 'a@example.com' })).rejects.toMatchObject({ code: 'claim_expired' });
    await expect(pollClaim(deps, { claimToken: 'claim_nope' })).rejects.toMatchObject({ code: 'invalid_grant', param: 'claim_token' });
  });
});

describe('the claim state table (anonymous registration)', () => {
  it('walks pending -> slow_down -> expired_token -> new code -> confirmed -> same key for 10 minutes -> invalid_grant', async () => {
    const user = await newUser();
    const { reg, trial } = await anonymousWithTrial();
    const token = reg.claimToken;

    // No claim yet: pending.
    await expect(pollLater(token)).rejects.toMatchObject({ code: 'authorization_pending' });
    const first = await startClaim(deps, { claimToken: token, email: user.email.toUpperCase() });
    expect(first.claim).toMatchObject({ expiresIn: 600, interval: 5, verificationUri: 'https://dash.example.test/claim', email: user.email });
    expect(first.claim.userCode).toMatch(/^\d{6}$/);

    // pending | poll | user has not entered the code -> authorization_pending
    await expect(pollLater(token)).rejects.toMatchObject({ code: 'authorization_pending' });
    // pending | poll | polling too fast -> 429 slow_down (a too-fast poll also restarts the wait)
    advance(1 * SECOND);
    await expect(pollClaim(deps, { claimToken: token })).rejects.toMatchObject({
      code: 'slow_down',
      retryAfterSeconds: 60,
      message: expect.stringContaining('wait a minute'),
    });
    advance(3 * SECOND);
    await expect(pollClaim(deps, { claimToken: token })).rejects.toMatchObject({ code: 'slow_down' });
    await expect(pollLater(token)).rejects.toMatchObject({ code: 'authorization_pending' });

    // pending | poll | the 10-minute code has expired -> expired_token
    advance(10 * MINUTE);
    await expect(pollLater(token)).rejects.toMatchObject({ code: 'expired_token' });
    // The page's answer is the one every code that opens nothing gets.
    await expect(describeClaim(deps, entry(user, first.claim.userCode))).rejects.toMatchObject({ code: 'invalid_grant', message: WRONG_CODE });

    // New code: {claim_token} alone keeps the email; the new code works, the old one never again.
    const second = await startClaim(deps, { claimToken: token });
    expect(second.claim.email).toBe(user.email);
    await expect(pollLater(token)).rejects.toMatchObject({ code: 'authorization_pending' });

    // The page shows what is authorised.
    const described = await describeClaim(deps, entry(user, second.claim.userCode));
    expect(described).toMatchObject({
      registrationId: reg.registrationId,
      registrationType: 'anonymous',
      email: user.email,
      scopes: ['api'],
      trialKeyPrefix: trial.accessToken.slice(0, 11),
    });

    // pending | user enters the code | confirmed -> claimed; the trial key stops at once.
    await expect(confirmClaim(deps, entry(user, second.claim.userCode))).resolves.toEqual({ registrationId: reg.registrationId, orgId: user.orgId });
    await expect(verifyApiKey(t.db.hot, trial.accessToken)).rejects.toMatchObject({ code: 'api_key_disabled' });
    // Single use.
    await expect(confirmClaim(deps, entry(user, second.claim.userCode))).rejects.toMatchObject({ code: 'invalid_grant' });
    // already_claimed on the claim endpoint; the trial exchange is over too.
    await expect(startClaim(deps, { claimToken: token })).rejects.toMatchObject({ code: 'already_claimed' });
    await expect(exchangeAssertion(deps, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'invalid_grant' });

    // claimed: the next poll answers 200 with a new key on the user's org (even right away).
    advance(1 * SECOND);
    const delivered = await pollClaim(deps, { claimToken: token });
    expect(delivered.accessToken).toMatch(/^sk_svc_/);
    expect(delivered.accessToken).not.toBe(trial.accessToken);
    expect(delivered.scope).toBe('api');
    await expect(verifyApiKey(t.db.hot, delivered.accessToken)).resolves.toMatchObject({ orgId: user.orgId, status: 'active' });

    // claimed | poll | within 10 minutes of delivery -> the same key, never a second one.
    for (const wait of [1 * SECOND, 4 * MINUTE, 5 * MINUTE + 58 * SECOND]) {
      advance(wait);
      await expect(pollClaim(deps, { claimToken: token })).resolves.toMatchObject({ accessToken: delivered.accessToken, keyId: delivered.keyId });
    }
    const row = await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } });
    expect(row.issuedKeySealed).not.toBeNull();
    expect(row.issuedKeySealed).not.toContain(delivered.accessToken);

    // any | poll | key delivered more than 10 minutes ago -> invalid_grant; the sealed copy is erased.
    advance(2 * SECOND);
    await expect(pollClaim(deps, { claimToken: token })).rejects.toMatchObject({ code: 'invalid_grant' });
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).issuedKeySealed).toBeNull();
    await expect(pollClaim(deps, { claimToken: token })).rejects.toMatchObject({ code: 'invalid_grant' });
    // The delivered key keeps working; it is an ordinary key of the user's org now.
    await expect(verifyApiKey(t.db.hot, delivered.accessToken)).resolves.toMatchObject({ orgId: user.orgId });
    expect(await t.db.prisma.apiKey.count({ where: { orgId: user.orgId } })).toBe(1);
  });

  it('any | registration older than 24 h -> invalid_grant on poll, 410 claim_expired on the claim endpoint', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    advance(24 * 3600 * SECOND - 1);
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'expired_token' });
    advance(1);
    await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'invalid_grant', message: expect.stringContaining('24 hours') });
    await expect(startClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'claim_expired' });
    await expect(describeClaim(deps, entry(user, attempt.claim.userCode))).rejects.toMatchObject({ code: 'invalid_grant', message: WRONG_CODE });
    // A week after it ended the row is deleted; the poll still answers invalid_grant, not 410.
    advance(7 * 24 * 3600 * SECOND);
    expect((await eraseExpiredRegistrationSecrets(deps)).purged).toBeGreaterThanOrEqual(1);
    expect(await t.db.prisma.agentRegistration.count({ where: { id: reg.registrationId } })).toBe(0);
    await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'invalid_grant', param: 'claim_token' });
    await expect(startClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'claim_expired' });
  });

  it('a registration confirmed but collected after 24 h gets invalid_grant and no key is ever created', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await confirmClaim(deps, entry(user, attempt.claim.userCode));
    advance(24 * 3600 * SECOND);
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'invalid_grant' });
    expect(await t.db.prisma.apiKey.count({ where: { orgId: user.orgId } })).toBe(0);
  });

  it('two polls racing at confirmation yield one key', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await confirmClaim(deps, entry(user, attempt.claim.userCode));
    const polls = await Promise.all(Array.from({ length: 8 }, () => pollClaim(deps, { claimToken: reg.claimToken })));
    expect(new Set(polls.map((p) => p.accessToken)).size).toBe(1);
    expect(await t.db.prisma.apiKey.count({ where: { orgId: user.orgId } })).toBe(1);
  });

  it('a new code requested while the user confirms: once the confirmation is in, the agent gets already_claimed, not a code', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    // The restart reads the registration (still pending), then its transaction waits until the confirmation has committed.
    const gate = deferred();
    const restart = startClaim({ ...deps, db: withGatedTransactions(t.db, gate.promise) }, { claimToken: reg.claimToken });
    await expect(confirmClaim(deps, entry(user, attempt.claim.userCode))).resolves.toMatchObject({ orgId: user.orgId });
    gate.resolve();
    await expect(restart).rejects.toMatchObject({ code: 'already_claimed' });
    expect(await t.db.prisma.claimAttempt.count({ where: { registrationId: reg.registrationId } })).toBe(1);
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).resolves.toMatchObject({ scope: 'api' });
  });

  it('a new code requested while the user declines: 410 claim_expired, and no code is made', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const gate = deferred();
    const restart = startClaim({ ...deps, db: withGatedTransactions(t.db, gate.promise) }, { claimToken: reg.claimToken });
    await denyClaim(deps, entry(user, reg.claim.userCode));
    gate.resolve();
    await expect(restart).rejects.toMatchObject({ code: 'claim_expired' });
    expect(await t.db.prisma.claimAttempt.count({ where: { registrationId: reg.registrationId } })).toBe(1);
  });

  it('confirm and deny of one code at once: exactly one decision wins, and the registration follows it', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const [confirmed, denied] = await Promise.allSettled([
      confirmClaim(deps, entry(user, reg.claim.userCode)),
      denyClaim(deps, entry(user, reg.claim.userCode)),
    ]);
    expect([confirmed.status, denied.status].sort()).toEqual(['fulfilled', 'rejected']);
    const row = await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } });
    if (confirmed.status === 'fulfilled') {
      expect(row.status).toBe('claimed');
      await expect(pollLater(reg.claimToken)).resolves.toMatchObject({ scope: 'api' });
    } else {
      expect(row.status).toBe('pending');
      await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'invalid_grant' });
    }
  });

  it('a declined registration gets no trial key from its (still unexpired) assertion', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await denyClaim(deps, entry(user, attempt.claim.userCode));
    await expect(exchangeAssertion(deps, { assertion: reg.identityAssertion })).rejects.toMatchObject({ code: 'invalid_grant', param: 'assertion' });
    expect(await t.db.prisma.org.count({ where: { name: `Agent trial (${reg.registrationId})` } })).toBe(0);
  });

  it('confirming erases the sealed trial key at once (the trial key is revoked; nothing is left to redeliver)', async () => {
    const user = await newUser();
    const { reg } = await anonymousWithTrial();
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).trialKeySealed).not.toBeNull();
    await confirmClaim(deps, entry(user, attempt.claim.userCode));
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).trialKeySealed).toBeNull();
  });

  it('a sealed key is erased after the window even if the agent never polls again; old registrations are purged after a week', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await confirmClaim(deps, entry(user, attempt.claim.userCode));
    await pollClaim(deps, { claimToken: reg.claimToken });
    advance(10 * MINUTE - 1);
    await eraseExpiredRegistrationSecrets(deps);
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).issuedKeySealed).not.toBeNull();
    advance(1);
    await eraseExpiredRegistrationSecrets(deps);
    expect((await t.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registrationId } })).issuedKeySealed).toBeNull();
    advance(24 * 3600 * SECOND + 7 * 24 * 3600 * SECOND);
    await eraseExpiredRegistrationSecrets(deps);
    expect(await t.db.prisma.agentRegistration.findUnique({ where: { id: reg.registrationId } })).toBeNull();
    expect(await t.db.prisma.claimAttempt.count({ where: { registrationId: reg.registrationId } })).toBe(0);
  });

  it('the sweep says when the next sealed key is due, to the millisecond: the end of the assertion, then the end of the redelivery window', async () => {
    // Far enough ahead that every sealed key of the earlier tests has ended and is erased now.
    advance(60 * 24 * 3600 * SECOND);
    await eraseExpiredRegistrationSecrets(deps);
    expect((await eraseExpiredRegistrationSecrets(deps)).nextDueAt).toBeNull();

    const user = await newUser();
    const { reg } = await anonymousWithTrial();
    expect((await eraseExpiredRegistrationSecrets(deps)).nextDueAt).toEqual(new Date(clock + 10 * MINUTE));
    advance(3 * MINUTE);
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await confirmClaim(deps, entry(user, attempt.claim.userCode));
    expect((await eraseExpiredRegistrationSecrets(deps)).nextDueAt).toBeNull();
    await pollClaim(deps, { claimToken: reg.claimToken });
    const due = new Date(clock + 10 * MINUTE);
    advance(10 * MINUTE - 1);
    expect(await eraseExpiredRegistrationSecrets(deps)).toMatchObject({ erased: 0, nextDueAt: due });
    advance(1);
    expect(await eraseExpiredRegistrationSecrets(deps)).toMatchObject({ erased: 1, nextDueAt: null });
  });

  it('the user declines: the poll answers invalid_grant and a new code is refused with claim_expired', async () => {
    const user = await newUser();
    const { reg, trial } = await anonymousWithTrial();
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await expect(denyClaim(deps, entry(user, attempt.claim.userCode))).resolves.toEqual({ registrationId: reg.registrationId });
    await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'invalid_grant', message: expect.stringContaining('declined') });
    await expect(startClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'claim_expired' });
    await expect(confirmClaim(deps, entry(user, attempt.claim.userCode))).rejects.toMatchObject({ code: 'invalid_grant' });
    // The trial key is not the user's to end: it keeps its trial budget.
    await expect(verifyApiKey(t.db.hot, trial.accessToken)).resolves.toMatchObject({ status: 'active' });
  });

  it('on claim, the trial org keeps its remaining credit; voices, saves and dictionaries move to the user org', async () => {
    const user = await newUser();
    const { reg, trial } = await anonymousWithTrial();
    const trialOrgId = (await verifyApiKey(t.db.hot, trial.accessToken)).orgId;
    const platformVoice = await t.db.prisma.voice.create({ data: { id: `voice_p_${reg.registrationId}`, name: 'platform', tags: [] } });
    const voice = await t.db.prisma.voice.create({ data: { id: `voice_t_${reg.registrationId}`, orgId: trialOrgId, name: 'trial clone', tags: [] } });
    const dict = await t.db.prisma.pronunciationDict.create({ data: { id: `dict_t_${reg.registrationId}`, orgId: trialOrgId, name: 'trial dict' } });
    // Both orgs saved the platform voice: the user keeps one save of it.
    await t.db.prisma.voiceSave.create({ data: { voiceId: platformVoice.id, orgId: trialOrgId } });
    await t.db.prisma.voiceSave.create({ data: { voiceId: platformVoice.id, orgId: user.orgId } });
    await t.db.prisma.voiceSave.create({ data: { voiceId: voice.id, orgId: trialOrgId } });
    const userBalance = (await t.db.prisma.org.findUniqueOrThrow({ where: { id: user.orgId } })).balanceMicros;

    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: user.email });
    await confirmClaim(deps, entry(user, attempt.claim.userCode));

    expect((await t.db.prisma.voice.findUniqueOrThrow({ where: { id: voice.id } })).orgId).toBe(user.orgId);
    expect((await t.db.prisma.pronunciationDict.findUniqueOrThrow({ where: { id: dict.id } })).orgId).toBe(user.orgId);
    expect((await t.db.prisma.voiceSave.findMany({ where: { orgId: user.orgId }, orderBy: { voiceId: 'asc' } })).map((s) => s.voiceId).sort()).toEqual(
      [platformVoice.id, voice.id].sort(),
    );
    expect(await t.db.prisma.voiceSave.count({ where: { orgId: trialOrgId } })).toBe(0);
    expect((await t.db.prisma.org.findUniqueOrThrow({ where: { id: trialOrgId } })).balanceMicros).toBe(100_000n);
    expect((await t.db.prisma.org.findUniqueOrThrow({ where: { id: user.orgId } })).balanceMicros).toBe(userBalance);
  });
});

describe('service_auth registration', () => {
  it('answers the full registration record with a first code; only the login_hint account can confirm', async () => {
    const owner = await newUser();
    const other = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: `  ${owner.email.toUpperCase()} ` });
    expect(reg).toMatchObject({
      registrationType: 'service_auth',
      claim: { expiresIn: 600, interval: 5, email: owner.email, verificationUri: 'https://dash.example.test/claim' },
    });
    await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'authorization_pending' });

    // Another address on the claim endpoint is refused; the same one (any case) restarts.
    await expect(startClaim(deps, { claimToken: reg.claimToken, email: other.email })).rejects.toMatchObject({ code: 'invalid_login_hint' });
    const restarted = await startClaim(deps, { claimToken: reg.claimToken, email: owner.email.toUpperCase() });
    // The first code stopped working when the second was issued.
    await expect(describeClaim(deps, entry(owner, reg.claim.userCode))).rejects.toMatchObject({
      code: 'invalid_grant',
      message: expect.stringContaining(WRONG_CODE),
    });

    // The right code from the wrong account: refused with the answer any wrong code gets.
    await expect(confirmClaim(deps, entry(other, restarted.claim.userCode))).rejects.toMatchObject({ code: 'invalid_grant', message: WRONG_CODE });
    await expect(confirmClaim(deps, entry(owner, restarted.claim.userCode))).resolves.toMatchObject({ orgId: owner.orgId });
    const key = await pollLater(reg.claimToken);
    await expect(verifyApiKey(t.db.hot, key.accessToken)).resolves.toMatchObject({ orgId: owner.orgId });
  });
});

describe('guessing codes on the verification page', () => {
  it('accepts the code with spaces or a dash; refuses what is not 6 digits without counting it', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const c = reg.claim.userCode;
    await expect(describeClaim(deps, entry(user, `${c.slice(0, 3)} ${c.slice(3)}`))).resolves.toMatchObject({ registrationId: reg.registrationId });
    await expect(describeClaim(deps, entry(user, `${c.slice(0, 3)}-${c.slice(3)}`))).resolves.toMatchObject({ registrationId: reg.registrationId });
    for (const bad of ['12345', '1234567', 'abcdef', '', '１２３４５６']) {
      await expect(describeClaim(deps, entry(user, bad))).rejects.toMatchObject({ code: 'invalid_request', param: 'code' });
    }
    expect((await t.db.prisma.claimAttempt.findFirstOrThrow({ where: { registrationId: reg.registrationId } })).failedGuesses).toBe(0);
  });

  it('per code: 5 wrong codes by the claim account lock the code; the agent is told to get a new one', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const wrong = wrongCode(reg.claim.userCode);
    // Different IPs and throttles: only the per-code bound applies.
    // Each answer says how many wrong entries the user's code has left; the last says it is locked.
    const left = [];
    for (let i = 0; i < 5; i++) {
      const error = await describeClaim(deps, { ...entry(user, wrong, `10.0.0.${i}`), throttle: createGuessThrottle() }).catch(
        (e: { code: string; message: string }) => e,
      );
      expect(error).toMatchObject({ code: 'invalid_grant', message: expect.stringContaining(WRONG_CODE) });
      left.push((error as { message: string }).message.slice(WRONG_CODE.length + 1));
    }
    expect(left).toEqual([
      `4 wrong entries left before the code waiting for ${user.email} is locked.`,
      `3 wrong entries left before the code waiting for ${user.email} is locked.`,
      `2 wrong entries left before the code waiting for ${user.email} is locked.`,
      `1 wrong entry left before the code waiting for ${user.email} is locked.`,
      `That was the last try: the code waiting for ${user.email} is now locked. Ask the agent for a new code.`,
    ]);
    // After the lock, the right code gets the honest answer too: locked, ask for a new code.
    const locked = `The code waiting for ${user.email} is locked after 5 wrong entries, so no code works now, not even the right one. Ask the agent for a new code: it works at once.`;
    await expect(confirmClaim(deps, { ...entry(user, reg.claim.userCode), throttle: createGuessThrottle() })).rejects.toMatchObject({
      code: 'invalid_grant',
      message: locked,
    });
    await expect(describeClaim(deps, { ...entry(user, wrong), throttle: createGuessThrottle() })).rejects.toMatchObject({
      code: 'invalid_grant',
      message: locked,
    });
    await expect(pollLater(reg.claimToken)).rejects.toMatchObject({ code: 'expired_token', message: expect.stringContaining('locked') });
    // A new code works.
    const fresh = await startClaim(deps, { claimToken: reg.claimToken });
    await expect(confirmClaim(deps, { ...entry(user, fresh.claim.userCode), throttle: createGuessThrottle() })).resolves.toMatchObject({ orgId: user.orgId });
  });

  it('entries sent at once cannot pass the per-code bound: 20 wrong codes at once use up 5 tries, then the code is locked', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const wrongCodes = Array.from({ length: 20 }, (_, i) => String((Number(reg.claim.userCode) + 1 + i) % 1_000_000).padStart(6, '0'));
    // A throttle each: only the per-code bound applies.
    const results = await Promise.allSettled(wrongCodes.map((c) => describeClaim(deps, { ...entry(user, c), throttle: createGuessThrottle() })));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect((await t.db.prisma.claimAttempt.findFirstOrThrow({ where: { registrationId: reg.registrationId } })).failedGuesses).toBe(5);
    await expect(confirmClaim(deps, { ...entry(user, reg.claim.userCode), throttle: createGuessThrottle() })).rejects.toMatchObject({
      code: 'invalid_grant',
      message: expect.stringContaining('is locked after 5 wrong entries'),
    });
  });

  it('a right code gives its try back: four wrong entries, then check and confirm with the right one still work', async () => {
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    for (let i = 1; i <= 4; i++) {
      await expect(describeClaim(deps, { ...entry(user, wrongCode(reg.claim.userCode, i)), throttle: createGuessThrottle() })).rejects.toMatchObject({
        code: 'invalid_grant',
      });
    }
    await expect(describeClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ registrationId: reg.registrationId });
    await expect(describeClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ registrationId: reg.registrationId });
    await expect(confirmClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ orgId: user.orgId });
  });

  it('per user: 25 wrong codes sent at once are counted before they are compared (10 answered, 15 slow_down)', async () => {
    clock = Math.floor(clock / (10 * MINUTE)) * 10 * MINUTE + SECOND;
    const user = await newUser();
    const results = await Promise.allSettled(Array.from({ length: 25 }, (_, i) => describeClaim(deps, entry(user, String(500000 + i)))));
    const codes = results.map((r) => (r.status === 'rejected' ? (r.reason as { code: string }).code : 'resolved'));
    expect(codes.filter((c) => c === 'slow_down')).toHaveLength(15);
    expect(codes.filter((c) => c === 'invalid_grant')).toHaveLength(10);
  });

  it('the right code, a malformed code and a store that fails do not count against the user', async () => {
    clock = Math.floor(clock / (10 * MINUTE)) * 10 * MINUTE + SECOND;
    const user = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    const down = { ...deps, db: brokenDatabase(t.db) };
    for (let i = 0; i < 12; i++) {
      await expect(describeClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ registrationId: reg.registrationId });
      await expect(describeClaim(deps, entry(user, 'nope'))).rejects.toMatchObject({ code: 'invalid_request' });
      await expect(describeClaim(down, entry(user, reg.claim.userCode))).rejects.toMatchObject({ code: 'agent_auth_unavailable' });
    }
    for (let i = 1; i <= 4; i++)
      await expect(describeClaim(deps, entry(user, wrongCode(reg.claim.userCode, i)))).rejects.toMatchObject({ code: 'invalid_grant' });
    await expect(confirmClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ orgId: user.orgId });
  });

  it('the right code from other accounts gets the answer a made-up code gets, and spends none of its tries', async () => {
    const owner = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: owner.email });
    for (let i = 0; i < 6; i++) {
      const intruder = await newUser();
      const rightCode = await confirmClaim(deps, entry(intruder, reg.claim.userCode)).catch((e: unknown) => e);
      const madeUp = await confirmClaim(deps, entry(intruder, wrongCode(reg.claim.userCode))).catch((e: unknown) => e);
      // Nothing tells the intruder the code is live for someone else.
      expect(rightCode).toMatchObject({ code: 'invalid_grant', message: WRONG_CODE, param: 'code' });
      expect(madeUp).toMatchObject({ code: 'invalid_grant', message: WRONG_CODE, param: 'code' });
    }
    expect((await t.db.prisma.claimAttempt.findFirstOrThrow({ where: { registrationId: reg.registrationId } })).failedGuesses).toBe(0);
    await expect(confirmClaim(deps, entry(owner, reg.claim.userCode))).resolves.toMatchObject({ orgId: owner.orgId });
  });

  it('per user: after 10 wrong codes in 10 minutes even the right code waits (429 slow_down)', async () => {
    // Windows are fixed 10-minute slots: start just after one begins, so the code outlives it.
    clock = Math.floor(clock / (10 * MINUTE)) * 10 * MINUTE + SECOND;
    const user = await newUser();
    for (let i = 0; i < 10; i++) await expect(describeClaim(deps, entry(user, String(100000 + i)))).rejects.toMatchObject({ code: 'invalid_grant' });
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.email });
    await expect(confirmClaim(deps, entry(user, reg.claim.userCode))).rejects.toMatchObject({ code: 'slow_down', param: 'code' });
    advance(9 * MINUTE + 59.5 * SECOND);
    await expect(confirmClaim(deps, entry(user, reg.claim.userCode))).resolves.toMatchObject({ orgId: user.orgId });
  });

  it('per IP: after 30 wrong codes from one address, every account there waits', async () => {
    // Ten accounts, three wrong codes each: under the per-user limit, at the per-IP one.
    for (let i = 0; i < 10; i++) {
      const guesser = await newUser();
      for (let j = 0; j < 3; j++) {
        await expect(describeClaim(deps, entry(guesser, String(200000 + i * 3 + j), '192.0.2.7'))).rejects.toMatchObject({ code: 'invalid_grant' });
      }
    }
    const fresh = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: fresh.email });
    await expect(describeClaim(deps, entry(fresh, reg.claim.userCode, '192.0.2.7'))).rejects.toMatchObject({ code: 'slow_down' });
    await expect(describeClaim(deps, entry(fresh, reg.claim.userCode, '192.0.2.8'))).resolves.toMatchObject({ registrationId: reg.registrationId });
  });
});

function wrongCode(code: string, offset = 1): string {
  return String((Number(code) + offset) % 1_000_000).padStart(6, '0');
}

/** A database whose Prisma client fails every query, as when the database is unreachable. */
function brokenDatabase(db: Database): Database {
  const fail = () => Promise.reject(Object.assign(new Error("Can't reach database server"), { code: 'P1001' }));
  const model = new Proxy({}, { get: () => fail });
  const prisma = new Proxy({}, { get: (_t, prop) => (prop === '$transaction' ? fail : model) }) as Database['prisma'];
  return { ...db, prisma };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** The same database, but every interactive transaction starts only once `gate` resolves. */
function withGatedTransactions(db: Database, gate: Promise<void>): Database {
  const prisma = new Proxy(db.prisma, {
    get(target, prop) {
      if (prop === '$transaction') return async (...args: unknown[]) => (await gate, (target.$transaction as (...a: unknown[]) => unknown)(...args));
      return Reflect.get(target, prop, target);
    },
  });
  return { ...db, prisma };
}
