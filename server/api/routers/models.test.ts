import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../services/models/list-model-health.ts';
import { seedRegistry } from '../../services/models/seed-registry.ts';
import { upsertModel } from '../../services/models/upsert-model.ts';
import { DASHBOARD_KEY_NAME } from '../../services/keys/get-dashboard-key.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';
import { startGateway, type GatewayHarness } from '../../../test/support/gateway-harness.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../../test/support/scripted-cartesia.ts';

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
  await h.db.prisma.upstream.updateMany({
    where: { modelId: 'remote-llm' },
    data: { health: 'down', latencyMs: 1234, lastError: 'connect ECONNREFUSED', lastCheckedAt: checkedAt },
  });
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
      expect.objectContaining({
        url: 'https://llm.internal:8443/v1',
        protocol: 'openai',
        apiKeyEnv: 'REMOTE_LLM_KEY',
        weight: 3,
        health: 'down',
        latencyMs: 1234,
        lastError: 'connect ECONNREFUSED',
        lastCheckedAt: checkedAt.toISOString(),
      }),
    ]);
    expect(JSON.stringify(models)).not.toContain('abc123');
    expect(models.find((m) => m.id === 'local-flite')!.upstreams[0]).toMatchObject({
      url: 'local:flite',
      health: 'unknown',
      latencyMs: null,
      lastCheckedAt: null,
    });
    expect(models.find((m) => m.id === 'old-tts')!.status).toBe('disabled');
    // No bundled engine lists its voices: the page offers no import that could only fail.
    expect(models.filter((m) => m.listsVoices).map((m) => m.id)).toEqual([]);
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

describe('models.importVoices (platform admins, through the gateway)', () => {
  let peer: ScriptedCartesia;
  let g: GatewayHarness;
  let api: ApiHarness;
  let gAdmin: TestUser;
  let gMember: TestUser;
  const KEY_ENV = 'MODELS_ROUTER_TEST_CARTESIA_KEY';

  beforeAll(async () => {
    peer = await startScriptedCartesia({
      voices: [
        { id: 'cv-ava', name: 'Ava', description: 'Warm and clear.', language: 'en', gender: 'feminine' },
        { id: 'cv-lars', name: 'Lars', description: 'Calm narrator.', language: 'de', gender: 'masculine' },
      ],
    });
    process.env[KEY_ENV] = peer.apiKey;
    // The dashboard and the gateway share one database, as they do in production.
    g = await startGateway();
    api = await createApiHarness({ database: g.testDb, gatewayUrl: g.url });
    const prisma = g.testDb.db.prisma;
    await upsertModel(prisma, checkProtocol, {
      id: 'cartesia-tts',
      modality: 'tts',
      upstream: { url: peer.url, protocol: 'cartesia', upstreamModel: 'sonic-2', apiKeyEnv: KEY_ENV },
    });
    await upsertModel(prisma, checkProtocol, { id: 'local-flite', modality: 'tts', upstream: { url: 'local:flite', protocol: 'flite' } });
    // The first account is the platform admin; its org has no credit (reading a catalogue is not metered).
    gAdmin = await api.signUpUser('admin@example.com');
    gMember = await api.signUpUser('member@example.com');
  });
  afterAll(async () => {
    delete process.env[KEY_ENV];
    await g?.close();
    await peer?.close();
  });

  it("imports the engine's catalogue, read through the gateway with the org's dashboard key, as platform voices with ready profiles; again, updates them", async () => {
    const prisma = g.testDb.db.prisma;
    // The Models page offers the import for the Cartesia model only.
    const health = await gAdmin.caller.models.health();
    expect(health.filter((m) => m.listsVoices).map((m) => m.id)).toEqual(['cartesia-tts']);
    expect(health.find((m) => m.id === 'local-flite')?.listsVoices).toBe(false);
    expect(await gAdmin.caller.models.importVoices({ modelId: 'cartesia-tts' })).toEqual({ listed: 2, created: 2, updated: 0 });
    const profiles = await prisma.voiceProfile.findMany({ where: { modelId: 'cartesia-tts' }, include: { voice: true }, orderBy: { upstreamId: 'asc' } });
    expect(profiles.map((p) => [p.upstreamId, p.status, p.voice.orgId, p.voice.name, p.voice.language, p.voice.gender])).toEqual([
      ['cv-ava', 'ready', null, 'Ava', 'en', 'female'],
      ['cv-lars', 'ready', null, 'Lars', 'de', 'male'],
    ]);
    // The engine was asked with our key, by the gateway, called with the admin's org's dashboard key.
    expect(peer.received.some((r) => r.path === '/voices' && r.headers.authorization === `Bearer ${peer.apiKey}`)).toBe(true);
    expect(await prisma.apiKey.count({ where: { orgId: gAdmin.orgId, name: DASHBOARD_KEY_NAME, status: 'active' } })).toBe(1);
    peer.voices[0]!.name = 'Ava 2';
    expect(await gAdmin.caller.models.importVoices({ modelId: 'cartesia-tts' })).toEqual({ listed: 2, created: 0, updated: 2 });
    expect(
      (await prisma.voiceProfile.findFirstOrThrow({ where: { modelId: 'cartesia-tts', upstreamId: 'cv-ava' }, include: { voice: true } })).voice.name,
    ).toBe('Ava 2');
  });

  it("the gateway's refusals are the procedure's: a model whose engine lists no voices is BAD_REQUEST, an unknown one NOT_FOUND; members are FORBIDDEN", async () => {
    await expect(gAdmin.caller.models.importVoices({ modelId: 'local-flite' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('svc voices map'),
    });
    await expect(gAdmin.caller.models.importVoices({ modelId: 'no-such-model' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(gMember.caller.models.importVoices({ modelId: 'cartesia-tts' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });

  it('a gateway that does not answer is BAD_GATEWAY, saying so', async () => {
    const down = await createApiHarness({ database: g.testDb, gatewayUrl: 'http://127.0.0.1:1' });
    await expect(down.callerFor(gAdmin.user).models.importVoices({ modelId: 'cartesia-tts' })).rejects.toMatchObject({
      code: 'BAD_GATEWAY',
      message: expect.stringContaining('The gateway did not answer'),
    });
  });
});
