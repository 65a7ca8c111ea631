import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/env.ts';
import { getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { setKeyRateLimit } from '../../services/keys/set-key-rate-limit.ts';
import { pollClaim } from '../../services/registrations/poll-claim.ts';
import { registrationSettings } from '../../services/registrations/registration-rules.ts';
import { startRegistration } from '../../services/registrations/start-registration.ts';
import { verifyApiKey } from '../../services/keys/verify-api-key.ts';
import { upsertModel } from '../../services/models/upsert-model.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let admin: TestUser;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  h = await createApiHarness();
  admin = await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
});
afterAll(async () => {
  await h?.drop();
});

describe('keys: happy path', () => {
  it('creates a key, shows it once, lists it without the secret, and revokes it', async () => {
    const created = await alice.caller.keys.create({ name: '  voice bot  ' });
    expect(created.key).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(created.key.slice(0, 11));
    expect(created.name).toBe('voice bot');

    const listed = await alice.caller.keys.list();
    const row = listed.find((k) => k.id === created.id);
    expect(row).toMatchObject({ name: 'voice bot', prefix: created.prefix, status: 'active', lastUsedAt: null, revokedAt: null });
    expect(new Date(row!.createdAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect(Object.keys(row!)).not.toContain('hash');

    // The gateway's own check accepts the key until it is revoked in the dashboard.
    await expect(verifyApiKey(h.db.hot, created.key)).resolves.toMatchObject({ keyId: created.id, orgId: alice.orgId, status: 'active' });
    await expect(alice.caller.keys.revoke({ id: created.id })).resolves.toEqual({ id: created.id, status: 'revoked' });
    await expect(verifyApiKey(h.db.hot, created.key)).rejects.toMatchObject({ code: 'api_key_disabled' });

    const after = (await alice.caller.keys.list()).find((k) => k.id === created.id);
    expect(after?.status).toBe('revoked');
    expect(after?.revokedAt).not.toBeNull();
  });

  it('lists newest first', async () => {
    const first = await alice.caller.keys.create({ name: 'first' });
    await new Promise((r) => setTimeout(r, 5));
    const second = await alice.caller.keys.create({ name: 'second' });
    const ids = (await alice.caller.keys.list()).map((k) => k.id);
    expect(ids.indexOf(second.id)).toBeLessThan(ids.indexOf(first.id));
  });
});

describe('keys: where each key came from', () => {
  it('the playground key is "dashboard", a claimed agent\'s key is "agent" with its registration and who authorised it, the rest "api"', async () => {
    const deps = { db: h.db, settings: registrationSettings(loadConfig()), now: () => new Date() };
    const reg = await startRegistration(deps, { type: 'service_auth', loginHint: bob.user.email });
    await bob.caller.claims.confirm({ code: reg.claim.userCode });
    const agentKey = await pollClaim(deps, { claimToken: reg.claimToken });
    await getOrCreateDashboardKey(h.db, bob.orgId);
    const mine = await bob.caller.keys.create({ name: 'made on the page' });

    const listed = await bob.caller.keys.list();
    const agent = listed.find((k) => k.id === agentKey.keyId);
    expect(agent).toMatchObject({
      name: `agent (${reg.registrationId})`,
      origin: 'agent',
      agent: { registrationId: reg.registrationId, registrationType: 'service_auth', claimedFor: bob.user.email, confirmedBy: bob.user.email },
    });
    expect(new Date(agent!.agent!.confirmedAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(listed.find((k) => k.name === 'Dashboard (playground)')).toMatchObject({ origin: 'dashboard', agent: null });
    expect(listed.find((k) => k.id === mine.id)).toMatchObject({ origin: 'api', agent: null });
    // A key merely named like the dashboard's is not it.
    const lookalike = await bob.caller.keys.create({ name: 'Dashboard (playground)' });
    expect((await bob.caller.keys.list()).find((k) => k.id === lookalike.id)).toMatchObject({ origin: 'api' });
  });
});

describe('keys: errors', () => {
  it('requires a name', async () => {
    await expect(alice.caller.keys.create({ name: '   ' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'Give the key a name.' });
    await expect(alice.caller.keys.create({ name: 'x'.repeat(101) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('answers NOT_FOUND for an unknown key id', async () => {
    await expect(alice.caller.keys.revoke({ id: 'key_doesnotexist' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('requires a session', async () => {
    const anonymous = h.callerFor(null);
    await expect(anonymous.keys.list()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.keys.create({ name: 'x' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.keys.revoke({ id: 'key_x' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('refuses a session whose user no longer exists', async () => {
    const ghost = h.callerFor({ id: 'usr_deleted', email: 'ghost@example.com', name: null });
    await expect(ghost.keys.list()).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });
});

describe('keys: other orgs', () => {
  it("never lists another org's keys", async () => {
    const alicesKey = await alice.caller.keys.create({ name: 'alice only' });
    const bobs = await bob.caller.keys.list();
    expect(bobs.map((k) => k.id)).not.toContain(alicesKey.id);
  });

  it("cannot revoke another org's key, and the key keeps working", async () => {
    const alicesKey = await alice.caller.keys.create({ name: 'target' });
    await expect(bob.caller.keys.revoke({ id: alicesKey.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(verifyApiKey(h.db.hot, alicesKey.key)).resolves.toMatchObject({ status: 'active' });
    expect((await alice.caller.keys.list()).find((k) => k.id === alicesKey.id)?.status).toBe('active');
  });

  it("asking for another org's id (org cookie) still scopes to the user's own org", async () => {
    const alicesKey = await alice.caller.keys.create({ name: 'cookie target' });
    const bobPretending = h.callerFor(bob.user, alice.orgId);
    expect((await bobPretending.keys.list()).map((k) => k.id)).not.toContain(alicesKey.id);
    await expect(bobPretending.keys.revoke({ id: alicesKey.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const created = await bobPretending.keys.create({ name: 'lands in bob org' });
    expect((await bob.caller.keys.list()).map((k) => k.id)).toContain(created.id);
    expect((await alice.caller.keys.list()).map((k) => k.id)).not.toContain(created.id);
  });
});

describe('keys: rate limits', () => {
  const listed = async (user: TestUser, id: string) => (await user.caller.keys.list()).find((k) => k.id === id);

  it('the admin signed up first is the platform admin; alice and bob are not', () => {
    expect([admin.isPlatformAdmin, alice.isPlatformAdmin, bob.isPlatformAdmin]).toEqual([true, false, false]);
  });

  it('lists a new key on the gateway default', async () => {
    const created = await alice.caller.keys.create({ name: 'default limit' });
    expect(await listed(alice, created.id)).toMatchObject({ rateLimitRpm: null, defaultRateLimitRpm: 600 });
    await expect(verifyApiKey(h.db.hot, created.key)).resolves.toMatchObject({ rateLimitRpm: null });
  });

  it("an admin sets any org's key's limit and resets it; the gateway's lookup follows each change", async () => {
    const key = await alice.caller.keys.create({ name: 'limited by the operator' });
    await expect(verifyApiKey(h.db.hot, key.key)).resolves.toMatchObject({ rateLimitRpm: null });

    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: 2 })).resolves.toEqual({ id: key.id, rateLimitRpm: 2 });
    expect(await listed(alice, key.id)).toMatchObject({ rateLimitRpm: 2, defaultRateLimitRpm: 600 });
    await expect(verifyApiKey(h.db.hot, key.key)).resolves.toMatchObject({ keyId: key.id, rateLimitRpm: 2 });

    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: 1_000_000 })).resolves.toEqual({ id: key.id, rateLimitRpm: 1_000_000 });
    await expect(verifyApiKey(h.db.hot, key.key)).resolves.toMatchObject({ rateLimitRpm: 1_000_000 });

    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: null })).resolves.toEqual({ id: key.id, rateLimitRpm: null });
    expect(await listed(alice, key.id)).toMatchObject({ rateLimitRpm: null });
    await expect(verifyApiKey(h.db.hot, key.key)).resolves.toMatchObject({ rateLimitRpm: null });

    // Resetting a key already on the default is not an error.
    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: null })).resolves.toEqual({ id: key.id, rateLimitRpm: null });
  });

  it('an admin creates a key with its own limit', async () => {
    const key = await admin.caller.keys.create({ name: 'fast lane', rateLimitRpm: 5_000 });
    expect(await listed(admin, key.id)).toMatchObject({ name: 'fast lane', rateLimitRpm: 5_000 });
    await expect(verifyApiKey(h.db.hot, key.key)).resolves.toMatchObject({ rateLimitRpm: 5_000 });
    const onDefault = await admin.caller.keys.create({ name: 'explicit default', rateLimitRpm: null });
    expect(await listed(admin, onDefault.id)).toMatchObject({ rateLimitRpm: null });
  });

  it('a non-admin can neither set a limit (even on their own key) nor create a key with one', async () => {
    const key = await alice.caller.keys.create({ name: 'wants more' });
    await expect(alice.caller.keys.setRateLimit({ id: key.id, rpm: 100_000 })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(alice.caller.keys.setRateLimit({ id: key.id, rpm: null })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await listed(alice, key.id)).toMatchObject({ rateLimitRpm: null });

    const before = (await alice.caller.keys.list()).length;
    await expect(alice.caller.keys.create({ name: 'sneaky', rateLimitRpm: 100_000 })).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: 'Only platform admins can set a rate limit on a key.',
    });
    await expect(alice.caller.keys.create({ name: 'sneaky', rateLimitRpm: null })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect((await alice.caller.keys.list()).length).toBe(before);
  });

  it('refuses a signed-out caller and a session whose user no longer exists', async () => {
    await expect(h.callerFor(null).keys.setRateLimit({ id: 'key_x', rpm: 1 })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    const ghost = h.callerFor({ id: 'usr_deleted', email: 'ghost@example.com', name: null });
    await expect(ghost.keys.setRateLimit({ id: 'key_x', rpm: 1 })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });

  it('a platform admin whose role was taken away is refused at once', async () => {
    const carol = await h.signUpUser('carol@example.com');
    await h.db.prisma.user.update({ where: { id: carol.user.id }, data: { isPlatformAdmin: true } });
    const key = await carol.caller.keys.create({ name: 'carol', rateLimitRpm: 10 });
    await expect(carol.caller.keys.setRateLimit({ id: key.id, rpm: 20 })).resolves.toEqual({ id: key.id, rateLimitRpm: 20 });
    await h.db.prisma.user.update({ where: { id: carol.user.id }, data: { isPlatformAdmin: false } });
    await expect(carol.caller.keys.setRateLimit({ id: key.id, rpm: 30 })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(carol.caller.keys.create({ name: 'carol 2', rateLimitRpm: 30 })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await listed(carol, key.id)).toMatchObject({ rateLimitRpm: 20 });
  });

  it.each([
    ['zero', 0],
    ['negative', -5],
    ['fractional', 2.5],
    ['above 1,000,000', 1_000_001],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a string', '10'],
    ['missing', undefined],
  ])('refuses an invalid limit (%s) with BAD_REQUEST and leaves the key as it was', async (_label, rpm) => {
    const key = await alice.caller.keys.create({ name: 'invalid limit target' });
    await admin.caller.keys.setRateLimit({ id: key.id, rpm: 7 });
    const bad = rpm as number;
    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: bad })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    if (rpm !== undefined) await expect(admin.caller.keys.create({ name: 'x', rateLimitRpm: bad })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect(await listed(alice, key.id)).toMatchObject({ rateLimitRpm: 7 });
  });

  it('explains an out-of-range limit in one sentence', async () => {
    const key = await alice.caller.keys.create({ name: 'message target' });
    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: 0 })).rejects.toMatchObject({
      message: 'The rate limit must be at least 1 request per minute.',
    });
    await expect(admin.caller.keys.setRateLimit({ id: key.id, rpm: 1_000_001 })).rejects.toMatchObject({
      message: 'The rate limit can be at most 1,000,000 requests per minute.',
    });
  });

  it('the service itself refuses invalid limits, whoever calls it', async () => {
    const key = await alice.caller.keys.create({ name: 'service target' });
    for (const rpm of [0, -1, 1.5, 1_000_001, Number.NaN]) {
      await expect(setKeyRateLimit(h.db.prisma, { id: key.id, rpm })).rejects.toMatchObject({ code: 'invalid_request', param: 'rpm' });
    }
    await expect(setKeyRateLimit(h.db.prisma, { id: key.id, rpm: 1 })).resolves.toEqual({ id: key.id, rateLimitRpm: 1 });
  });

  it('answers NOT_FOUND (key_not_found) for an unknown key id', async () => {
    await expect(admin.caller.keys.setRateLimit({ id: 'key_doesnotexist', rpm: 10 })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      cause: { code: 'key_not_found' },
    });
    await expect(admin.caller.keys.setRateLimit({ id: 'key_doesnotexist', rpm: null })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(setKeyRateLimit(h.db.prisma, { id: 'key_doesnotexist', rpm: 10 })).rejects.toMatchObject({ code: 'key_not_found' });
  });
});

describe('keys: budgets and scopes', () => {
  beforeAll(async () => {
    await upsertModel(h.db.prisma, checkProtocol, { id: 'local-flite', modality: 'tts', upstream: { url: 'local:flite', protocol: 'flite' } });
  });

  it("an owner creates a key with a spend limit per day, an expiry and a model list; the list shows them with this window's spend", async () => {
    const expiresAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const created = await alice.caller.keys.create({ name: 'agent', spendLimitUsd: '2.5', spendWindow: 'day', expiresAt, models: ['local-flite'] });
    const row = (await alice.caller.keys.list()).find((k) => k.id === created.id);
    const midnight = new Date(new Date().setUTCHours(24, 0, 0, 0)).toISOString();
    expect(row).toMatchObject({
      budget: { limitUsd: '2.500000', window: 'day', spentUsd: '0.000000', resetsAt: midnight },
      expiresAt,
      expired: false,
      models: ['local-flite'],
    });
    await expect(verifyApiKey(h.db.hot, created.key)).resolves.toMatchObject({ budget: { limitMicros: 2_500_000n, window: 'day' } });
    // Without them: none; a limit alone counts per month.
    const plain = (await alice.caller.keys.list()).find((k) => k.id !== created.id && k.status === 'active');
    expect(plain).toMatchObject({ budget: null, expiresAt: null, expired: false, models: null });
    const monthly = await alice.caller.keys.create({ name: 'monthly', spendLimitUsd: '10' });
    expect((await alice.caller.keys.list()).find((k) => k.id === monthly.id)?.budget).toMatchObject({ limitUsd: '10.000000', window: 'month' });
  });

  it('explains a wrong limit, window, expiry or model in one sentence, and makes no key', async () => {
    const before = (await alice.caller.keys.list()).length;
    const cases: [Parameters<typeof alice.caller.keys.create>[0], string][] = [
      [{ name: 'k', spendLimitUsd: '0' }, 'The spend limit must be more than $0.'],
      [{ name: 'k', spendLimitUsd: '-3' }, 'The spend limit must be an amount in USD, such as 25 or 2.50.'],
      [{ name: 'k', spendWindow: 'day' }, 'A spend window needs a spend limit.'],
      [{ name: 'k', expiresAt: '2020-01-01T00:00:00Z' }, expect.stringMatching(/^The expiry must be in the future/) as unknown as string],
      [{ name: 'k', models: ['nope'] }, "No model 'nope' in the registry."],
      [{ name: 'k', models: [] }, 'Choose at least one model, or allow every model.'],
    ];
    for (const [input, message] of cases) await expect(alice.caller.keys.create(input)).rejects.toMatchObject({ code: 'BAD_REQUEST', message });
    expect((await alice.caller.keys.list()).length).toBe(before);
  });
});

describe('keys: editing a key’s limits', () => {
  beforeAll(async () => {
    await upsertModel(h.db.prisma, checkProtocol, { id: 'local-espeak', modality: 'tts', upstream: { url: 'local:espeak-ng', protocol: 'espeak-ng' } });
  });

  it('an owner changes a key’s spend limit and window, expiry and models, then removes them; the list and the gateway’s lookup follow', async () => {
    const created = await alice.caller.keys.create({ name: 'to edit' });
    const expiresAt = new Date(Date.now() + 3 * 86_400_000).toISOString();
    await expect(
      alice.caller.keys.update({ id: created.id, spendLimitUsd: '4.25', spendWindow: 'day', expiresAt, models: ['local-flite', 'local-espeak'] }),
    ).resolves.toEqual({ id: created.id, spendLimitUsd: '4.250000', spendWindow: 'day', expiresAt, models: ['local-flite', 'local-espeak'] });
    expect((await alice.caller.keys.list()).find((k) => k.id === created.id)).toMatchObject({
      budget: { limitUsd: '4.250000', window: 'day', spentUsd: '0.000000' },
      expiresAt,
      models: ['local-flite', 'local-espeak'],
    });
    await expect(verifyApiKey(h.db.hot, created.key)).resolves.toMatchObject({ budget: { limitMicros: 4_250_000n, window: 'day' } });
    // Left out: unchanged; null: removed.
    await alice.caller.keys.update({ id: created.id, models: null });
    expect((await alice.caller.keys.list()).find((k) => k.id === created.id)).toMatchObject({ budget: { limitUsd: '4.250000' }, expiresAt, models: null });
    await alice.caller.keys.update({ id: created.id, spendLimitUsd: null, expiresAt: null });
    expect((await alice.caller.keys.list()).find((k) => k.id === created.id)).toMatchObject({ budget: null, expiresAt: null, models: null });
    await expect(verifyApiKey(h.db.hot, created.key)).resolves.toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
  });

  it("another org's key is NOT_FOUND and unchanged; a revoked key is CONFLICT; a wrong value is explained in one sentence", async () => {
    const bobs = await bob.caller.keys.create({ name: 'bob’s' });
    await expect(alice.caller.keys.update({ id: bobs.id, spendLimitUsd: '1' })).rejects.toMatchObject({ code: 'NOT_FOUND', cause: { code: 'key_not_found' } });
    expect((await bob.caller.keys.list()).find((k) => k.id === bobs.id)?.budget).toBeNull();
    const mine = await alice.caller.keys.create({ name: 'checked' });
    const cases: [Omit<Parameters<typeof alice.caller.keys.update>[0], 'id'>, string][] = [
      [{ spendLimitUsd: '0' }, 'The spend limit must be more than $0.'],
      [{ spendWindow: 'day' }, 'A spend window needs a spend limit.'],
      [{ expiresAt: '2020-01-01T00:00:00Z' }, expect.stringMatching(/^The expiry must be in the future/) as unknown as string],
      [{ models: ['nope'] }, "No model 'nope' in the registry."],
      [{ models: [] }, 'Choose at least one model, or allow every model.'],
    ];
    for (const [input, message] of cases)
      await expect(alice.caller.keys.update({ id: mine.id, ...input })).rejects.toMatchObject({ code: 'BAD_REQUEST', message });
    await alice.caller.keys.revoke({ id: mine.id });
    await expect(alice.caller.keys.update({ id: mine.id, spendLimitUsd: '1' })).rejects.toMatchObject({ code: 'CONFLICT' });
  });
});
