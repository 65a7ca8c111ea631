import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyApiKey } from '../../services/keys/verify-api-key.js';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.js';

let h: ApiHarness;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  h = await createApiHarness();
  await h.signUpUser('admin@example.com');
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
