// Credit reservations in the hot store, on the test database (SQLite, or PostgreSQL with
// TEST_DB=postgresql), with two stores standing for two gateway processes: the org's balance,
// and a key's spend limit beside it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../services/keys/api-key-format.ts';
import { createApiKey } from '../services/keys/create-api-key.ts';
import { createOrg } from '../services/orgs/create-org.ts';
import { openDatabase, type Database } from './database.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';

let t: TestDatabase;
let other: Database;

beforeAll(async () => {
  t = await createTestDatabase();
  other = openDatabase(t.url);
});

afterAll(async () => {
  await other?.close();
  await t?.drop();
});

const org = (id: string) => t.db.prisma.org.findUniqueOrThrow({ where: { id } });

it("reserves only what balance minus every process's reservations covers; a debit settles its reservation", async () => {
  const { id } = await createOrg(t.db, { name: 'holds', creditsMicros: 1_000n });
  const a = t.db.hot;
  expect(await a.reserve(id, 600n)).toBe('reserved');
  await a.settle();
  expect(await other.hot.reserve(id, 500n)).toBe('org_short'); // 1,000 - 600 reserved < 500
  expect(await other.hot.reserve(id, 400n)).toBe('reserved');
  await other.hot.settle();
  expect((await org(id)).heldMicros).toBe(1_000n);
  // The first request costs 450 of its 600: debited and its whole reservation released.
  await a.applyUsageDebit({ orgId: id, amountMicros: -450n, kind: 'usage', description: 'tts', releaseMicros: 600n });
  other.hot.release(id, 400n);
  await a.settle();
  await other.hot.settle();
  await expect.poll(async () => (await org(id)).heldMicros).toBe(0n);
  expect((await org(id)).balanceMicros).toBe(550n);
});

it('a reservation that expired and was released by another process is not released twice when its owner gives it back', async () => {
  const { id } = await createOrg(t.db, { name: 'expired', creditsMicros: 1_000n });
  const a = t.db.hot;
  expect(await a.reserve(id, 600n)).toBe('reserved');
  await a.settle();
  // The owner could not renew it (say, cut off from the database): it expires, and another
  // gateway releases it.
  await t.db.prisma.creditHold.updateMany({ where: { orgId: id }, data: { expiresAt: new Date(Date.now() - 60_000) } });
  await other.hot.maintainHolds(60_000);
  expect((await org(id)).heldMicros).toBe(0n);
  // The owner comes back and gives it back: nothing more is subtracted.
  a.release(id, 600n);
  await a.settle();
  await expect.poll(async () => (await org(id)).heldMicros).toBe(0n);
  // A debit that settles it does not subtract it again either.
  expect(await a.reserve(id, 100n)).toBe('reserved');
  await a.settle();
  await t.db.prisma.creditHold.updateMany({ where: { orgId: id }, data: { expiresAt: new Date(Date.now() - 60_000) } });
  await other.hot.maintainHolds(60_000);
  await a.applyUsageDebit({ orgId: id, amountMicros: -80n, kind: 'usage', description: 'tts', releaseMicros: 100n });
  await a.settle();
  const after = await org(id);
  expect(after.heldMicros).toBe(0n);
  expect(after.balanceMicros).toBe(920n);
  expect(await other.hot.reserve(id, 921n)).toBe('org_short');
});

it('rows of reservations that are all given back are removed by the upkeep; live ones are renewed', async () => {
  const { id } = await createOrg(t.db, { name: 'upkeep', creditsMicros: 1_000n });
  const { id: busy } = await createOrg(t.db, { name: 'busy', creditsMicros: 1_000n });
  const a = t.db.hot;
  expect(await a.reserve(id, 10n)).toBe('reserved');
  expect(await a.reserve(busy, 10n)).toBe('reserved');
  a.release(id, 10n);
  await a.settle();
  // (PostgreSQL: a release is its own statement, on its way when release returns.)
  await expect.poll(async () => (await org(id)).heldMicros).toBe(0n);
  await a.maintainHolds(60_000);
  expect(await t.db.prisma.creditHold.count({ where: { orgId: id } })).toBe(0);
  const live = await t.db.prisma.creditHold.findFirstOrThrow({ where: { orgId: busy } });
  expect(live.amountMicros).toBe(10n);
  expect(live.expiresAt.getTime()).toBeGreaterThan(Date.now() + 30_000);
  a.release(busy, 10n);
  await a.settle();
});

describe('a key with a spend limit', () => {
  const DAY = Date.UTC(2026, 11, 5);
  const NEXT_DAY = Date.UTC(2026, 11, 6);
  const keyRow = (id: string) => t.db.prisma.apiKey.findUniqueOrThrow({ where: { id } });

  async function budgetedKey(limitMicros: bigint) {
    const { id: orgId } = await createOrg(t.db, { name: 'key budget', creditsMicros: 1_000_000n });
    const key = await createApiKey(t.db.prisma, { orgId, name: 'k', spendLimitMicros: limitMicros, spendWindow: 'day' });
    return { orgId, keyId: key.id, hash: hashApiKey(key.key), limit: { keyId: key.id, limitMicros, windowStart: DAY } };
  }

  it("reserves only what the limit, less the window's spend and every process's reservations, covers; org and key together or neither", async () => {
    const k = await budgetedKey(1_000n);
    const a = t.db.hot;
    expect(await a.reserve(k.orgId, 600n, k.limit)).toBe('reserved');
    await a.settle();
    expect(await other.hot.reserve(k.orgId, 500n, k.limit)).toBe('key_short'); // 1,000 - 600 reserved < 500
    await other.hot.settle();
    // Refused by the key: the org reserved nothing either.
    expect((await org(k.orgId)).heldMicros).toBe(600n);
    expect(await other.hot.reserve(k.orgId, 400n, k.limit)).toBe('reserved');
    await other.hot.settle();
    expect(await keyRow(k.keyId)).toMatchObject({ heldMicros: 1_000n, windowSpentMicros: 0n });
    // A request costs 450 of its 600: counted in the window, its reservation released from key and org.
    await a.applyUsageDebit({
      orgId: k.orgId,
      apiKeyId: k.keyId,
      amountMicros: -450n,
      kind: 'usage',
      description: 'tts',
      releaseMicros: 600n,
      budgetedKey: k.limit,
    });
    await a.settle();
    expect(await keyRow(k.keyId)).toMatchObject({ heldMicros: 400n, windowSpentMicros: 450n, windowStartedAt: new Date(DAY) });
    expect((await org(k.orgId)).heldMicros).toBe(400n);
    // 1,000 - 450 spent - 400 reserved = 150 left, whichever process asks.
    expect(await a.reserve(k.orgId, 151n, k.limit)).toBe('key_short');
    expect(await other.hot.reserve(k.orgId, 151n, k.limit)).toBe('key_short');
    expect(await a.reserve(k.orgId, 150n, k.limit)).toBe('reserved');
    await a.settle();
    const found = await other.hot.findKeyByHash(k.hash);
    expect(found?.budget).toMatchObject({ limitMicros: 1_000n, window: 'day', windowStartedAt: DAY, spentMicros: 450n, heldMicros: 550n });
    // The next day the spend counts nothing; reservations still do.
    const tomorrow = { ...k.limit, windowStart: NEXT_DAY };
    expect(await other.hot.reserve(k.orgId, 451n, tomorrow)).toBe('key_short');
    expect(await other.hot.reserve(k.orgId, 450n, tomorrow)).toBe('reserved');
    await other.hot.settle();
    other.hot.release(k.orgId, 850n, k.keyId);
    a.release(k.orgId, 150n, k.keyId);
    await other.hot.settle();
    await a.settle();
    await expect.poll(async () => (await keyRow(k.keyId)).heldMicros).toBe(0n);
    await expect.poll(async () => (await org(k.orgId)).heldMicros).toBe(0n);
    // A debit of the new day starts the window over.
    await a.applyUsageDebit({ orgId: k.orgId, apiKeyId: k.keyId, amountMicros: -30n, kind: 'usage', description: 'tts', budgetedKey: tomorrow });
    await a.settle();
    expect(await keyRow(k.keyId)).toMatchObject({ windowSpentMicros: 30n, windowStartedAt: new Date(NEXT_DAY) });
    expect((await org(k.orgId)).balanceMicros).toBe(1_000_000n - 480n);
  });

  it("a key's reservation that expired and was released by another process is not released twice", async () => {
    const k = await budgetedKey(1_000n);
    const a = t.db.hot;
    expect(await a.reserve(k.orgId, 600n, k.limit)).toBe('reserved');
    await a.settle();
    const past = new Date(Date.now() - 60_000);
    await t.db.prisma.creditHold.updateMany({ where: { orgId: k.orgId }, data: { expiresAt: past } });
    await t.db.prisma.keyHold.updateMany({ where: { apiKeyId: k.keyId }, data: { expiresAt: past } });
    await other.hot.maintainHolds(60_000);
    expect((await keyRow(k.keyId)).heldMicros).toBe(0n);
    expect(await t.db.prisma.keyHold.count({ where: { apiKeyId: k.keyId } })).toBe(0);
    a.release(k.orgId, 600n, k.keyId);
    await a.settle();
    await expect.poll(async () => (await keyRow(k.keyId)).heldMicros).toBe(0n);
    expect((await org(k.orgId)).heldMicros).toBe(0n);
    // Every process sees the whole limit again.
    expect(await other.hot.reserve(k.orgId, 1_000n, k.limit)).toBe('reserved');
    await other.hot.settle();
    other.hot.release(k.orgId, 1_000n, k.keyId);
    await other.hot.settle();
    await expect.poll(async () => (await keyRow(k.keyId)).heldMicros).toBe(0n);
  });
});
