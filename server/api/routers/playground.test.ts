// The playground's procedures against a real gateway (test/support/tts-routes.ts: flite) and a
// scripted OpenAI-compatible LLM: an access token minted through the gateway with the org's
// dashboard key that opens /tts/websocket, and the cost of a request read back by its id.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkProtocol } from '../../../gateway/upstreams/protocols/index.ts';
import type { GatewayHarness } from '../../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../../test/support/scripted-openai-upstream.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, startTtsGateway, ttsBody, usd } from '../../../test/support/tts-routes.ts';
import { openTtsSocket } from '../../../test/support/tts-socket.ts';
import { loadConfig } from '../../config/env.ts';
import { REQUEST_CHARGE_WINDOW_MS, getRequestCharge } from '../../services/credits/get-request-charge.ts';
import { grantCredits } from '../../services/credits/grant-credits.ts';
import { DASHBOARD_KEY_NAME, getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { upsertModel } from '../../services/models/upsert-model.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';
import { SPEECH_TOKEN_SECONDS } from './playground.ts';

let g: GatewayHarness;
let api: ApiHarness;
let user: TestUser;
let other: TestUser;
let llm: ScriptedUpstream;

beforeAll(async () => {
  g = await startTtsGateway();
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['Hello ', 'there.'], usage: { prompt_tokens: 30, completion_tokens: 7 } });
  await upsertModel(g.testDb.db.prisma, checkProtocol, {
    id: 'chat-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 3_000_000n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  await g.runtime.ctx.registry.refresh();
  api = await createApiHarness({ database: g.testDb, gatewayUrl: g.url });
  user = await api.signUpUser('player@example.com');
  other = await api.signUpUser('other-player@example.com');
  await grantCredits(g.testDb.db, { orgId: user.orgId, amountMicros: 5_000_000n });
}, 60_000);
afterAll(async () => {
  await llm?.close();
  await g?.close();
});

/** A request through the gateway with the org's dashboard key (what the playground's proxy sends), with our own request id. */
async function asDashboard(orgId: string, path: string, body: unknown, requestId: string): Promise<Response> {
  const key = await getOrCreateDashboardKey(g.testDb.db, orgId);
  return fetch(`${g.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify(body),
  });
}

describe('playground.speechToken', () => {
  it("mints a 60 s tts token through the gateway with the org's dashboard key, never a key, and names the socket's public URL", async () => {
    const before = Math.floor(Date.now() / 1000);
    const minted = await user.caller.playground.speechToken();
    const after = Math.floor(Date.now() / 1000);
    expect(minted.websocketUrl).toBe(`${loadConfig().publicBaseUrl.replace(/^http/, 'ws')}/tts/websocket`);
    expect(minted.expiresInSeconds).toBe(SPEECH_TOKEN_SECONDS);
    expect(JSON.stringify(minted)).not.toMatch(/sk_svc_/);
    const payload = JSON.parse(Buffer.from(minted.token.slice(3).split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const dashboardKey = await g.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: user.orgId, name: DASHBOARD_KEY_NAME } });
    expect(payload).toMatchObject({ o: user.orgId, k: dashboardKey.hash, s: { grants: { tts: true, stt: false } } });
    expect(payload.e).toBeGreaterThanOrEqual(before + SPEECH_TOKEN_SECONDS);
    expect(payload.e).toBeLessThanOrEqual(after + SPEECH_TOKEN_SECONDS);
  });

  it("opens /tts/websocket with the token alone, and the speech is billed to the org's dashboard key", async () => {
    const { token } = await user.caller.playground.speechToken();
    const requestId = `playground-ws-${Date.now()}`;
    const s = await openTtsSocket(g, { query: { access_token: token }, headers: { 'x-request-id': requestId } });
    s.send({
      context_id: 'c',
      model_id: 'local-flite',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_f32le', sample_rate: 24000 },
      transcript: FOX,
    });
    expect((await s.end('c')).type).toBe('done');
    s.ws.close();
    await s.closed;
    await g.settled();
    const charge = await user.caller.playground.charge({ requestId });
    expect(charge).toMatchObject({ costUsd: usd(costOf(codePoints(FOX), FLITE_PRICE)), inputTokens: 0, outputTokens: 0 });
    const debit = await g.testDb.db.prisma.ledgerEntry.findFirstOrThrow({ where: { requestId } });
    const dashboardKey = await g.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: user.orgId, name: DASHBOARD_KEY_NAME } });
    expect(debit.apiKeyId).toBe(dashboardKey.id);
  });

  it("is refused as the gateway refuses it: an org without credit gets the gateway's 402 when it opens the socket", async () => {
    const { token } = await other.caller.playground.speechToken();
    await expect(openTtsSocket(g, { query: { access_token: token } })).rejects.toThrow('upgrade refused: 402');
  });
});

describe('playground.charge', () => {
  it("reads a streamed chat answer's tokens and cost by its request id, as the ledger holds them", async () => {
    const requestId = `playground-chat-${Date.now()}`;
    const res = await asDashboard(
      user.orgId,
      '/v1/chat/completions',
      { model: 'chat-llm', messages: [{ role: 'user', content: 'Hi' }], stream: true },
      requestId,
    );
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('data: [DONE]');
    await g.settled();
    const charge = await user.caller.playground.charge({ requestId });
    // 30 tokens in at 1 µ$, 7 out at 3 µ$.
    expect(charge).toEqual({ costUsd: '0.000051', remainingUsd: expect.stringMatching(/^4\.9\d{5}$/), inputTokens: 30, outputTokens: 7 });
  });

  it("a synthesis: the cost and the balance its answer's headers carried", async () => {
    const requestId = `playground-tts-${Date.now()}`;
    const res = await asDashboard(user.orgId, '/tts/bytes', ttsBody(), requestId);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await g.settled();
    const charge = await user.caller.playground.charge({ requestId });
    expect(charge?.costUsd).toBe(res.headers.get('x-svc-request-cost-usd'));
    expect(charge?.remainingUsd).toBe(res.headers.get('x-svc-credits-remaining-usd'));
  });

  it("reads only the org's recent debits (a range of its ledger's (orgId, createdAt) index, not a scan of every org's ledger per poll): an older request is null", async () => {
    const requestId = `playground-recent-${Date.now()}`;
    const res = await asDashboard(user.orgId, '/tts/bytes', ttsBody(), requestId);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await g.settled();
    const { createdAt } = await g.testDb.db.prisma.ledgerEntry.findFirstOrThrow({ where: { requestId } });
    const at = (ms: number) => getRequestCharge(g.testDb.db.prisma, { orgId: user.orgId, requestId, now: createdAt.getTime() + ms });
    expect((await at(REQUEST_CHARGE_WINDOW_MS))?.costMicros).toBeGreaterThan(0n);
    expect(await at(REQUEST_CHARGE_WINDOW_MS + 1)).toBeNull();
  });

  it("is null for an id with no debit yet, and for another org's request", async () => {
    expect(await user.caller.playground.charge({ requestId: 'req_unknown' })).toBeNull();
    const requestId = `playground-private-${Date.now()}`;
    await grantCredits(g.testDb.db, { orgId: other.orgId, amountMicros: 1_000_000n });
    const res = await asDashboard(other.orgId, '/tts/bytes', ttsBody(), requestId);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await g.settled();
    expect(await other.caller.playground.charge({ requestId })).not.toBeNull();
    expect(await user.caller.playground.charge({ requestId })).toBeNull();
    await expect(user.caller.playground.charge({ requestId: '' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});
