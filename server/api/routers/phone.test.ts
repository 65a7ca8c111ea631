// The dashboard's phone tokens through tRPC: owners make (shown once), list and revoke them;
// members only see them; another org's tokens are neither listed nor revocable.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember } from '../../services/orgs/add-member.ts';
import { verifyPhoneToken } from '../../services/phone/verify-phone-token.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let alice: TestUser;
let bob: TestUser;
let member: TestUser;

beforeAll(async () => {
  h = await createApiHarness();
  await h.signUpUser('phone-admin@example.com');
  alice = await h.signUpUser('phone-alice@example.com');
  bob = await h.signUpUser('phone-bob@example.com');
  member = await h.signUpUser('phone-member@example.com');
  await addMember(h.db, { orgId: alice.orgId, email: member.user.email, role: 'member', invitedByUserId: alice.user.id });
});
afterAll(async () => {
  await h?.drop();
});

const asMemberOfAlice = () => h.callerFor(member.user, alice.orgId);

describe('phone tokens: happy path', () => {
  it('creates a token for a key and a profile, shows it once, lists it without the secret, and revokes it', async () => {
    const key = await alice.caller.keys.create({ name: 'phone line' });
    const created = await alice.caller.phone.create({ name: ' +1 555 0100 ', apiKeyId: key.id, profile: 'local-realtime' });
    expect(created).toMatchObject({ name: '+1 555 0100', profile: 'local-realtime', apiKeyId: key.id });
    expect(created.token).toMatch(/^pt_svc_[A-Za-z0-9_-]{43}$/);
    await expect(verifyPhoneToken(h.db.prisma, created.token)).resolves.toMatchObject({ orgId: alice.orgId, apiKeyId: key.id, profile: 'local-realtime' });

    const listed = await alice.caller.phone.list();
    expect(listed).toEqual([
      expect.objectContaining({
        id: created.id,
        prefix: created.prefix,
        status: 'active',
        apiKeyName: 'phone line',
        apiKeyPrefix: key.prefix,
        revokedAt: null,
      }),
    ]);
    expect(JSON.stringify(listed)).not.toContain(created.token);
    // A member sees the list but cannot make or revoke a token.
    expect((await asMemberOfAlice().phone.list()).map((t) => t.id)).toEqual([created.id]);
    await expect(asMemberOfAlice().phone.create({ name: 'x', apiKeyId: key.id, profile: 'p' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(asMemberOfAlice().phone.revoke({ id: created.id })).rejects.toMatchObject({ code: 'FORBIDDEN' });

    await expect(alice.caller.phone.revoke({ id: created.id })).resolves.toEqual({ id: created.id, status: 'revoked' });
    await expect(verifyPhoneToken(h.db.prisma, created.token)).rejects.toMatchObject({ code: 'api_key_disabled' });
    const after = (await alice.caller.phone.list()).find((t) => t.id === created.id);
    expect(after).toMatchObject({ status: 'revoked' });
    expect(after!.revokedAt).not.toBeNull();
  });
});

describe('phone tokens: errors', () => {
  it('names what is wrong: no name, no key, a bad profile, a key of another org', async () => {
    const key = await alice.caller.keys.create({ name: 'k' });
    await expect(alice.caller.phone.create({ name: ' ', apiKeyId: key.id, profile: 'p' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'Give the token a name (the phone number, say).',
    });
    await expect(alice.caller.phone.create({ name: 'n', apiKeyId: '', profile: 'p' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.phone.create({ name: 'n', apiKeyId: key.id, profile: 'not a profile' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    const bobsKey = await bob.caller.keys.create({ name: 'bob' });
    await expect(alice.caller.phone.create({ name: 'n', apiKeyId: bobsKey.id, profile: 'p' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("never lists nor revokes another org's token", async () => {
    const key = await alice.caller.keys.create({ name: 'alice only' });
    const token = await alice.caller.phone.create({ name: 'alice line', apiKeyId: key.id, profile: 'p' });
    expect((await bob.caller.phone.list()).map((t) => t.id)).not.toContain(token.id);
    await expect(bob.caller.phone.revoke({ id: token.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(verifyPhoneToken(h.db.prisma, token.token)).resolves.toMatchObject({ tokenId: token.id });
  });

  it('requires a session', async () => {
    const anonymous = h.callerFor(null);
    await expect(anonymous.phone.list()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.phone.create({ name: 'x', apiKeyId: 'key_x', profile: 'p' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.phone.revoke({ id: 'ptok_x' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
