// `svc key update`: an existing key's budget and scope changed by an operator (each flag left out
// stays, `none` / `never` / `all` removes), the real CLI in its own process against the test database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { verifyApiKey } from '../server/services/keys/verify-api-key.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { svcCli } from '../test/support/svc-cli.ts';
import { createTestDatabase, type TestDatabase } from '../test/support/test-database.ts';

let t: TestDatabase;
let orgId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  orgId = (await createOrg(t.db, { name: 'cli key update' })).id;
  await upsertModel(t.db.prisma, checkProtocol, { id: 'local-flite', modality: 'tts', upstream: { url: 'local:flite', protocol: 'flite' } });
});
afterAll(async () => {
  await t?.drop();
});

const { svc, svcOk } = svcCli(() => t);

describe('svc key update', () => {
  it('sets a spend limit per day, an expiry and a model list, then changes one and removes the rest; the gateway reads each', async () => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'operator edits' });
    const set = await svcOk(
      'key',
      'update',
      '--id',
      key.id,
      '--spend-limit-usd',
      '3',
      '--spend-window',
      'day',
      '--expires',
      '2099-01-31',
      '--models',
      'local-flite',
    );
    expect(set).toEqual({ id: key.id, spend_limit_usd: '3.000000', spend_window: 'day', expires_at: '2099-01-31T00:00:00.000Z', models: ['local-flite'] });
    const auth = await verifyApiKey(t.db.hot, key.key);
    expect(auth).toMatchObject({ budget: { limitMicros: 3_000_000n, window: 'day' }, expiresAt: Date.parse('2099-01-31T00:00:00Z') });
    expect([...auth.allowedModels!]).toEqual(['local-flite']);

    expect(await svcOk('key', 'update', '--id', key.id, '--spend-window', 'month')).toMatchObject({ spend_limit_usd: '3.000000', spend_window: 'month' });
    expect(await svcOk('key', 'update', '--id', key.id, '--spend-limit-usd', 'none', '--expires', 'never', '--models', 'all')).toEqual({
      id: key.id,
      spend_limit_usd: null,
      spend_window: null,
      expires_at: null,
      models: null,
    });
    await expect(verifyApiKey(t.db.hot, key.key)).resolves.toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
  });

  it.each([
    { name: 'no flag at all', args: [], stderr: /name at least one of --spend-limit-usd/ },
    { name: 'an unknown key', args: ['--spend-limit-usd', '1'], id: 'key_nope', stderr: /No API key with id key_nope/ },
    { name: 'a window without a limit', args: ['--spend-window', 'day'], stderr: /A spend window needs a spend limit/ },
    { name: 'an expiry in the past', args: ['--expires', '2020-01-01'], stderr: /The expiry must be in the future/ },
    { name: 'a model not in the registry', args: ['--models', 'nope'], stderr: /No model 'nope' in the registry/ },
  ])('refuses $name, changing nothing', async ({ args, id, stderr }) => {
    const key = await createApiKey(t.db.prisma, { orgId, name: 'refused' });
    const r = await svc('key', 'update', '--id', id ?? key.id, ...args);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(stderr);
    await expect(verifyApiKey(t.db.hot, key.key)).resolves.toMatchObject({ budget: null, expiresAt: null, allowedModels: null });
  });
});
