// POST /access-token (Cartesia's access tokens, docs.cartesia.ai/api-reference/auth/access-token)
// and the routes that take them, over real HTTP and real sockets: real gateway runtime, a
// throw-away SQLite or PostgreSQL database, the local flite and pocketsphinx engines. The
// gateway's clock is a manual one: a token's expiry is reached by moving it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { openApiResponseChecker } from '../../test/support/openapi-responses.ts';
import { STT_PRICE, openSession, refusedUpgrade, settleRecognizers } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, FOX, bytesOf, codePoints, costOf, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { openTtsSocket, refusedTtsUpgrade } from '../../test/support/tts-socket.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const clock = manualClock(Date.parse('2026-12-05T12:00:00Z'));
let h: GatewayHarness;
let checker: ReturnType<typeof openApiResponseChecker>;
let openapi: { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };

beforeAll(async () => {
  h = await startTtsGateway({ clock });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
  openapi = (await (await fetch(`${h.url}/openapi.json`)).json()) as typeof openapi;
  checker = openApiResponseChecker(openapi);
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

async function mint(credential: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${h.url}/access-token`, {
    method: 'POST',
    headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json', 'cartesia-version': '2025-04-16' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  expect(checker.problems({ method: 'POST', path: '/access-token', status: res.status, contentType: res.headers.get('content-type'), json })).toEqual([]);
  return { status: res.status, json };
}

async function token(grants: { tts?: boolean; stt?: boolean }, key = h.key, expiresIn?: number): Promise<string> {
  const minted = await mint(key, { grants, ...(expiresIn === undefined ? {} : { expires_in: expiresIn }) });
  expect(minted.status).toBe(200);
  expect(minted.json).toEqual({ token: expect.stringMatching(/^at_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/) });
  return minted.json.token as string;
}

const errorOf = (body: string) => (JSON.parse(body) as { error: { code: string; message: string } }).error;

describe('POST /access-token', () => {
  it('mints a token with the key; two minted alike differ', async () => {
    const a = await token({ tts: true });
    expect(await token({ tts: true })).not.toBe(a);
  });

  it('ignores the agent grant beside tts or stt, as Cartesia’s examples send it', async () => {
    const { status, json } = await mint(h.key, { grants: { tts: true, stt: true, agent: true } });
    expect(status).toBe(200);
    expect(json.token).toMatch(/^at_/);
  });

  it.each([
    [{}, 'grants'],
    [{ grants: {} }, 'grants'],
    [{ grants: { tts: false, stt: null } }, 'grants'],
    [{ grants: { agent: true } }, 'grants.agent'],
    [{ grants: { tts: true }, expires_in: 0 }, 'expires_in'],
    [{ grants: { tts: true }, expires_in: 3601 }, 'expires_in'],
    [{ grants: { tts: true }, expires_in: 1.5 }, 'expires_in'],
    [{ grants: { tts: 'yes' } }, 'grants.tts'],
    [{ grants: { tts: true }, scope: 'all' }, 'scope'],
  ])('refuses %j with 400 invalid_request naming %s', async (body, param) => {
    const { status, json } = await mint(h.key, body);
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ code: 'invalid_request', param });
  });

  it('is minted with a key only: not with a token, a client secret or nothing', async () => {
    const at = await token({ tts: true });
    const refused = await mint(at, { grants: { tts: true } });
    expect(refused.status).toBe(401);
    expect(refused.json.error).toMatchObject({ code: 'invalid_api_key', message: expect.stringContaining('mint it from your backend with an API key') });
    expect((await mint('ek_abc.def', { grants: { tts: true } })).status).toBe(401);
    const res = await fetch(`${h.url}/access-token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"grants":{"tts":true}}' });
    expect(res.status).toBe(401);
  });
});

describe('a tts token', () => {
  it("opens /tts/websocket with ?access_token= (what a browser has), speaks and bills the minting key's org and key", async () => {
    const at = await token({ tts: true }, h.key, 60);
    const requestId = `access-token-ws-${Date.now()}`;
    const s = await openTtsSocket(h, { query: { access_token: at, cartesia_version: '2025-04-16' }, headers: { 'x-request-id': requestId } });
    s.send({
      context_id: 'c1',
      model_id: 'local-flite',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
      transcript: FOX,
    });
    expect((await s.end('c1')).type).toBe('done');
    expect(s.audio('c1').length).toBeGreaterThan(16000);
    s.ws.close();
    await s.closed;
    await h.settled();
    const debits = await h.testDb.db.prisma.ledgerEntry.findMany({ where: { requestId } });
    expect(debits.map((d) => ({ org: d.orgId, key: d.apiKeyId, micros: -d.amountMicros }))).toEqual([
      { org: h.orgId, key: h.keyId, micros: costOf(codePoints(FOX), FLITE_PRICE) },
    ]);
  });

  it('is taken as a key on POST /tts/bytes and /tts/sse', async () => {
    const at = await token({ tts: true });
    const bytes = await fetch(`${h.url}/tts/bytes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${at}`, 'content-type': 'application/json' },
      body: JSON.stringify(ttsBody()),
    });
    expect(bytes.status).toBe(200);
    expect((await bytesOf(bytes)).subarray(0, 4).toString('ascii')).toBe('RIFF');
    const sse = await fetch(`${h.url}/tts/sse`, {
      method: 'POST',
      headers: { 'x-api-key': at, 'content-type': 'application/json' },
      body: JSON.stringify(ttsBody({ output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 } })),
    });
    expect(sse.status).toBe(200);
    expect(await sse.text()).toContain('"type":"done"');
  });

  it('opens nothing its grant does not: 403 forbidden on the STT socket; not a key on other routes (401)', async () => {
    const at = await token({ tts: true });
    const stt = await refusedUpgrade(h, { model: 'local-stt', encoding: 'pcm_s16le', sample_rate: '16000', access_token: at });
    expect(stt.status).toBe(403);
    expect(errorOf(stt.body)).toMatchObject({ code: 'forbidden', message: expect.stringContaining('no stt grant') });
    const speech = await fetch(`${h.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${at}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'local-flite', input: 'Hi.', voice: 'flite-slt' }),
    });
    expect(speech.status).toBe(401);
  });

  it('is refused once expired (the gateway clock moved past expires_in), altered, or its key revoked', async () => {
    const at = await token({ tts: true }, h.key, 30);
    clock.advance(30_000);
    const expired = await refusedTtsUpgrade(h, { access_token: at });
    expect(expired.status).toBe(401);
    expect(errorOf(expired.body).message).toContain('expired');
    const fresh = await token({ tts: true });
    const altered = `${fresh.slice(0, 10)}${fresh[10] === 'A' ? 'B' : 'A'}${fresh.slice(11)}`;
    expect((await refusedTtsUpgrade(h, { access_token: altered })).status).toBe(401);
    const other = await createApiKey(h.testDb.db.prisma, { orgId: h.orgId, name: 'to revoke' });
    const ofRevoked = await token({ tts: true }, other.key);
    await revokeApiKey(h.testDb.db.prisma, { id: other.id });
    const revoked = await refusedTtsUpgrade(h, { access_token: ofRevoked });
    expect(revoked.status).toBe(401);
    expect(errorOf(revoked.body).code).toBe('api_key_disabled');
  });
});

describe('a missing grant', () => {
  it('is a 403 on each route that takes tokens, which the OpenAPI document names there (and not on POST /access-token, which never answers it)', async () => {
    const [tts, stt] = [await token({ tts: true }), await token({ stt: true })];
    for (const path of ['/tts/bytes', '/tts/sse']) {
      const res = await fetch(`${h.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stt}`, 'content-type': 'application/json' },
        body: JSON.stringify(ttsBody()),
      });
      const json = (await res.json()) as Record<string, unknown>;
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
      expect(checker.problems({ method: 'POST', path, status: 403, contentType: res.headers.get('content-type'), json })).toEqual([]);
      expect(openapi.paths[path]!.post!.responses).toHaveProperty('403');
    }
    const sockets: [string, string][] = [
      ['/tts/websocket', stt],
      ['/stt/websocket', tts],
      ['/stt/turns/websocket', tts],
    ];
    for (const [path, at] of sockets) {
      const refused = await refusedUpgrade(h, { model: 'local-stt', encoding: 'pcm_s16le', sample_rate: '16000', access_token: at }, {}, path);
      expect({ path, status: refused.status }).toEqual({ path, status: 403 });
      const problems = checker.problems({
        method: 'GET',
        path,
        status: 403,
        contentType: refused.headers['content-type'] ?? null,
        json: JSON.parse(refused.body),
      });
      expect(problems).toEqual([]);
      expect(openapi.paths[path]!.get!.responses).toHaveProperty('403');
    }
    expect(openapi.paths['/access-token']!.post!.responses).not.toHaveProperty('403');
  });
});

describe('an stt token', () => {
  it('opens /stt/websocket, and is 403 on the TTS socket', async () => {
    const at = await token({ stt: true });
    const s = await openSession(h, { model: 'local-stt', encoding: 'pcm_s16le', sample_rate: '16000', access_token: at });
    s.command('close');
    expect((await s.closed).code).toBe(1000);
    const tts = await refusedTtsUpgrade(h, { access_token: at });
    expect(tts.status).toBe(403);
    expect(errorOf(tts.body)).toMatchObject({ code: 'forbidden', message: expect.stringContaining('no tts grant') });
  });
});
