// The registry's snapshot of an upstream's engine key: the value of the variable it names, taken
// at each refresh, and never among the entry's enumerable properties (nothing that logs or
// serialises an entry shows it).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { ModelRegistry } from './model-registry.ts';

const KEY_ENV = 'SVC_TEST_REGISTRY_ENGINE_KEY';
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'keyed',
    modality: 'llm',
    prices: {},
    upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai', apiKeyEnv: KEY_ENV },
  });
  await upsertModel(t.db.prisma, checkProtocol, { id: 'keyless', modality: 'llm', prices: {}, upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' } });
});
afterAll(async () => {
  delete process.env[KEY_ENV];
  await t?.drop();
});

it("carries the named variable's value as of the last refresh, and never in what is serialised", async () => {
  const registry = new ModelRegistry(t.db.prisma);
  process.env[KEY_ENV] = 'sk-engine-first';
  await registry.refresh();
  const keyed = registry.resolve('keyed', 'llm', null).upstreams[0]!;
  expect(keyed.apiKey).toBe('sk-engine-first');
  expect(keyed.apiKeyEnv).toBe(KEY_ENV);
  expect(JSON.stringify(keyed)).not.toContain('sk-engine-first');
  expect(Object.keys(keyed)).not.toContain('apiKey');
  expect({ ...keyed }).not.toHaveProperty('apiKey');
  expect(registry.resolve('keyless', 'llm', null).upstreams[0]!.apiKey).toBeUndefined();

  process.env[KEY_ENV] = 'sk-engine-rotated';
  await registry.refresh();
  expect(registry.resolve('keyed', 'llm', null).upstreams[0]!.apiKey).toBe('sk-engine-rotated');
  delete process.env[KEY_ENV];
  await registry.refresh();
  expect(registry.resolve('keyed', 'llm', null).upstreams[0]!.apiKey).toBeUndefined();
});
