// The gateway core against a real, migrated database (SQLite by default, PostgreSQL with
// TEST_DB=postgresql): key verification, rate limit, credit check and atomic debits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresHotStore } from '../../server/db/hot-store-postgres.ts';
import type { UsageRecord } from '../../server/db/hot-store.ts';
import { grantCredits } from '../../server/services/credits/grant-credits.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { generateApiKey } from '../../server/services/keys/api-key-format.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { envelope } from '../errors.ts';
import type { FastifyRequest } from 'fastify';
import { createGatewayCore, presentedKey, type GatewayCore } from './gateway-core.ts';
import { WINDOW_MS, createMemoryRateLimiter, type RateLimiter } from '../../server/rate-limit/rate-limiter.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { manualClock } from '../../test/support/manual-clock.ts';

let t: TestDatabase;
const limiters: RateLimiter[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(limiters.map((l) => l.close()));
  await t?.drop();
});

/** A memory limiter pinned to one instant in the middle of a window: no test depends on the clock. */
function pinnedLimiter(now = 29_000_000 * WINDOW_MS + 30_000): RateLimiter {
  const limiter = createMemoryRateLimiter(manualClock(now));
  limiters.push(limiter);
  return limiter;
}

function makeCore(opts: { defaultRpm?: number; limiter?: RateLimiter; used?: string[]; store?: TestDatabase['db']['hot'] } = {}): GatewayCore {
  return createGatewayCore({
    store: opts.store ?? t.db.hot,
    limiter: opts.limiter ?? pinnedLimiter(),
    defaultRpm: opts.defaultRpm ?? 600,
    onKeyUsed: (id) => opts.used?.push(id),
  });
}

async function newOrgWithKey(credits: bigint, rpm: number | null = null) {
  const org = await createOrg(t.db, { name: `org ${Math.random()}`, creditsMicros: credits });
  const key = await createApiKey(t.db.prisma, { orgId: org.id, rateLimitRpm: rpm });
  return { orgId: org.id, keyId: key.id, key: key.key };
}

/** Awaits a rejection that must be a ServiceError and returns it with its HTTP mapping. */
async function rejection(p: Promise<unknown>) {
  const err = await p.then(
    () => {
      throw new Error('expected the call to be refused, but it was admitted');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  const se = err as ServiceError;
  return { err: se, ...envelope(se) };
}

const usage: UsageRecord = { modelId: 'test-llm', modality: 'llm', route: 'chat.completions', inputTokens: 1, outputTokens: 1 };

describe('authentication (401)', () => {
  it.each([
    {
      name: 'no key',
      presented: () => undefined,
      code: 'invalid_api_key',
      message: /did not provide an API key.*Authorization.*Bearer/i,
    },
    { name: 'empty key', presented: () => '', code: 'invalid_api_key', message: /did not provide an API key/i },
    { name: 'malformed key', presented: () => 'hello-world', code: 'invalid_api_key', message: /^Incorrect API key provided/ },
    {
      name: 'key of another provider',
      presented: () => `sk-proj-${'a'.repeat(48)}`,
      code: 'invalid_api_key',
      message: /^Incorrect API key provided/,
    },
    { name: 'well-formed key that does not exist', presented: () => generateApiKey(), code: 'invalid_api_key', message: /^Incorrect API key provided/ },
  ])('$name -> 401 $code', async ({ presented, code, message }) => {
    const core = makeCore();
    const key = presented();
    const { err, status, body } = await rejection(core.admit(key, true));
    expect(status).toBe(401);
    expect(body.error).toMatchObject({ code, type: 'invalid_request_error', param: null });
    expect(err.message).toMatch(message);
    if (key && key.length > 20) {
      // The message names the key only in redacted form.
      expect(err.message).not.toContain(key);
      expect(err.message).not.toContain(key.slice(11, -4));
    }
  });

  it('revoked key -> 401 api_key_disabled', async () => {
    const { keyId, key } = await newOrgWithKey(5_000_000n);
    await revokeApiKey(t.db.prisma, { id: keyId });
    const { status, body } = await rejection(makeCore().admit(key, false));
    expect(status).toBe(401);
    expect(body.error).toMatchObject({ code: 'api_key_disabled', type: 'invalid_request_error', param: null });
    expect(body.error.message).toMatch(/disabled/i);
  });

  it('sees a revocation on the very next admit, with no cache in between', async () => {
    const { keyId, key } = await newOrgWithKey(5_000_000n);
    const core = makeCore();
    for (let i = 0; i < 3; i++) await expect(core.admit(key, true)).resolves.toMatchObject({ keyId });
    await revokeApiKey(t.db.prisma, { id: keyId });
    const { body } = await rejection(core.admit(key, true));
    expect(body.error.code).toBe('api_key_disabled');
    // and it stays refused, metered or not
    expect((await rejection(core.admit(key, false))).body.error.code).toBe('api_key_disabled');
  });

  it('admits a valid key and reports its key, org and balance', async () => {
    const { keyId, orgId, key } = await newOrgWithKey(1_234_567n);
    const used: string[] = [];
    const auth = await makeCore({ used }).admit(key, true);
    expect(auth).toMatchObject({ keyId, orgId, balanceMicros: 1_234_567n });
    expect(used).toEqual([keyId]);
  });

  it('does not mark a refused key as used', async () => {
    const { keyId, key } = await newOrgWithKey(0n);
    const used: string[] = [];
    await rejection(makeCore({ used }).admit(key, true));
    expect(used).toEqual([]);
    await revokeApiKey(t.db.prisma, { id: keyId });
    await rejection(makeCore({ used }).admit(key, false));
    expect(used).toEqual([]);
  });
});

describe('presentedKey', () => {
  const from = (authorization: string | undefined, query?: Record<string, string>, allowQuery = false) =>
    presentedKey({ headers: { authorization }, query } as unknown as FastifyRequest, allowQuery);

  it.each([
    ['Bearer sk_svc_abc', 'sk_svc_abc'],
    ['bearer sk_svc_abc', 'sk_svc_abc'],
    ['BEARER   sk_svc_abc  ', 'sk_svc_abc'],
    [' Bearer sk_svc_abc', 'sk_svc_abc'],
    ['Bearer\tsk_svc_abc\t', 'sk_svc_abc'],
    ['Bearer sk_svc abc', 'sk_svc abc'],
    ['sk_svc_abc', 'sk_svc_abc'],
    ['Bearer', undefined],
    ['bearer  ', undefined],
    [undefined, undefined],
  ])('Authorization %j -> %j', (header, key) => {
    expect(from(header)).toBe(key);
  });

  it.each([
    ['Token sk_svc_abc', 'sk_svc_abc'],
    ['token   sk_svc_abc ', 'sk_svc_abc'],
    ['Token', undefined],
  ])("Authorization %j -> %j (Deepgram's scheme)", (header, key) => {
    expect(from(header)).toBe(key);
  });

  it('reads ?api_key= and ?access_token= only where the route allows it (WebSocket upgrades)', () => {
    expect(from(undefined, { api_key: 'sk_svc_q' })).toBeUndefined();
    expect(from(undefined, { access_token: 'sk_svc_q' })).toBeUndefined();
    expect(from(undefined, { api_key: 'sk_svc_q' }, true)).toBe('sk_svc_q');
    expect(from(undefined, { access_token: 'sk_svc_q' }, true)).toBe('sk_svc_q');
    expect(from(undefined, { api_key: '' }, true)).toBeUndefined();
  });

  it('takes X-API-Key, and the openai-insecure-api-key subprotocol on upgrades only', () => {
    const req = (headers: Record<string, string>, onUpgrade = false) => presentedKey({ headers, query: {} } as unknown as FastifyRequest, onUpgrade);
    expect(req({ 'x-api-key': ' sk_svc_x ' })).toBe('sk_svc_x');
    expect(req({ 'x-api-key': '' })).toBeUndefined();
    const protocols = { 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk_svc_p, openai-beta.realtime-v1' };
    expect(req(protocols)).toBeUndefined();
    expect(req(protocols, true)).toBe('sk_svc_p');
    expect(req({ 'sec-websocket-protocol': 'openai-insecure-api-key.' }, true)).toBeUndefined();
  });

  it('the same key given several ways counts once; two different keys are refused (401), not one picked', () => {
    expect(from('Bearer sk_svc_h', { api_key: 'sk_svc_h', access_token: 'sk_svc_h' }, true)).toBe('sk_svc_h');
    const conflicts: [string | undefined, Record<string, unknown>, string][] = [
      ['Bearer sk_svc_h', { api_key: 'sk_svc_q' }, 'in the Authorization header and in the api_key query parameter'],
      [undefined, { api_key: 'sk_svc_a', access_token: 'sk_svc_b' }, 'in the api_key query parameter and in the access_token query parameter'],
      [undefined, { api_key: ['sk_svc_a', 'sk_svc_b'] }, 'in the api_key query parameter and in the api_key query parameter'],
    ];
    for (const [authorization, query, where] of conflicts) {
      const call = () => presentedKey({ headers: { authorization }, query } as unknown as FastifyRequest, true);
      expect(call).toThrow(ServiceError);
      expect(call).toThrow(where);
      try {
        call();
      } catch (e) {
        expect((e as ServiceError).code).toBe('invalid_api_key');
        expect((e as ServiceError).message).not.toContain('sk_svc_');
      }
    }
    expect(() => presentedKey({ headers: { authorization: 'Token sk_svc_a', 'x-api-key': 'sk_svc_b' }, query: {} } as unknown as FastifyRequest)).toThrow(
      'in the Authorization header and in the X-API-Key header',
    );
  });
});

describe('credit check (402)', () => {
  it.each([
    { name: 'zero balance', setup: 0n, metered: true, admitted: false, shown: '0.000000' },
    { name: 'negative balance', setup: -1n, metered: true, admitted: false, shown: '-0.000001' },
    { name: 'much negative balance', setup: -2_500_000n, metered: true, admitted: false, shown: '-2.500000' },
    { name: 'one micro-USD', setup: 1n, metered: true, admitted: true, shown: '' },
    { name: 'zero balance, unmetered route', setup: 0n, metered: false, admitted: true, shown: '' },
    { name: 'negative balance, unmetered route', setup: -2_500_000n, metered: false, admitted: true, shown: '' },
  ])('$name (metered: $metered) -> admitted: $admitted', async ({ setup, metered, admitted, shown }) => {
    const { orgId, key } = await newOrgWithKey(0n);
    if (setup !== 0n) await grantCredits(t.db, { orgId, amountMicros: setup });
    const core = makeCore();
    if (admitted) {
      await expect(core.admit(key, metered)).resolves.toMatchObject({ orgId, balanceMicros: setup });
      return;
    }
    const { status, body } = await rejection(core.admit(key, metered));
    expect(status).toBe(402);
    expect(body.error).toMatchObject({ code: 'insufficient_quota', type: 'insufficient_quota', param: null });
    expect(body.error.message).toContain(`${shown} USD`);
  });

  it('admits again as soon as credits are granted', async () => {
    const { orgId, key } = await newOrgWithKey(0n);
    const core = makeCore();
    expect((await rejection(core.admit(key, true))).body.error.code).toBe('insufficient_quota');
    await grantCredits(t.db, { orgId, amountMicros: 10n });
    await expect(core.admit(key, true)).resolves.toMatchObject({ balanceMicros: 10n });
  });
});

describe('rate limit (429)', () => {
  async function admitUntilRefused(core: GatewayCore, key: string, max: number) {
    let admitted = 0;
    for (let i = 0; i < max; i++) {
      try {
        await core.admit(key, true);
        admitted++;
      } catch (e) {
        return { admitted, refusal: await rejection(Promise.reject(e)) };
      }
    }
    return { admitted, refusal: null };
  }

  it.each([
    { name: 'gateway default', defaultRpm: 3, keyRpm: null, expected: 3 },
    { name: 'per-key --rpm lower than the default', defaultRpm: 10, keyRpm: 2, expected: 2 },
    { name: 'per-key --rpm higher than the default', defaultRpm: 2, keyRpm: 5, expected: 5 },
  ])('$name: $expected admitted, then 429 with Retry-After', async ({ defaultRpm, keyRpm, expected }) => {
    const { key } = await newOrgWithKey(5_000_000n, keyRpm);
    const { admitted, refusal } = await admitUntilRefused(makeCore({ defaultRpm }), key, expected + 5);
    expect(admitted).toBe(expected);
    expect(refusal).not.toBeNull();
    const { status, body, err } = refusal!;
    expect(status).toBe(429);
    expect(body.error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error', param: null });
    // The pinned clock is 30 s into the window.
    expect(err.retryAfterSeconds).toBe(30);
    expect(body.error.message).toMatch(/try again in 30s$/);
    expect(body.error.message).toContain(`${expected} requests per minute`);
  });

  it('limits each key separately, even within one org', async () => {
    const { orgId, key } = await newOrgWithKey(5_000_000n, 1);
    const other = await createApiKey(t.db.prisma, { orgId, rateLimitRpm: 1 });
    const core = makeCore();
    await core.admit(key, true);
    expect((await rejection(core.admit(key, true))).status).toBe(429);
    await expect(core.admit(other.key, true)).resolves.toMatchObject({ keyId: other.id });
  });

  it('checks the limit before the balance: an over-limit key with no credit gets 429', async () => {
    const { key } = await newOrgWithKey(0n, 1);
    const core = makeCore();
    expect((await rejection(core.admit(key, true))).status).toBe(402);
    expect((await rejection(core.admit(key, true))).status).toBe(429);
  });

  it('fails open when the shared limiter is down', async () => {
    const { keyId, key } = await newOrgWithKey(5_000_000n, 1);
    const broken: RateLimiter = { consume: () => Promise.reject(new Error('redis down')), close: async () => {} };
    const core = makeCore({ limiter: broken });
    for (let i = 0; i < 3; i++) await expect(core.admit(key, true)).resolves.toMatchObject({ keyId });
  });
});

describe('key verification unavailable (503)', () => {
  it('a store that cannot be reached -> 503 verify_unavailable, not 401', async () => {
    const down = createPostgresHotStore('postgresql://postgres@127.0.0.1:1/svc_unreachable');
    try {
      const core = makeCore({ store: down });
      const { status, body } = await rejection(core.admit(generateApiKey(), true));
      expect(status).toBe(503);
      expect(body.error).toMatchObject({ code: 'verify_unavailable', type: 'api_error', param: null });
      expect(body.error.message).toMatch(/retry/i);
      // Malformed keys are refused without asking the store.
      expect((await rejection(core.admit('nope', true))).body.error.code).toBe('invalid_api_key');
      expect((await rejection(core.admit(undefined, true))).body.error.code).toBe('invalid_api_key');
    } finally {
      await down.close();
    }
  });
});

describe('concurrent debits', () => {
  it('200 concurrent charges on one org: no lost or doubled amount, one ledger row and one usage event each', async () => {
    const initial = 50_000_000n;
    const { orgId, keyId, key } = await newOrgWithKey(initial);
    const core = makeCore();
    const auth = await core.admit(key, true);
    // Distinct costs, so that the balance after each debit identifies its position.
    const costs = Array.from({ length: 200 }, (_v, i) => BigInt(1_000 + i * 7));
    const total = costs.reduce((s, c) => s + c, 0n);

    const returned = await Promise.all(costs.map((c, i) => core.charge(auth, `req_conc_${i}`, c, { ...usage, inputTokens: i })));
    // On SQLite the charges answer before their commit, which follows in the same turn.
    await t.db.hot.settle();

    const balance = await t.db.hot.getBalance(orgId);
    expect(balance).toBe(initial - total);

    const ledger = await t.db.prisma.ledgerEntry.findMany({ where: { orgId } });
    const debits = ledger.filter((l) => l.kind === 'usage');
    expect(debits).toHaveLength(200);
    expect(ledger).toHaveLength(201); // plus the initial grant
    expect(debits.reduce((s, l) => s + l.amountMicros, 0n)).toBe(-total);
    expect(ledger.reduce((s, l) => s + l.amountMicros, 0n)).toBe(balance);
    expect(new Set(debits.map((l) => l.requestId))).toEqual(new Set(costs.map((_c, i) => `req_conc_${i}`)));
    expect(debits.every((l) => l.apiKeyId === keyId)).toBe(true);

    // Serialised: ordered by balance, every row's balance-after is the previous one minus its own amount.
    const ordered = [...debits].sort((a, b) => (a.balanceAfterMicros > b.balanceAfterMicros ? -1 : 1));
    let running = initial;
    for (const row of ordered) {
      running += row.amountMicros;
      expect(row.balanceAfterMicros).toBe(running);
    }
    // Each caller got the balance right after its own debit.
    expect(new Set(returned)).toEqual(new Set(debits.map((l) => l.balanceAfterMicros)));

    const events = await usageRows(t.db.prisma, { orgId });
    expect(events).toHaveLength(200);
    expect(events.reduce((s, e) => s + e.costMicros, 0n)).toBe(total);
    const byRequest = new Map(events.map((e) => [e.requestId, e]));
    costs.forEach((c, i) => {
      expect(byRequest.get(`req_conc_${i}`)).toMatchObject({
        costMicros: c,
        inputTokens: i,
        outputTokens: 1,
        modelId: 'test-llm',
        modality: 'llm',
        apiKeyId: keyId,
      });
    });
  });

  it('a charge may take the balance below zero (requests in flight), and the next metered admit is refused', async () => {
    const { orgId, key } = await newOrgWithKey(100n);
    const core = makeCore();
    const auths = await Promise.all([core.admit(key, true), core.admit(key, true)]);
    const after = await Promise.all(auths.map((a, i) => core.charge(a, `req_neg_${i}`, 80n, usage)));
    expect(after.sort((x, y) => (x < y ? -1 : 1))).toEqual([-60n, 20n]);
    expect(await t.db.hot.getBalance(orgId)).toBe(-60n);
    expect((await rejection(core.admit(key, true))).status).toBe(402);
  });
});
