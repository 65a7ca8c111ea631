import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../db/ids.ts';
import { chargeUsage } from '../../services/credits/charge-usage.ts';
import { createApiKey } from '../../services/keys/create-api-key.ts';
import { revokeApiKey } from '../../services/keys/revoke-api-key.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let alice: TestUser;
let bob: TestUser;
let laptop: string;
let server: string;

const DAY = 86_400_000;
const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (n: number) => new Date(Date.now() - n * DAY);

/**
 * A past usage debit, written as Prisma writes timestamps (the per-day query reads both kinds).
 * Test data only: it does not move the org's balance.
 */
async function pastUsage(orgId: string, at: Date, modelId: string, costMicros: bigint, apiKeyId: string | null) {
  await h.db.prisma.ledgerEntry.create({
    data: {
      id: newId('led'),
      orgId,
      kind: 'usage',
      amountMicros: -costMicros,
      balanceAfterMicros: 0n,
      apiKeyId,
      requestId: newId('req'),
      modelId,
      modality: modelId.includes('stt') ? 'stt' : 'tts',
      route: '/tts/bytes',
      characters: 10,
      createdAt: at,
    },
  });
}

beforeAll(async () => {
  h = await createApiHarness();
  await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
  laptop = (await createApiKey(h.db.prisma, { orgId: alice.orgId, name: 'laptop' })).id;
  server = (await createApiKey(h.db.prisma, { orgId: alice.orgId, name: 'server' })).id;
  // Today, through the gateway's own debit path (hot store raw SQL).
  for (const [key, model, cost, chars] of [
    [laptop, 'local-flite', 120n, 60],
    [laptop, 'local-flite', 80n, 40],
    [server, 'local-stt', 1_000n, 0],
  ] as const) {
    await chargeUsage(h.db.hot, {
      orgId: alice.orgId,
      apiKeyId: key,
      requestId: newId('req'),
      costMicros: cost,
      usage: {
        modelId: model,
        modality: model === 'local-stt' ? 'stt' : 'tts',
        route: '/tts/bytes',
        characters: chars,
        audioMillis: model === 'local-stt' ? 10_000 : 0,
      },
    });
  }
  await pastUsage(alice.orgId, daysAgo(2), 'local-espeak', 5n, server);
  await pastUsage(alice.orgId, daysAgo(40), 'local-espeak', 9_999n, server); // outside 30 days
  await pastUsage(bob.orgId, new Date(), 'local-flite', 777n, null); // another org
  await revokeApiKey(h.db.prisma, { id: server, orgId: alice.orgId });
  // Grants and adjustments are ledger rows too, but not usage.
  await h.db.hot.applyLedgerChange({ orgId: alice.orgId, amountMicros: 5_000_000n, kind: 'grant', description: 'grant' });
  await h.db.hot.applyLedgerChange({ orgId: alice.orgId, amountMicros: -1_000n, kind: 'adjustment', description: 'adjustment' });
});
afterAll(async () => {
  await h?.drop();
});

describe('usage: happy path', () => {
  it('sums the last 30 days per day, per model and per key', async () => {
    const s = await alice.caller.usage.summary({});
    expect(s.totalUsd).toBe('0.001205');
    expect(s.totalRequests).toBe(4);
    expect(s.days).toHaveLength(30);
    expect(s.days.at(-1)).toMatchObject({ day: today(), requests: 3, costUsd: '0.001200' });
    expect(s.days.at(-1)!.byModel).toEqual([
      { modelId: 'local-flite', requests: 2, costUsd: '0.000200' },
      { modelId: 'local-stt', requests: 1, costUsd: '0.001000' },
    ]);
    expect(s.days.at(-3)).toMatchObject({ day: daysAgo(2).toISOString().slice(0, 10), requests: 1, costUsd: '0.000005' });
    expect(s.days.filter((d) => d.requests === 0)).toHaveLength(28);
    expect(s.models).toEqual([
      { modelId: 'local-stt', modality: 'stt', requests: 1, costUsd: '0.001000', inputTokens: 0, outputTokens: 0, characters: 0, audioMillis: 10_000 },
      { modelId: 'local-flite', modality: 'tts', requests: 2, costUsd: '0.000200', inputTokens: 0, outputTokens: 0, characters: 100, audioMillis: 0 },
      { modelId: 'local-espeak', modality: 'tts', requests: 1, costUsd: '0.000005', inputTokens: 0, outputTokens: 0, characters: 10, audioMillis: 0 },
    ]);
    expect(s.keys).toEqual([
      { keyId: server, name: 'server', prefix: expect.stringMatching(/^sk_svc_/), status: 'revoked', requests: 2, costUsd: '0.001005' },
      { keyId: laptop, name: 'laptop', prefix: expect.stringMatching(/^sk_svc_/), status: 'active', requests: 2, costUsd: '0.000200' },
    ]);
  });

  it('a longer window reaches older usage; a 1-day window only today', async () => {
    const ninety = await alice.caller.usage.summary({ days: 90 });
    expect(ninety.days).toHaveLength(90);
    expect(ninety.totalUsd).toBe('0.011204');
    const one = await alice.caller.usage.summary({ days: 1 });
    expect(one.days.map((d) => d.day)).toEqual([today()]);
    expect(one.totalUsd).toBe('0.001200');
  });

  it('an org without usage gets zeros, not an error', async () => {
    const admin = await h.signUpUser('carol@example.com');
    const s = await admin.caller.usage.summary({ days: 7 });
    expect(s).toMatchObject({ totalUsd: '0.000000', totalRequests: 0, models: [], keys: [] });
    expect(s.days).toHaveLength(7);
  });
});

describe('usage: errors and other orgs', () => {
  it('rejects windows out of range', async () => {
    for (const days of [0, 91, 1.5, -1]) await expect(alice.caller.usage.summary({ days })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.usage.summary({ days: '7' } as never)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('requires a session', async () => {
    await expect(h.callerFor(null).usage.summary({})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('shows only the caller’s org, whatever org it asks to act for', async () => {
    const s = await bob.caller.usage.summary({});
    expect(s.totalUsd).toBe('0.000777');
    expect(s.keys).toEqual([{ keyId: null, name: '(no key)', prefix: null, status: null, requests: 1, costUsd: '0.000777' }]);
    expect((await h.callerFor(bob.user, alice.orgId).usage.summary({})).totalUsd).toBe('0.000777');
  });
});
