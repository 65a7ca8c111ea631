// The phone-token services on a real database: made, listed, verified and revoked, stored only
// as a hash, scoped to their org, and standing for one active key of it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { hashApiKey } from '../keys/api-key-format.ts';
import { createApiKey } from '../keys/create-api-key.ts';
import { revokeApiKey } from '../keys/revoke-api-key.ts';
import { createOrg } from '../orgs/create-org.ts';
import { createPhoneToken } from './create-phone-token.ts';
import { listPhoneTokens } from './list-phone-tokens.ts';
import { revokePhoneToken } from './revoke-phone-token.ts';
import { phoneTokenStatuses, verifyPhoneToken } from './verify-phone-token.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

async function orgWithKey(name = 'phone') {
  const org = await createOrg(t.db, { name });
  const key = await createApiKey(t.db.prisma, { orgId: org.id, name: `${name} key` });
  return { orgId: org.id, key };
}

describe('a phone token', () => {
  it('is shown once, stored as its hash, and stands for its key and profile until revoked', async () => {
    const { orgId, key } = await orgWithKey();
    const made = await createPhoneToken(t.db.prisma, { orgId, apiKeyId: key.id, profile: 'local-realtime', name: '  +1 555 0100  ' });
    expect(made.token).toMatch(/^pt_svc_[A-Za-z0-9_-]{43}$/);
    expect(made).toMatchObject({ prefix: made.token.slice(0, 11), name: '+1 555 0100', profile: 'local-realtime', apiKeyId: key.id, orgId });
    const row = await t.db.prisma.phoneToken.findUniqueOrThrow({ where: { id: made.id } });
    expect(row.hash).toBe(hashApiKey(made.token));
    expect(JSON.stringify(row)).not.toContain(made.token);

    const grant = await verifyPhoneToken(t.db.prisma, made.token);
    expect(grant).toEqual({ tokenId: made.id, orgId, apiKeyId: key.id, keyHash: hashApiKey(key.key), profile: 'local-realtime' });
    const listed = await listPhoneTokens(t.db.prisma, { orgId });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: made.id, status: 'active', apiKeyName: 'phone key', apiKeyPrefix: key.prefix, revokedAt: null });
    expect(listed[0]!.lastUsedAt).not.toBeNull();
    expect(JSON.stringify(listed)).not.toContain(made.token);
    expect(Object.keys(listed[0]!)).not.toContain('hash');

    expect(await phoneTokenStatuses(t.db.prisma, [made.id, 'ptok_gone'])).toEqual(new Map([[made.id, 'active']]));
    await expect(revokePhoneToken(t.db.prisma, { id: made.id, orgId })).resolves.toEqual({ id: made.id, status: 'revoked' });
    await expect(verifyPhoneToken(t.db.prisma, made.token)).rejects.toMatchObject({ code: 'api_key_disabled' });
    expect(await phoneTokenStatuses(t.db.prisma, [made.id])).toEqual(new Map([[made.id, 'revoked']]));
    const revokedAt = (await listPhoneTokens(t.db.prisma, { orgId }))[0]!.revokedAt;
    expect(revokedAt).not.toBeNull();
    // Revoked again (the CLI, no org): the first revocation's time stays.
    await revokePhoneToken(t.db.prisma, { id: made.id });
    expect((await listPhoneTokens(t.db.prisma, { orgId }))[0]!.revokedAt).toEqual(revokedAt);
  });

  it('lists as revoked once its key is revoked', async () => {
    const { orgId, key } = await orgWithKey();
    const made = await createPhoneToken(t.db.prisma, { orgId, apiKeyId: key.id, profile: 'rt-llm' });
    await revokeApiKey(t.db.prisma, { id: key.id });
    expect((await listPhoneTokens(t.db.prisma, { orgId }))[0]).toMatchObject({ id: made.id, status: 'revoked', revokedAt: null });
  });
});

describe('refusals', () => {
  it.each([
    ['empty', ''],
    ['another shape', 'sk_svc_' + 'a'.repeat(43)],
    ['well formed but unknown', 'pt_svc_' + 'a'.repeat(43)],
    ['absent', undefined],
  ])('a token %s: 401 invalid_api_key, naming no token', async (_name, token) => {
    const e = await verifyPhoneToken(t.db.prisma, token).catch((err: unknown) => err);
    expect(e).toMatchObject({ code: 'invalid_api_key' });
    if (token) expect((e as Error).message).not.toContain(token);
  });

  it("needs an active key of the token's own org and a profile id", async () => {
    const a = await orgWithKey('a');
    const b = await orgWithKey('b');
    await expect(createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: b.key.id, profile: 'p' })).rejects.toMatchObject({
      code: 'key_not_found',
      param: 'apiKeyId',
    });
    const revoked = await createApiKey(t.db.prisma, { orgId: a.orgId, name: 'old' });
    await revokeApiKey(t.db.prisma, { id: revoked.id });
    await expect(createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: revoked.id, profile: 'p' })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'apiKeyId',
    });
    await expect(createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: a.key.id, profile: '  ' })).rejects.toMatchObject({ param: 'profile' });
    await expect(createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: a.key.id, profile: 'a b' })).rejects.toMatchObject({ param: 'profile' });
    await expect(createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: a.key.id, profile: 'p', name: 'x'.repeat(101) })).rejects.toMatchObject({
      param: 'name',
    });
  });

  it("cannot revoke or list another org's token", async () => {
    const a = await orgWithKey('a2');
    const b = await orgWithKey('b2');
    const made = await createPhoneToken(t.db.prisma, { orgId: a.orgId, apiKeyId: a.key.id, profile: 'p' });
    await expect(revokePhoneToken(t.db.prisma, { id: made.id, orgId: b.orgId })).rejects.toMatchObject({ code: 'not_found' });
    await expect(verifyPhoneToken(t.db.prisma, made.token)).resolves.toMatchObject({ tokenId: made.id });
    expect(await listPhoneTokens(t.db.prisma, { orgId: b.orgId })).toEqual([]);
    await expect(revokePhoneToken(t.db.prisma, { id: 'ptok_nope' })).rejects.toMatchObject({ code: 'not_found' });
  });
});
