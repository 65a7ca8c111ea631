// Errors to clients name no engine address: an engine at 127.0.0.1:1 (nothing listens there)
// is refused as 502 upstream_unavailable, then 503 model_offline once marked down and once a
// health check has failed, and none of those messages says where the engine is. The gateway's
// log keeps the address (the engine's failure is the error's cause).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../test/support/gateway-harness.ts';
import { checkProtocol } from './upstreams/protocols/index.ts';

const UNREACHABLE = 'http://127.0.0.1:1/v1';
let h: GatewayHarness;

beforeAll(async () => {
  h = await startGateway({ env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, { id: 'far-llm', modality: 'llm', prices: {}, upstream: { url: UNREACHABLE, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
});
afterAll(async () => {
  await h?.close();
});

async function chat(): Promise<{ status: number; code: string; message: string }> {
  const res = await fetch(`${h.url}/v1/chat/completions`, { method: 'POST', headers: h.headers, body: JSON.stringify({ model: 'far-llm', messages: [] }) });
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: body.error.code, message: body.error.message };
}

function expectNoAddress(message: string): void {
  expect(message).not.toContain('127.0.0.1');
  expect(message).not.toMatch(/:1\b/);
}

describe('an engine at 127.0.0.1:1', () => {
  it('502 upstream_unavailable says the connection was refused, not where', async () => {
    const answer = await chat();
    expect(answer).toMatchObject({ status: 502, code: 'upstream_unavailable' });
    expect(answer.message).toBe('The model upstream is unreachable (connect ECONNREFUSED [address]); retry with backoff.');
  });

  it('503 model_offline, once marked down by that request and once a health check failed, names no address either', async () => {
    const marked = await chat();
    expect(marked).toMatchObject({ status: 503, code: 'model_offline' });
    expect(marked.message).toContain('far-llm');
    expect(marked.message).toContain('[address]');
    expectNoAddress(marked.message);
    await h.runtime.ctx.health.checkAll();
    const checked = await chat();
    expect(checked).toMatchObject({ status: 503, code: 'model_offline' });
    expect(checked.message).toMatch(/Last health check: .+/);
    expectNoAddress(checked.message);
  });
});
