// The gateway counts each upstream call and failure (for the dashboard's error rate): two good
// answers and one engine error through the real chat route give 3 calls, 1 error.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { listModelHealth } from '../../server/services/models/list-model-health.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { checkProtocol } from './protocols/index.ts';

let h: GatewayHarness;
let up: ScriptedUpstream;

beforeAll(async () => {
  h = await startGateway();
  up = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 2 } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, { id: 'counted', modality: 'llm', prices: {}, upstream: { url: up.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
});
afterAll(async () => {
  await h?.close();
  await up?.close();
});

it('counts calls and engine failures per upstream and stores them', async () => {
  const chat = () =>
    fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: 'counted', messages: [{ role: 'user', content: 'hi' }] }),
    });
  expect((await chat()).status).toBe(200);
  expect((await chat()).status).toBe(200);
  up.behaviour = { kind: 'error', status: 500, body: { error: { message: 'boom' } } };
  expect((await chat()).status).toBe(502);
  await h.runtime.ctx.upstreamStats!.flush();
  const model = (await listModelHealth(h.testDb.db.prisma)).find((m) => m.id === 'counted')!;
  expect(model.upstreams[0]).toMatchObject({ recentRequests: 3, recentErrors: 1, errorRate: 1 / 3 });
});
