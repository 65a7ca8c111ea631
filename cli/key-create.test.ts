// `svc key create` with a key's budget and scope (--spend-limit-usd, --spend-window, --expires,
// --models) as an operator runs it: the real CLI in its own process against the test database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { verifyApiKey } from '../server/services/keys/verify-api-key.ts';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { svcCli } from '../test/support/svc-cli.ts';
import { createTestDatabase, type TestDatabase } from '../test/support/test-database.ts';

let t: TestDatabase;
let orgId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  orgId = (await createOrg(t.db, { name: 'cli keys' })).id;
  for (const [id, modality] of [
    ['local-flite', 'tts'],
    ['local-stt', 'stt'],
  ] as const)
    await upsertModel(t.db.prisma, checkProtocol, {
      id,
      modality,
      upstream: { url: `local:${modality === 'tts' ? 'flite' : 'pocketsphinx'}`, protocol: modality === 'tts' ? 'flite' : 'pocketsphinx' },
    });
});
afterAll(async () => {
  await t?.drop();
});

const { svc, svcOk } = svcCli(() => t);

describe('svc key create', () => {
  it('with a spend limit per day, an expiry and a model list: printed, stored, and what the gateway reads with the key', async () => {
    const made = await svcOk(
      'key',
      'create',
      '--org',
      orgId,
      '--name',
      'agent',
      '--spend-limit-usd',
      '2.50',
      '--spend-window',
      'day',
      '--expires',
      '2099-01-31T18:00:00Z',
      '--models',
      'local-flite, local-stt,local-flite',
    );
    expect(made).toMatchObject({
      spend_limit_usd: '2.500000',
      spend_window: 'day',
      expires_at: '2099-01-31T18:00:00.000Z',
      models: ['local-flite', 'local-stt'],
    });
    expect(made.key).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
    const auth = await verifyApiKey(t.db.hot, made.key as string);
    expect(auth).toMatchObject({
      keyId: made.id,
      expiresAt: Date.parse('2099-01-31T18:00:00Z'),
      budget: { limitMicros: 2_500_000n, window: 'day', spentMicros: 0n, heldMicros: 0n, windowStartedAt: null },
    });
    expect([...auth.allowedModels!]).toEqual(['local-flite', 'local-stt']);
  }, 60_000);

  it('a limit alone counts per month; an expiry may be a time from now; without flags the key has none of them', async () => {
    const before = Date.now();
    const limited = await svcOk('key', 'create', '--org', orgId, '--spend-limit-usd', '10', '--expires', '30d');
    expect(limited).toMatchObject({ spend_limit_usd: '10.000000', spend_window: 'month', models: null });
    const expires = Date.parse(limited.expires_at as string);
    expect(expires).toBeGreaterThanOrEqual(before + 30 * 86_400_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * 86_400_000);
    const plain = await svcOk('key', 'create', '--org', orgId);
    expect(plain).toMatchObject({ spend_limit_usd: null, spend_window: null, expires_at: null, models: null });
    await expect(verifyApiKey(t.db.hot, plain.key as string)).resolves.toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
  }, 60_000);

  it.each([
    { name: 'a window that is not day or month', args: ['--spend-limit-usd', '1', '--spend-window', 'week'], stderr: /--spend-window.*day, month/ },
    { name: 'a window without a limit', args: ['--spend-window', 'day'], stderr: /--spend-window needs --spend-limit-usd/ },
    { name: 'a limit of zero', args: ['--spend-limit-usd', '0'], stderr: /The spend limit must be more than 0/ },
    { name: 'a limit that is no amount', args: ['--spend-limit-usd', 'lots'], stderr: /--spend-limit-usd must be a USD amount/ },
    { name: 'an expiry in the past', args: ['--expires', '2020-01-01'], stderr: /The expiry must be in the future/ },
    { name: 'an expiry that is no time', args: ['--expires', 'tomorrow'], stderr: /--expires must be an ISO 8601 date or time/ },
    { name: 'a model not in the registry', args: ['--models', 'local-flite,nope'], stderr: /No model 'nope' in the registry/ },
  ])(
    'refuses $name with a message and a non-zero exit, and makes no key',
    async ({ args, stderr }) => {
      const keys = await t.db.prisma.apiKey.count();
      const r = await svc('key', 'create', '--org', orgId, ...args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(stderr);
      expect(r.stdout).toBe('');
      expect(await t.db.prisma.apiKey.count()).toBe(keys);
    },
    60_000,
  );
});
