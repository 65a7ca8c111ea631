// Changing a key's limits on a real database (SQLite; PostgreSQL with TEST_DB=postgresql), read
// back through the gateway's own key lookup (the hot store): each limit set, changed and removed;
// a new limit, or another window, counts what the key already spent in its window from the
// ledger, and a debit admitted under the old window still counts on top; refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { newId } from '../../db/ids.ts';
import { createOrg } from '../orgs/create-org.ts';
import { hashApiKey } from './api-key-format.ts';
import { createApiKey } from './create-api-key.ts';
import { windowStartOf } from './key-budget.ts';
import { listApiKeys } from './list-api-keys.ts';
import { revokeApiKey } from './revoke-api-key.ts';
import { updateApiKeyLimits } from './update-api-key-limits.ts';

let t: TestDatabase;
let orgId: string;
/** Mid-month, mid-day: the day's and the month's windows hold different debits. */
const NOW = new Date('2026-03-15T12:00:00Z');

beforeAll(async () => {
  t = await createTestDatabase();
  orgId = (await createOrg(t.db, { name: 'keys', creditsMicros: 100_000_000n })).id;
  for (const id of ['tts-a', 'tts-b']) await t.db.prisma.model.create({ data: { id, modality: 'tts' } });
});
afterAll(async () => {
  await t?.drop();
});

/** A usage debit of the key (or a grant) written at `at`, as the ledger keeps them. */
async function ledgerRow(keyId: string | null, amountMicros: bigint, at: string, kind: 'usage' | 'grant' = 'usage') {
  await t.db.prisma.ledgerEntry.create({
    data: { id: newId('led'), orgId, kind, amountMicros, balanceAfterMicros: 0n, apiKeyId: keyId, createdAt: new Date(at) },
  });
}

const lookup = (key: string) => t.db.hot.findKeyByHash(hashApiKey(key));
const listed = async (id: string, now = NOW) => (await listApiKeys(t.db.prisma, { orgId, now })).find((k) => k.id === id)!;

describe('updateApiKeyLimits', () => {
  it('sets, changes and removes each limit; the gateway reads them with the key', async () => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'agent' });
    expect(await lookup(key.key)).toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
    const expiresAt = new Date(Date.now() + 86_400_000);
    await expect(
      updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 2_000_000n, spendWindow: 'day', expiresAt, models: ['tts-a', 'tts-a', 'tts-b'] }),
    ).resolves.toEqual({ id: key.id, spendLimitMicros: 2_000_000n, spendWindow: 'day', expiresAt, models: ['tts-a', 'tts-b'] });
    const limited = await lookup(key.key);
    expect(limited).toMatchObject({ budget: { limitMicros: 2_000_000n, window: 'day' }, expiresAt: expiresAt.getTime() });
    expect([...limited!.allowedModels!]).toEqual(['tts-a', 'tts-b']);

    // Only what is named changes.
    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 5_000_000n });
    expect(await lookup(key.key)).toMatchObject({ budget: { limitMicros: 5_000_000n, window: 'day' }, expiresAt: expiresAt.getTime() });
    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendWindow: 'month' });
    expect((await lookup(key.key))!.budget).toMatchObject({ limitMicros: 5_000_000n, window: 'month' });

    // null removes each.
    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: null, expiresAt: null, models: null });
    expect(await lookup(key.key)).toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
    expect(await listed(key.id)).toMatchObject({ budget: null, expiresAt: null, models: null });
  });

  it("a new limit counts the window's spend from the ledger; another window counts again; a debit admitted under the old window counts on top", async () => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'spender' });
    const other = await createApiKey(t.db.prisma, { orgId, name: 'other' });
    await ledgerRow(key.id, -400_000n, '2026-03-15T08:00:00Z'); // today
    await ledgerRow(key.id, -250_000n, '2026-03-03T10:00:00Z'); // earlier this month
    await ledgerRow(key.id, -1_000_000n, '2026-02-27T10:00:00Z'); // last month
    await ledgerRow(other.id, -700_000n, '2026-03-15T09:00:00Z'); // another key's
    await ledgerRow(null, 5_000_000n, '2026-03-15T09:30:00Z', 'grant');

    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 1_000_000n, spendWindow: 'day', now: NOW });
    expect((await listed(key.id)).budget).toMatchObject({ limitMicros: 1_000_000n, window: 'day', spentMicros: 400_000n });
    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendWindow: 'month', now: NOW });
    expect((await listed(key.id)).budget).toMatchObject({ window: 'month', spentMicros: 650_000n });
    // The limit alone changing keeps the count.
    await updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 3_000_000n, now: NOW });
    expect((await listed(key.id)).budget).toMatchObject({ limitMicros: 3_000_000n, spentMicros: 650_000n });

    // A request admitted while the key counted per day is debited after the change: it counts in the month too.
    await t.db.hot.applyLedgerChange({
      orgId,
      amountMicros: -50_000n,
      kind: 'usage',
      description: 'tts',
      apiKeyId: key.id,
      budgetedKey: { keyId: key.id, limitMicros: 1_000_000n, windowStart: windowStartOf('day', NOW.getTime()) },
    });
    expect((await listed(key.id)).budget).toMatchObject({ spentMicros: 700_000n });
    // The next month starts over.
    expect((await listed(key.id, new Date('2026-04-01T00:00:00Z'))).budget).toMatchObject({ spentMicros: 0n });
  });

  it('refuses what cannot be: another org\u2019s key, a revoked key, a past expiry, a window without a limit, an unknown model, a limit of 0', async () => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'refusals' });
    const stranger = (await createOrg(t.db, { name: 'stranger' })).id;
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId: stranger, spendLimitMicros: 1n })).rejects.toMatchObject({ code: 'key_not_found' });
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, expiresAt: new Date('2020-01-01T00:00:00Z') })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'expiresAt',
    });
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendWindow: 'day' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'A spend window needs a spend limit.',
    });
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, models: ['nope'] })).rejects.toMatchObject({
      code: 'invalid_request',
      message: "No model 'nope' in the registry.",
    });
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 0n })).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'spendLimit',
    });
    expect(await listed(key.id)).toMatchObject({ budget: null, expiresAt: null, models: null });
    await revokeApiKey(t.db.prisma, { id: key.id, orgId });
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, spendLimitMicros: 1_000_000n })).rejects.toMatchObject({ code: 'conflict' });
  });

  it('a key past its expiry may have its other limits changed, or a new expiry', async () => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'expiring', expiresAt: new Date(Date.now() + 60_000) });
    const later = new Date(Date.now() + 120_000);
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, models: ['tts-a'], now: later })).resolves.toMatchObject({ models: ['tts-a'] });
    const renewed = new Date(Date.now() + 86_400_000);
    await expect(updateApiKeyLimits(t.db.prisma, { id: key.id, orgId, expiresAt: renewed, now: later })).resolves.toMatchObject({ expiresAt: renewed });
  });
});
