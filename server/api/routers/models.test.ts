import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../services/models/list-model-health.js';
import { seedRegistry } from '../../services/models/seed-registry.js';
import { upsertModel } from '../../services/models/upsert-model.js';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.js';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.js';

let h: ApiHarness;
let admin: TestUser;
let alice: TestUser;
const checkedAt = new Date('2026-01-02T03:04:05.678Z');

beforeAll(async () => {
  h = await createApiHarness();
  await seedRegistry(h.db.prisma, checkProtocol);
  await upsertModel(h.db.prisma, checkProtocol, {
    id: 'remote-llm',
    modality: 'llm',
    displayName: 'vLLM',
    upstream: { url: 'https://llm.internal:8443/v1?token=abc123', protocol: 'openai', apiKeyEnv: 'REMOTE_LLM_KEY', weight: 3 },
  });
  await h.db.prisma.upstream.updateMany({ where: { modelId: 'remote-llm' }, data: { health: 'down', latencyMs: 1234, lastError: 'connect ECONNREFUSED', lastCheckedAt: checkedAt } });
  await upsertModel(h.db.prisma, checkProtocol, { id: 'old-tts', modality: 'tts', status: 'disabled', upstream: { url: 'local:flite', protocol: 'flite' } });
  admin = await h.signUpUser('admin@example.com');
  alice = await h.signUpUser('alice@example.com');
});
afterAll(async () => {
  await h?.drop();
});

describe('models.health (platform admins)', () => {
  it('lists every model with its upstreams, health, latency, last error and check time, and no secrets', async () => {
    const models = await admin.caller.models.health();
    expect(models.map((m) => m.id)).toEqual(['local-llm', 'remote-llm', 'local-espeak', 'local-flite', 'old-tts', 'local-stt']);
    const remote = models.find((m) => m.id === 'remote-llm')!;
    expect(remote).toMatchObject({ modality: 'llm', displayName: 'vLLM', status: 'active' });
    expect(remote.upstreams).toEqual([
      expect.objectContaining({ url: 'https://llm.internal:8443/v1', protocol: 'openai', apiKeyEnv: 'REMOTE_LLM_KEY', weight: 3, health: 'down', latencyMs: 1234, lastError: 'connect ECONNREFUSED', lastCheckedAt: checkedAt.toISOString() }),
    ]);
    expect(JSON.stringify(models)).not.toContain('abc123');
    expect(models.find((m) => m.id === 'local-flite')!.upstreams[0]).toMatchObject({ url: 'local:flite', health: 'unknown', latencyMs: null, lastCheckedAt: null });
    expect(models.find((m) => m.id === 'old-tts')!.status).toBe('disabled');
  });

  it('is FORBIDDEN to members, even org owners, and needs a session', async () => {
    await expect(alice.caller.models.health()).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(h.callerFor(null).models.health()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('strips userinfo, query and fragment from URLs', () => {
    expect(displayUrl('https://u:p@host.example/v1/?k=1#x')).toBe('https://host.example/v1/');
    expect(displayUrl('http://10.0.0.5:8000')).toBe('http://10.0.0.5:8000');
    expect(displayUrl('local:espeak-ng')).toBe('local:espeak-ng');
    expect(displayUrl('not a url')).toBe('(invalid URL)');
  });
});

describe('models.catalog (any member)', () => {
  it('lists active models, by modality when asked', async () => {
    const all = await alice.caller.models.catalog({});
    expect(all.map((m) => m.id)).not.toContain('old-tts');
    expect((await alice.caller.models.catalog({ modality: 'tts' })).map((m) => m.id)).toEqual(['local-espeak', 'local-flite']);
    const stt = await alice.caller.models.catalog({ modality: 'stt' });
    expect(stt).toEqual([expect.objectContaining({ id: 'local-stt', modality: 'stt' })]);
  });

  it('rejects an unknown modality and needs a session', async () => {
    await expect(alice.caller.models.catalog({ modality: 'video' } as never)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(h.callerFor(null).models.catalog({})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
