// GET /health and GET /ready over real HTTP against the real gateway (SQLite, or PostgreSQL with
// TEST_DB=postgresql). Both answer without a key, so /ready shows an upstream by its host alone:
// not what an operator may have put in its URL (userinfo, a token in the query or fragment), nor
// its port or path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'tokened-llm',
    modality: 'llm',
    prices: {},
    upstream: { url: 'http://127.0.0.1:9/v1?token=tok_secret&x=1#frag_secret', protocol: 'openai' },
  });
  // Credentials in the URL are refused by upsert today; a row may hold them from before.
  await upsertModel(prisma, checkProtocol, { id: 'old-llm', modality: 'llm', prices: {}, upstream: { url: 'http://127.0.0.1:10/v1', protocol: 'openai' } });
  await prisma.upstream.updateMany({ where: { modelId: 'old-llm' }, data: { url: 'http://agent:hunter2@127.0.0.1:10/v1' } });
  await upsertModel(prisma, checkProtocol, { id: 'local-tts', modality: 'tts', prices: {}, upstream: { url: 'local:flite', protocol: 'flite' } });
  await h.runtime.ctx.registry.refresh();
});
afterAll(async () => {
  await h?.close();
});

describe('GET /ready', () => {
  it('shows each upstream by its host only: no userinfo, port, path, query or fragment', async () => {
    const res = await fetch(`${h.url}/ready`);
    const text = await res.text();
    expect(res.status).toBe(200);
    for (const secret of ['hunter2', 'agent', 'tok_secret', 'token=', 'frag_secret']) expect(text).not.toContain(secret);
    for (const detail of [':9', ':10', '/v1', 'http:']) expect(text).not.toContain(detail);
    const body = JSON.parse(text) as { status: string; database: string; models: { id: string; upstreams: { host: string; health: string }[] }[] };
    expect(body).toMatchObject({ status: 'ok', database: 'ok' });
    for (const upstream of body.models.flatMap((m) => m.upstreams)) expect(Object.keys(upstream).sort()).toEqual(['circuit', 'health', 'host']);
    const upstreams = Object.fromEntries(body.models.map((m) => [m.id, m.upstreams.map((u) => u.host)]));
    expect(upstreams['tokened-llm']).toEqual(['127.0.0.1']);
    expect(upstreams['old-llm']).toEqual(['127.0.0.1']);
    expect(upstreams['local-tts']).toEqual(['local:flite']);
  });
});

describe('GET /health', () => {
  it('answers without a key', async () => {
    const res = await fetch(`${h.url}/health`);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { status: 'ok' } });
  });
});
