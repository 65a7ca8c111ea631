import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { createOrg } from '../orgs/create-org.ts';
import { verifyApiKey } from './verify-api-key.ts';
import { hashApiKey } from './api-key-format.ts';
import { DASHBOARD_KEY_NAME, dashboardKeySecretName, getOrCreateDashboardKey } from './get-dashboard-key.ts';
import { revokeApiKey } from './revoke-api-key.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const keysOf = (orgId: string) => t.db.prisma.apiKey.findMany({ where: { orgId, name: DASHBOARD_KEY_NAME }, orderBy: { createdAt: 'asc' } });

describe('getOrCreateDashboardKey', () => {
  it('makes one real key of the org on first use and returns the same key afterwards', async () => {
    const org = await createOrg(t.db, { name: 'dash' });
    const key = await getOrCreateDashboardKey(t.db, org.id);
    expect(key).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
    expect(await getOrCreateDashboardKey(t.db, org.id)).toBe(key);
    const rows = await keysOf(org.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'active', hash: hashApiKey(key), prefix: key.slice(0, 11) });
    // The gateway accepts it like any key of the org.
    await expect(verifyApiKey(t.db.hot, key)).resolves.toMatchObject({ orgId: org.id, status: 'active' });
  });

  it('stores the key sealed, never in the clear', async () => {
    const org = await createOrg(t.db, { name: 'sealed' });
    const key = await getOrCreateDashboardKey(t.db, org.id);
    const row = await t.db.prisma.serverSecret.findUniqueOrThrow({ where: { name: dashboardKeySecretName(org.id) } });
    expect(row.value.startsWith('v1.')).toBe(true);
    expect(row.value).not.toContain(key);
    expect(row.value).not.toContain(key.slice(7));
    expect(await t.db.prisma.serverSecret.findUnique({ where: { name: 'dashboard-key-sealing' } })).not.toBeNull();
  });

  it('concurrent first calls settle on one key', async () => {
    const org = await createOrg(t.db, { name: 'race' });
    const keys = await Promise.all(Array.from({ length: 5 }, () => getOrCreateDashboardKey(t.db, org.id)));
    expect(new Set(keys).size).toBe(1);
    expect((await keysOf(org.id)).filter((k) => k.status === 'active')).toHaveLength(1);
  });

  it('makes a new key after the user revoked the old one', async () => {
    const org = await createOrg(t.db, { name: 'revoked' });
    const first = await getOrCreateDashboardKey(t.db, org.id);
    const [row] = await keysOf(org.id);
    await revokeApiKey(t.db.prisma, { id: row!.id, orgId: org.id });
    const second = await getOrCreateDashboardKey(t.db, org.id);
    expect(second).not.toBe(first);
    const rows = await keysOf(org.id);
    expect(rows.map((r) => r.status)).toEqual(['revoked', 'active']);
    expect(rows[1]!.hash).toBe(hashApiKey(second));
  });

  it('a sealed value moved to another org does not open there: that org gets its own key and the stray one is revoked', async () => {
    const a = await createOrg(t.db, { name: 'a' });
    const b = await createOrg(t.db, { name: 'b' });
    const keyA = await getOrCreateDashboardKey(t.db, a.id);
    const sealedA = (await t.db.prisma.serverSecret.findUniqueOrThrow({ where: { name: dashboardKeySecretName(a.id) } })).value;
    await t.db.prisma.serverSecret.create({ data: { name: dashboardKeySecretName(b.id), value: sealedA } });
    const keyB = await getOrCreateDashboardKey(t.db, b.id);
    expect(keyB).not.toBe(keyA);
    expect((await verifyApiKey(t.db.hot, keyB)).orgId).toBe(b.id);
    // The id in the moved value names a's key, which belongs to another org: revocation is
    // scoped to b and leaves a's key alone.
    await expect(verifyApiKey(t.db.hot, keyA)).resolves.toMatchObject({ orgId: a.id, status: 'active' });
  });

  it('a tampered value is replaced and the key it named is revoked', async () => {
    const org = await createOrg(t.db, { name: 'tampered' });
    const first = await getOrCreateDashboardKey(t.db, org.id);
    const name = dashboardKeySecretName(org.id);
    const value = (await t.db.prisma.serverSecret.findUniqueOrThrow({ where: { name } })).value;
    const flipped = value.slice(0, -2) + (value.at(-2) === 'A' ? 'B' : 'A') + value.at(-1);
    await t.db.prisma.serverSecret.update({ where: { name }, data: { value: flipped } });
    const second = await getOrCreateDashboardKey(t.db, org.id);
    expect(second).not.toBe(first);
    await expect(verifyApiKey(t.db.hot, first)).rejects.toMatchObject({ code: 'api_key_disabled' });
  });

  it('refuses an org that does not exist', async () => {
    await expect(getOrCreateDashboardKey(t.db, 'org_missing')).rejects.toMatchObject({ code: 'org_not_found' });
  });
});
