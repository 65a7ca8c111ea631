// Credit reservations in the hot store, on the test database (SQLite, or PostgreSQL with
// TEST_DB=postgresql), with two stores standing for two gateway processes.
import { afterAll, beforeAll, expect, it } from 'vitest';
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
  expect(await a.reserve(id, 600n)).toBe(true);
  await a.settle();
  expect(await other.hot.reserve(id, 500n)).toBe(false); // 1,000 - 600 reserved < 500
  expect(await other.hot.reserve(id, 400n)).toBe(true);
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
  expect(await a.reserve(id, 600n)).toBe(true);
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
  expect(await a.reserve(id, 100n)).toBe(true);
  await a.settle();
  await t.db.prisma.creditHold.updateMany({ where: { orgId: id }, data: { expiresAt: new Date(Date.now() - 60_000) } });
  await other.hot.maintainHolds(60_000);
  await a.applyUsageDebit({ orgId: id, amountMicros: -80n, kind: 'usage', description: 'tts', releaseMicros: 100n });
  await a.settle();
  const after = await org(id);
  expect(after.heldMicros).toBe(0n);
  expect(after.balanceMicros).toBe(920n);
  expect(await other.hot.reserve(id, 921n)).toBe(false);
});

it('rows of reservations that are all given back are removed by the upkeep; live ones are renewed', async () => {
  const { id } = await createOrg(t.db, { name: 'upkeep', creditsMicros: 1_000n });
  const { id: busy } = await createOrg(t.db, { name: 'busy', creditsMicros: 1_000n });
  const a = t.db.hot;
  expect(await a.reserve(id, 10n)).toBe(true);
  expect(await a.reserve(busy, 10n)).toBe(true);
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
