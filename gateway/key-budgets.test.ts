// Key budgets and scopes (docs/api-conventions.md, "Key budgets and scopes") through the real
// gateway on the test database (SQLite, and PostgreSQL on the second pass): a key's spend
// limit per UTC day or month reserved against like the org's balance, its model list, its
// expiry. The gateway's time is a manual clock: windows and expiries are reached by moving it.
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createApiKey, type KeyLimitsInput } from '../server/services/keys/create-api-key.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../test/support/manual-clock.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import { audioCost, openSession, refusedUpgrade, s16le, silence, startSttGateway } from '../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf, expectError, post, ttsBody } from '../test/support/tts-routes.ts';
import { checkProtocol } from './upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 60_000 });

// Noon UTC of some day: a day window starts 12 h before and ends 12 h after.
const NOON = Math.floor(A_WINDOW_START / 86_400_000) * 86_400_000 + 12 * 3_600_000;
const clock = manualClock(NOON);
let h: GatewayHarness;
let upstream: ScriptedUpstream;

beforeAll(async () => {
  upstream = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } });
  h = await startSttGateway({ clock });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-espeak',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:espeak-ng', protocol: 'espeak-ng' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'priced-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
    upstream: { url: upstream.baseUrl, protocol: 'openai' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
});

afterAll(async () => {
  await h?.close();
  await upstream?.close();
});

/** A fresh org with plenty of credit and a key on it with `limits`. */
async function account(limits: KeyLimitsInput) {
  const org = await createOrg(h.testDb.db, { name: 'key limits', creditsMicros: 100_000_000n });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k', rateLimitRpm: 100_000, now: new Date(clock.now()), ...limits });
  return { orgId: org.id, keyId: key.id, key: key.key, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' } };
}

const keyRow = (id: string) => h.testDb.db.prisma.apiKey.findUniqueOrThrow({ where: { id } });
const orgRow = (id: string) => h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id } });

/** What the ledger says the key spent (its usage debits), once every session and stream that ended is billed. */
async function ledgerSpend(keyId: string): Promise<bigint> {
  // A socket session bills after its engine has opened (or refused), which can come after the close the client saw.
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
  const rows = await h.testDb.db.prisma.ledgerEntry.findMany({ where: { apiKeyId: keyId, kind: 'usage' }, select: { amountMicros: true } });
  return rows.reduce((sum, r) => sum - r.amountMicros, 0n);
}

/** Reservations are given back when responses and sockets close: wait for the key and its org to hold nothing. */
async function expectNothingHeld(a: { orgId: string; keyId: string }) {
  await expect.poll(async () => (await keyRow(a.keyId)).heldMicros, { timeout: 10_000 }).toBe(0n);
  await expect.poll(async () => (await orgRow(a.orgId)).heldMicros, { timeout: 10_000 }).toBe(0n);
}

const text = (n: number) => 'The quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(n / 45)).slice(0, n);

describe('a spend limit', () => {
  it('20 concurrent syntheses against a limit of 5.5 of them: 5 are served, 15 get 402 key_budget_exceeded; the spend stays within the limit', async () => {
    const cost = costOf(100, FLITE_PRICE);
    expect(cost).toBe(200n);
    const a = await account({ spendLimitMicros: 1_100n, spendWindow: 'day' });
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: a.headers }).then(async (res) => ({ status: res.status, body: await res.text() })),
      ),
    );
    const refused = results.filter((r) => r.status === 402);
    expect(results.filter((r) => r.status === 200)).toHaveLength(5);
    expect(refused).toHaveLength(15);
    for (const r of refused) {
      const error = (JSON.parse(r.body) as { error: Record<string, unknown> }).error;
      expect(error).toMatchObject({ code: 'key_budget_exceeded', type: 'insufficient_quota', param: null });
      expect(error.message).toMatch(/^This API key's spend limit is 0\.001100 USD per day \(UTC\); it has spent 0\.\d{6} USD of it/);
    }
    await expectNothingHeld(a);
    // Within the limit (every reservation was the exact cost: no overshoot at all), and the key's
    // count is the ledger's sum of its debits.
    const spent = await ledgerSpend(a.keyId);
    expect(spent).toBe(5n * cost);
    expect(spent).toBeLessThanOrEqual(1_100n + cost);
    expect(await keyRow(a.keyId)).toMatchObject({ windowSpentMicros: spent, windowStartedAt: new Date(NOON - 12 * 3_600_000) });
    expect((await orgRow(a.orgId)).balanceMicros).toBe(100_000_000n - spent);
    // 100 micro-USD left: enough to be admitted, not for this request's reservation.
    await expectError(await post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: a.headers }), {
      status: 402,
      code: 'key_budget_exceeded',
      param: null,
      type: 'insufficient_quota',
    });
  });

  it("with nothing left the key is refused at admission on every metered route; the next UTC day it is whole again; the org's other keys were never limited", async () => {
    const a = await account({ spendLimitMicros: 400n, spendWindow: 'day' });
    const other = await createApiKey(h.testDb.db.prisma, { orgId: a.orgId, name: 'unlimited', rateLimitRpm: 100_000 });
    for (let i = 0; i < 2; i++) expect((await post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: a.headers })).status).toBe(200);
    const refused = await expectError(await post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: a.headers }), {
      status: 402,
      code: 'key_budget_exceeded',
      param: null,
    });
    expect(refused.message).toContain('it has spent 0.000400 USD of it.');
    expect(refused.message).toContain(`The limit resets at ${new Date(NOON + 12 * 3_600_000).toISOString()}.`);
    // A metered route that reserves nothing (the voice list) is refused as well; an unmetered one is not.
    await expectError(await fetch(`${h.url}/voices`, { headers: a.headers }), { status: 402, code: 'key_budget_exceeded', param: null });
    expect((await fetch(`${h.url}/v1/models`, { headers: a.headers })).status).toBe(200);
    expect((await post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: { authorization: `Bearer ${other.key}` } })).status).toBe(200);

    clock.advance(12 * 3_600_000);
    try {
      expect((await post(h, '/tts/bytes', ttsBody({ transcript: text(100) }), { headers: a.headers })).status).toBe(200);
      await h.settled();
      expect(await keyRow(a.keyId)).toMatchObject({ windowSpentMicros: 200n, windowStartedAt: new Date(NOON + 12 * 3_600_000) });
    } finally {
      clock.set(NOON);
    }
  });

  it('a streaming session whose next second the limit cannot cover ends with 1008 key_budget_exceeded, having spent at most the limit', async () => {
    // The first second is reserved at the upgrade; the limit covers one more.
    const a = await account({ spendLimitMicros: audioCost(2_000), spendWindow: 'month' });
    const session = await openSession(h, { model: 'local-stt', api_key: a.key });
    onTestFinished(() => session.ws.terminate());
    await session.until((e) => e.type === 'session.started');
    void session.stream(s16le(silence(4)), { frameBytes: 3_200, intervalMs: 0 });
    const { code, reason } = await session.closed;
    expect({ code, reason }).toEqual({ code: 1008, reason: 'key_budget_exceeded' });
    expect(session.ofType('error')[0]).toMatchObject({ code: 'key_budget_exceeded' });
    await expectNothingHeld(a);
    expect(await ledgerSpend(a.keyId)).toBe(audioCost(2_000));
  });
});

describe('a model list', () => {
  it('only its models: 403 model_not_allowed on chat, TTS, the STT socket and realtime, before any engine work or credit; /v1/models lists only them', async () => {
    const a = await account({ models: ['local-flite'] });
    expect((await post(h, '/tts/bytes', ttsBody(), { headers: a.headers })).status).toBe(200);
    const tts = await expectError(
      await post(h, '/tts/bytes', ttsBody({ model_id: 'local-espeak', voice: { mode: 'id', id: 'espeak-en-us-f' } }), { headers: a.headers }),
      {
        status: 403,
        code: 'model_not_allowed',
        param: 'model_id',
        type: 'invalid_request_error',
      },
    );
    expect(tts.message).toBe("This API key may not use the model 'local-espeak'; it may use: local-flite.");
    const before = upstream.received.length;
    await expectError(await post(h, '/v1/chat/completions', { model: 'priced-llm', messages: [{ role: 'user', content: 'Hi' }] }, { headers: a.headers }), {
      status: 403,
      code: 'model_not_allowed',
      param: 'model',
    });
    expect(upstream.received.length).toBe(before);
    const stt = await refusedUpgrade(h, { model: 'local-stt', api_key: a.key });
    expect(stt.status).toBe(403);
    expect(JSON.parse(stt.body).error).toMatchObject({ code: 'model_not_allowed', param: 'model' });
    const realtime = await refusedUpgrade(h, { model: 'chat-model' }, { authorization: `Bearer ${a.key}` }, '/v1/realtime');
    expect(realtime.status).toBe(403);
    expect(JSON.parse(realtime.body).error).toMatchObject({ code: 'model_not_allowed', message: expect.stringContaining("'chat-model'") });
    const models = (await (await fetch(`${h.url}/v1/models`, { headers: a.headers })).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['local-flite']);
    await h.settled();
    expect((await orgRow(a.orgId)).balanceMicros).toBe(100_000_000n - costOf(44, FLITE_PRICE));
    await expectNothingHeld(a);
  });

  it('realtime needs every model its session runs: the LLM alone is not enough without the stt model', async () => {
    const a = await account({ models: ['chat-model'] });
    const refused = await refusedUpgrade(h, { model: 'chat-model' }, { authorization: `Bearer ${a.key}` }, '/v1/realtime');
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error).toMatchObject({ code: 'model_not_allowed', message: expect.stringContaining("'local-stt'") });
  });
});

describe('an expiry', () => {
  it('a session open when its key expires is ended with api_key_expired at the expiry; the key is then refused with 401 api_key_expired', async () => {
    const expiresAt = clock.now() + 1_000;
    const a = await account({ expiresAt: new Date(expiresAt) });
    expect((await post(h, '/tts/bytes', ttsBody(), { headers: a.headers })).status).toBe(200);
    const session = await openSession(h, { model: 'local-stt', api_key: a.key });
    onTestFinished(() => session.ws.terminate());
    await session.until((e) => e.type === 'session.started');
    clock.advance(1_000);
    try {
      const { code, reason } = await session.closed;
      expect({ code, reason }).toEqual({ code: 1008, reason: 'api_key_expired' });
      expect(session.ofType('error')[0]).toMatchObject({ code: 'api_key_expired' });
      const refused = await expectError(await post(h, '/tts/bytes', ttsBody(), { headers: a.headers }), {
        status: 401,
        code: 'api_key_expired',
        param: null,
        type: 'invalid_request_error',
      });
      expect(refused.message).toBe(`This API key expired at ${new Date(expiresAt).toISOString()}. Create a new key in the dashboard.`);
      const upgrade = await refusedUpgrade(h, { model: 'local-stt', api_key: a.key });
      expect(upgrade.status).toBe(401);
      expect(JSON.parse(upgrade.body).error).toMatchObject({ code: 'api_key_expired' });
      await expectNothingHeld(a);
    } finally {
      clock.set(NOON);
    }
  });
});
