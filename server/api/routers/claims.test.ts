import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/env.ts';
import { verifyApiKey } from '../../services/keys/verify-api-key.ts';
import { exchangeAssertion } from '../../services/registrations/exchange-assertion.ts';
import { pollClaim } from '../../services/registrations/poll-claim.ts';
import { WRONG_CODE } from '../../services/registrations/describe-claim.ts';
import { MAX_FAILED_GUESSES, registrationSettings, type RegistrationDeps } from '../../services/registrations/registration-rules.ts';
import { startClaim } from '../../services/registrations/start-claim.ts';
import { startRegistration } from '../../services/registrations/start-registration.ts';
import { addMember } from '../../services/orgs/add-member.ts';
import { createOrgForUser } from '../../services/orgs/create-org.ts';
import { createCaller } from '../root.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let deps: RegistrationDeps;
let n = 0;

beforeAll(async () => {
  h = await createApiHarness();
  deps = { db: h.db, settings: registrationSettings(loadConfig()), now: () => new Date() };
});
afterAll(async () => {
  await h?.drop();
});

const newUser = () => h.signUpUser(`claims-${++n}-${Date.now()}@example.com`);
const serviceAuthFor = (user: TestUser) => startRegistration(deps, { type: 'service_auth', loginHint: user.user.email });
const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

describe('claims: happy path', () => {
  it('check shows what is authorised, confirm claims it for the user org, the agent gets its key', async () => {
    const alice = await newUser();
    const reg = await serviceAuthFor(alice);
    const checked = await alice.caller.claims.check({ code: reg.claim.userCode });
    expect(checked).toMatchObject({
      registrationId: reg.registrationId,
      registrationType: 'service_auth',
      email: alice.user.email,
      scopes: ['api'],
      trialKeyPrefix: null,
      org: { id: alice.orgId },
    });
    expect(new Date(checked.codeExpiresAt).getTime()).toBeGreaterThan(Date.now());

    await expect(alice.caller.claims.confirm({ code: ` ${reg.claim.userCode.slice(0, 3)} ${reg.claim.userCode.slice(3)} ` })).resolves.toMatchObject({
      registrationId: reg.registrationId,
      orgId: alice.orgId,
    });
    const key = await pollClaim(deps, { claimToken: reg.claimToken });
    await expect(verifyApiKey(h.db.hot, key.accessToken)).resolves.toMatchObject({ orgId: alice.orgId });
    // Single use.
    await expect(alice.caller.claims.confirm({ code: reg.claim.userCode })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: WRONG_CODE });
  });

  it('check says who the agent is (its name, its software, when and from which network it registered) and which orgs may pay: those the user owns, the one they act for first', async () => {
    const dana = await newUser();
    const team = await createOrgForUser(h.db, { userId: dana.user.id, name: 'Dana team' });
    // An org Dana only belongs to: she may not have it pay.
    const other = await newUser();
    await addMember(h.db, { orgId: other.orgId, email: dana.user.email, role: 'member', invitedByUserId: other.user.id });
    const reg = await startRegistration(deps, {
      type: 'service_auth',
      loginHint: dana.user.email,
      clientAddress: '203.0.113.77',
      clientName: 'Support Bot',
      userAgent: 'support-bot/2.1 (node)',
    });
    const checked = await dana.caller.claims.check({ code: reg.claim.userCode });
    expect(checked).toMatchObject({
      agentName: 'Support Bot',
      userAgent: 'support-bot/2.1 (node)',
      network: '203.0.113.0/24',
      canConfirm: true,
      orgs: [
        { id: dana.orgId, name: expect.any(String) },
        { id: team.id, name: 'Dana team' },
      ],
    });
    expect(checked.orgs.map((o) => o.id)).not.toContain(other.orgId);
    expect(Math.abs(new Date(checked.registeredAt).getTime() - Date.now())).toBeLessThan(60_000);
    // Acting for the team org: it comes first.
    expect((await h.callerFor(dana.user, team.id).claims.check({ code: reg.claim.userCode })).orgs.map((o) => o.id)).toEqual([team.id, dana.orgId]);

    // The org she only belongs to, or one that is not hers, is refused, and the claim stays open.
    for (const orgId of [other.orgId, 'org_nope']) {
      await expect(dana.caller.claims.confirm({ code: reg.claim.userCode, orgId })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    }
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'authorization_pending' });
    // She chooses the team org: the key is issued there.
    await expect(dana.caller.claims.confirm({ code: reg.claim.userCode, orgId: team.id })).resolves.toMatchObject({ orgId: team.id, orgName: 'Dana team' });
    const key = await pollClaim(deps, { claimToken: reg.claimToken });
    await expect(verifyApiKey(h.db.hot, key.accessToken)).resolves.toMatchObject({ orgId: team.id });
  });

  it('an agent that gave no name, from an IPv6 network: the page gets null and the /48', async () => {
    const erin = await newUser();
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: erin.user.email, clientAddress: '2001:db8:ab:cd::/64' });
    await expect(erin.caller.claims.check({ code: reg.claim.userCode })).resolves.toMatchObject({
      agentName: null,
      userAgent: null,
      network: '2001:db8:ab::/48',
    });
  });

  it('a member of an org but owner of none may not confirm: canConfirm is false and confirm FORBIDDEN', async () => {
    const owner = await newUser();
    const fay = await newUser();
    await addMember(h.db, { orgId: owner.orgId, email: fay.user.email, role: 'member', invitedByUserId: owner.user.id });
    // Fay's personal org is hers; taking her ownership away leaves her owner of nothing.
    await h.db.prisma.membership.update({ where: { userId_orgId: { userId: fay.user.id, orgId: fay.orgId } }, data: { role: 'member' } });
    const reg = await serviceAuthFor(fay);
    const asFay = h.callerFor(fay.user, owner.orgId);
    await expect(asFay.claims.check({ code: reg.claim.userCode })).resolves.toMatchObject({ canConfirm: false, orgs: [] });
    await expect(asFay.claims.confirm({ code: reg.claim.userCode })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });

  it('anonymous: shows the trial key that will stop working; confirming disables it', async () => {
    const bob = await newUser();
    const reg = await startRegistration(deps, { type: 'anonymous' });
    const trial = await exchangeAssertion(deps, { assertion: reg.identityAssertion });
    const attempt = await startClaim(deps, { claimToken: reg.claimToken, email: bob.user.email });
    await expect(bob.caller.claims.check({ code: attempt.claim.userCode })).resolves.toMatchObject({
      registrationType: 'anonymous',
      trialKeyPrefix: trial.accessToken.slice(0, 11),
    });
    await bob.caller.claims.confirm({ code: attempt.claim.userCode });
    await expect(verifyApiKey(h.db.hot, trial.accessToken)).rejects.toMatchObject({ code: 'api_key_disabled' });
  });

  it('deny ends the registration', async () => {
    const carol = await newUser();
    const reg = await serviceAuthFor(carol);
    await expect(carol.caller.claims.deny({ code: reg.claim.userCode })).resolves.toEqual({ registrationId: reg.registrationId });
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'invalid_grant' });
    await expect(carol.caller.claims.confirm({ code: reg.claim.userCode })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});

describe('claims: errors', () => {
  it("a wrong code is BAD_REQUEST and says so, with the tries the user's pending code has left; a malformed one too", async () => {
    const dave = await newUser();
    const reg = await serviceAuthFor(dave);
    await expect(dave.caller.claims.check({ code: wrong(reg.claim.userCode) })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: `${WRONG_CODE} ${MAX_FAILED_GUESSES - 1} wrong entries left before the code waiting for ${dave.user.email} is locked.`,
      cause: { code: 'invalid_grant' },
    });
    await expect(dave.caller.claims.check({ code: 'abc' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'Enter the 6-digit code the agent showed you.',
    });
    await expect(dave.caller.claims.check({ code: 'x'.repeat(33) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    // The right code still works after one mistake.
    await expect(dave.caller.claims.confirm({ code: reg.claim.userCode })).resolves.toMatchObject({ orgId: dave.orgId });
  });

  it("another account (email mismatch) gets the answer any wrong code gets, cannot confirm or deny, and spends none of the code's tries", async () => {
    const owner = await newUser();
    const other = await newUser();
    const reg = await serviceAuthFor(owner);
    for (const call of [other.caller.claims.check, other.caller.claims.confirm, other.caller.claims.deny]) {
      await expect(call({ code: reg.claim.userCode })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: WRONG_CODE });
      await expect(call({ code: wrong(reg.claim.userCode) })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: WRONG_CODE });
    }
    expect((await h.db.prisma.claimAttempt.findFirstOrThrow({ where: { registrationId: reg.registrationId } })).failedGuesses).toBe(0);
    await expect(pollClaim(deps, { claimToken: reg.claimToken })).rejects.toMatchObject({ code: 'authorization_pending' });
    await expect(owner.caller.claims.confirm({ code: reg.claim.userCode })).resolves.toMatchObject({ orgId: owner.orgId });
  });

  it('throttled: after 10 wrong codes the user gets TOO_MANY_REQUESTS, even with the right code of a live claim', async () => {
    const eve = await newUser();
    for (let i = 0; i < 10; i++) await expect(eve.caller.claims.check({ code: String(300000 + i) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    // Made after the wrong entries, so they locked nothing: only the throttle stands in the way.
    const reg = await serviceAuthFor(eve);
    await expect(eve.caller.claims.confirm({ code: reg.claim.userCode })).rejects.toMatchObject({
      code: 'TOO_MANY_REQUESTS',
      message: expect.stringContaining('Too many wrong codes'),
    });
  });

  it('locked: after 5 wrong entries even the right code says the code is locked and to ask for a new one; once throttled too, not "try again in N minutes"', async () => {
    const frank = await newUser();
    const reg = await serviceAuthFor(frank);
    const messages: string[] = [];
    for (let i = 1; i <= 5; i++)
      messages.push(
        await frank.caller.claims.check({ code: String((Number(reg.claim.userCode) + i) % 1_000_000).padStart(6, '0') }).then(
          () => 'resolved',
          (e: Error) => e.message,
        ),
      );
    expect(messages.map((m) => m.slice(WRONG_CODE.length + 1))).toEqual([
      `4 wrong entries left before the code waiting for ${frank.user.email} is locked.`,
      `3 wrong entries left before the code waiting for ${frank.user.email} is locked.`,
      `2 wrong entries left before the code waiting for ${frank.user.email} is locked.`,
      `1 wrong entry left before the code waiting for ${frank.user.email} is locked.`,
      `That was the last try: the code waiting for ${frank.user.email} is now locked. Ask the agent for a new code.`,
    ]);
    const locked = {
      code: 'BAD_REQUEST',
      message: expect.stringMatching(
        /^The code waiting for .* is locked after 5 wrong entries, so no code works now, not even the right one\. Ask the agent for a new code/,
      ),
    };
    await expect(frank.caller.claims.check({ code: reg.claim.userCode })).rejects.toMatchObject(locked);
    // More wrong entries up to the per-user throttle (10 in 10 minutes), then the right code:
    // throttled, but waiting would not help, so the answer stays "locked, ask for a new code".
    for (let i = 0; i < 4; i++) await expect(frank.caller.claims.check({ code: String(600000 + i) })).rejects.toMatchObject(locked);
    await expect(frank.caller.claims.confirm({ code: reg.claim.userCode })).rejects.toMatchObject(locked);
    // With a new code from the agent there is something to try again: now the wait is the honest answer.
    await startClaim(deps, { claimToken: reg.claimToken });
    await expect(frank.caller.claims.check({ code: '600009' })).rejects.toMatchObject({
      code: 'TOO_MANY_REQUESTS',
      message: expect.stringContaining('Try again in'),
    });
  });

  it('throttled per IP across accounts (the address from the request context)', async () => {
    const ip = `198.51.100.${Math.floor(Math.random() * 250)}`;
    const callerAt = (u: TestUser) => createCaller({ db: h.db, session: { user: u.user }, requestedOrgId: null, clientIp: ip });
    for (let i = 0; i < 10; i++) {
      const u = await newUser();
      for (let j = 0; j < 3; j++) await expect(callerAt(u).claims.check({ code: String(400000 + i * 3 + j) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    }
    const fresh = await newUser();
    const reg = await serviceAuthFor(fresh);
    await expect(callerAt(fresh).claims.check({ code: reg.claim.userCode })).rejects.toMatchObject({ code: 'TOO_MANY_REQUESTS' });
    await expect(fresh.caller.claims.check({ code: reg.claim.userCode })).resolves.toMatchObject({ registrationId: reg.registrationId });
  });

  it('requires a session', async () => {
    await expect(h.callerFor(null).claims.check({ code: '123456' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(h.callerFor(null).claims.confirm({ code: '123456' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
