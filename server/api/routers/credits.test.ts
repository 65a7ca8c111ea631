import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let admin: TestUser;
let alice: TestUser;
let bob: TestUser;

const tick = () => new Promise((r) => setTimeout(r, 3));

beforeAll(async () => {
  h = await createApiHarness();
  admin = await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
});
afterAll(async () => {
  await h?.drop();
});

describe('credits: happy path', () => {
  it('starts with a zero balance and an empty ledger', async () => {
    await expect(bob.caller.credits.ledger({})).resolves.toEqual({ balanceUsd: '0.000000', total: 0, nextCursor: null, entries: [] });
  });

  it('lets a platform admin grant credit to any org, recorded in its ledger', async () => {
    expect(admin.isPlatformAdmin).toBe(true);
    await expect(admin.caller.credits.grant({ orgId: alice.orgId, amountUsd: '12.5', description: 'welcome' })).resolves.toEqual({
      orgId: alice.orgId,
      balanceUsd: '12.500000',
    });
    const ledger = await alice.caller.credits.ledger({});
    expect(ledger.balanceUsd).toBe('12.500000');
    expect(ledger.entries).toHaveLength(1);
    expect(ledger.entries[0]).toMatchObject({
      kind: 'grant',
      amountUsd: '12.500000',
      balanceAfterUsd: '12.500000',
      description: 'welcome (by admin@example.com)',
    });
  });

  it('refuses a negative amount unless it is an explicit adjustment', async () => {
    await expect(admin.caller.credits.grant({ orgId: alice.orgId, amountUsd: '-5' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('Enter an amount above zero'),
    });
    expect((await alice.caller.credits.ledger({})).balanceUsd).toBe('12.500000');
  });

  it('accepts negative adjustments', async () => {
    await admin.caller.credits.grant({ orgId: alice.orgId, amountUsd: '-0.000001', adjustment: true });
    const ledger = await alice.caller.credits.ledger({});
    expect(ledger.balanceUsd).toBe('12.499999');
    expect(ledger.entries[0]).toMatchObject({ kind: 'adjustment', amountUsd: '-0.000001' });
  });

  it('pages through the ledger newest first', async () => {
    for (let i = 1; i <= 25; i++) {
      await admin.caller.credits.grant({ orgId: bob.orgId, amountUsd: `0.${String(i).padStart(6, '0')}`, description: `grant ${i}` });
      await tick();
    }
    const first = await bob.caller.credits.ledger({ limit: 20 });
    expect(first.total).toBe(25);
    expect(first.entries.map((e) => e.description.split(' (')[0])).toEqual(Array.from({ length: 20 }, (_, i) => `grant ${25 - i}`));
    expect(first.nextCursor).toBe(first.entries[19]!.id);
    const second = await bob.caller.credits.ledger({ limit: 20, cursor: first.nextCursor });
    expect(second.entries.map((e) => e.description.split(' (')[0])).toEqual(['grant 5', 'grant 4', 'grant 3', 'grant 2', 'grant 1']);
    expect(second.nextCursor).toBeNull();
    // 0.000001 + ... + 0.000025
    expect(first.balanceUsd).toBe('0.000325');
  });

  it('lists orgs with balances for the admin, searchable', async () => {
    const all = await admin.caller.credits.orgs({});
    expect(all.map((o) => o.id)).toEqual(expect.arrayContaining([admin.orgId, alice.orgId, bob.orgId]));
    const found = await admin.caller.credits.orgs({ query: alice.orgId });
    expect(found).toEqual([{ id: alice.orgId, name: "alice's org", isTrial: false, balanceUsd: '12.499999' }]);
  });
});

describe('credits: errors', () => {
  it('rejects malformed and zero amounts', async () => {
    for (const amountUsd of ['ten', '1.1234567', '', '1e3']) {
      await expect(admin.caller.credits.grant({ orgId: alice.orgId, amountUsd })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    }
    await expect(admin.caller.credits.grant({ orgId: alice.orgId, amountUsd: '0.000000' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'The amount must not be zero.',
    });
  });

  it('answers NOT_FOUND for an unknown org', async () => {
    await expect(admin.caller.credits.grant({ orgId: 'org_missing', amountUsd: '1' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('rejects a cursor that is not a ledger row of the org', async () => {
    const bobs = await bob.caller.credits.ledger({ limit: 1 });
    await expect(alice.caller.credits.ledger({ cursor: bobs.entries[0]!.id })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.credits.ledger({ cursor: 'led_nope' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('requires a session', async () => {
    await expect(h.callerFor(null).credits.ledger({})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(h.callerFor(null).credits.grant({ orgId: alice.orgId, amountUsd: '1' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('credits: other orgs and roles', () => {
  it('a member (even an org owner) cannot grant credits, not even to their own org', async () => {
    const before = (await alice.caller.credits.ledger({})).balanceUsd;
    await expect(alice.caller.credits.grant({ orgId: alice.orgId, amountUsd: '100' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(alice.caller.credits.grant({ orgId: bob.orgId, amountUsd: '100' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(alice.caller.credits.orgs({})).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect((await alice.caller.credits.ledger({})).balanceUsd).toBe(before);
  });

  it('losing the platform-admin flag takes effect on the next call', async () => {
    await h.db.prisma.user.update({ where: { id: admin.user.id }, data: { isPlatformAdmin: false } });
    try {
      await expect(admin.caller.credits.grant({ orgId: alice.orgId, amountUsd: '1' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    } finally {
      await h.db.prisma.user.update({ where: { id: admin.user.id }, data: { isPlatformAdmin: true } });
    }
  });

  it("never shows another org's ledger", async () => {
    const alices = await alice.caller.credits.ledger({ limit: 100 });
    const bobs = await bob.caller.credits.ledger({ limit: 100 });
    const aliceIds = new Set(alices.entries.map((e) => e.id));
    expect(bobs.entries.some((e) => aliceIds.has(e.id))).toBe(false);
    const bobPretending = h.callerFor(bob.user, alice.orgId);
    expect((await bobPretending.credits.ledger({ limit: 100 })).entries.map((e) => e.id)).toEqual(bobs.entries.map((e) => e.id));
  });
});
