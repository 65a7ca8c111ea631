// Every way a client may present its API key (docs/api-conventions.md, "Keys and authentication"), on a real
// gateway over real HTTP and WebSocket: `Authorization: Bearer` / `Token`, `X-API-Key`, and on
// WebSocket upgrades `?api_key=`, `?access_token=` and the `openai-insecure-api-key.<key>`
// subprotocol. Each is accepted on an HTTP route (GET /v1/models) and on GET /stt/websocket,
// answers the same 401s (missing, malformed, unknown, revoked), and two different keys are
// refused. The subprotocol the handshake selects is checked with a browser's WebSocket (Node's
// global one) as well as `ws`. Last, a real `svc gateway` process logs URLs with the key redacted.
import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { settleRecognizers, startSttGateway, wsUrl } from '../../test/support/stt-routes.ts';
import { startSvcGateway, stopSvc, type SvcProcess } from '../../test/support/svc-process.ts';

let h: GatewayHarness;
const keys = { revoked: '', other: '' };
/** Well formed, in no database. */
const UNKNOWN = `sk_svc_${'A'.repeat(43)}`;
const MALFORMED = 'sk_svc_short';
const KEY_PROTOCOL = 'openai-insecure-api-key.';

beforeAll(async () => {
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  const revoked = await createApiKey(prisma, { orgId: h.orgId, name: 'revoked' });
  await revokeApiKey(prisma, { id: revoked.id });
  keys.revoked = revoked.key;
  keys.other = (await createApiKey(prisma, { orgId: h.orgId, name: 'another key of the org' })).key;
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

interface ErrorEnvelope {
  error: { message: string; type: string; code: string; param: string | null };
}

/** How a transport carries a key on a request: headers, query parameters, subprotocols. */
interface Carried {
  headers?: Record<string, string>;
  query?: Record<string, string>;
  protocols?: string[];
}

const HEADER_TRANSPORTS: Record<string, (key: string) => Carried> = {
  'Authorization: Bearer': (key) => ({ headers: { authorization: `Bearer ${key}` } }),
  'Authorization: Token': (key) => ({ headers: { authorization: `Token ${key}` } }),
  'X-API-Key': (key) => ({ headers: { 'x-api-key': key } }),
};

const UPGRADE_TRANSPORTS: Record<string, (key: string) => Carried> = {
  ...HEADER_TRANSPORTS,
  '?api_key=': (key) => ({ query: { api_key: key } }),
  '?access_token=': (key) => ({ query: { access_token: key } }),
  'openai-insecure-api-key subprotocol': (key) => ({ protocols: ['realtime', `${KEY_PROTOCOL}${key}`] }),
};

function getModels(carried: Carried): Promise<Response> {
  const query = new URLSearchParams(carried.query).toString();
  return fetch(`${h.url}/v1/models${query ? `?${query}` : ''}`, { headers: carried.headers });
}

async function expect401(res: Response | { status: number; body: string }, code: 'invalid_api_key' | 'api_key_disabled'): Promise<string> {
  const text = 'text' in res ? await res.text() : res.body;
  expect(res.status, text).toBe(401);
  const body = JSON.parse(text) as ErrorEnvelope;
  expect(body.error).toMatchObject({ code, type: 'invalid_request_error', param: null });
  return body.error.message;
}

type Upgrade = { opened: true; ws: WebSocket; protocol: string; firstEvent: Record<string, unknown> } | { opened: false; status: number; body: string };

/** Opens GET /stt/websocket with the key carried as given; an accepted session is read up to its first event. */
function upgrade(carried: Carried, query: Record<string, string> = { model: 'local-stt' }): Promise<Upgrade> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(h, { ...query, ...carried.query }), carried.protocols ?? [], { headers: carried.headers });
    ws.once('message', (data) => resolve({ opened: true, ws, protocol: ws.protocol, firstEvent: JSON.parse(data.toString()) as Record<string, unknown> }));
    ws.once('unexpected-response', (req, res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        req.destroy(); // with this listener, ws leaves the request to us
        resolve({ opened: false, status: res.statusCode ?? 0, body });
      });
    });
    ws.once('error', reject);
  });
}

/**
 * A WebSocket handshake read as it comes (no client's checks): the status and the subprotocol the
 * 101 names. The socket is closed at once.
 */
function rawUpgrade(protocols: string[]): Promise<{ status: number; protocol: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(wsUrl(h, { model: 'local-stt' }).replace(/^ws/, 'http'), {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        'sec-websocket-protocol': protocols.join(', '),
      },
    });
    req.once('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, protocol: res.headers['sec-websocket-protocol'] });
    });
    req.once('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, protocol: undefined });
    });
    req.once('error', reject);
    req.end();
  });
}

/** Sends close and waits for the session's clean end (1000). */
async function closeSession(ws: WebSocket): Promise<void> {
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  ws.send(JSON.stringify({ type: 'close' }));
  expect(await closed).toBe(1000);
}

async function expectOpened(carried: Carried): Promise<Extract<Upgrade, { opened: true }>> {
  const u = await upgrade(carried);
  if (!u.opened) throw new Error(`upgrade refused: ${u.status} ${u.body}`);
  expect(u.firstEvent).toMatchObject({ type: 'session.started', model: 'local-stt' });
  await closeSession(u.ws);
  return u;
}

async function expectRefused(carried: Carried, code: 'invalid_api_key' | 'api_key_disabled'): Promise<string> {
  const u = await upgrade(carried);
  if (u.opened) {
    u.ws.terminate();
    throw new Error('the upgrade was accepted');
  }
  return expect401(u, code);
}

// ---------------------------------------------------------------------------------------

describe('HTTP route (GET /v1/models)', () => {
  it.each(Object.keys(HEADER_TRANSPORTS))('%s: the key is accepted', async (name) => {
    const res = await getModels(HEADER_TRANSPORTS[name]!(h.key));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { object: string }).object).toBe('list');
  });

  it.each(Object.keys(HEADER_TRANSPORTS))('%s: malformed and unknown keys are invalid_api_key, a revoked one api_key_disabled', async (name) => {
    const carry = HEADER_TRANSPORTS[name]!;
    expect(await expect401(await getModels(carry(MALFORMED)), 'invalid_api_key')).toMatch(/^Incorrect API key provided/);
    expect(await expect401(await getModels(carry(UNKNOWN)), 'invalid_api_key')).toMatch(/^Incorrect API key provided: sk_svc_AAAA\*{8}AAAA\.$/);
    expect(await expect401(await getModels(carry(keys.revoked)), 'api_key_disabled')).toBe('This API key has been disabled.');
  });

  it.each([
    ['no key at all', {}],
    ['"Bearer" alone', { headers: { authorization: 'Bearer' } }],
    ['"Token" alone', { headers: { authorization: 'Token ' } }],
    ['an empty X-API-Key', { headers: { 'x-api-key': '' } }],
    ['the key in ?api_key= (an upgrade-only way)', { query: { api_key: 'KEY' } }],
    ['the key in ?access_token= (an upgrade-only way)', { query: { access_token: 'KEY' } }],
  ] as [string, Carried][])('%s: 401 naming the header ways only', async (_name, carried) => {
    const query = carried.query ? Object.fromEntries(Object.entries(carried.query).map(([k]) => [k, h.key])) : undefined;
    const message = await expect401(await getModels({ ...carried, query }), 'invalid_api_key');
    expect(message).toBe(
      'You did not provide an API key. Pass it in the Authorization header ("Bearer sk_svc_..." or "Token sk_svc_...") or the X-API-Key header.',
    );
  });

  it('two different keys (Authorization and X-API-Key) are refused, the same key twice is not', async () => {
    const message = await expect401(await getModels({ headers: { authorization: `Bearer ${h.key}`, 'x-api-key': keys.other } }), 'invalid_api_key');
    expect(message).toBe(
      'Two different API keys were sent, in the Authorization header and in the X-API-Key header; send one key (it may be repeated, but not differ).',
    );
    expect(message).not.toContain('sk_svc_');
    expect((await getModels({ headers: { authorization: `Token ${h.key}`, 'x-api-key': h.key } })).status).toBe(200);
  });
});

describe('WebSocket route (GET /stt/websocket)', () => {
  it.each(Object.keys(UPGRADE_TRANSPORTS))('%s: the key is accepted and the session runs', async (name) => {
    await expectOpened(UPGRADE_TRANSPORTS[name]!(h.key));
  });

  it.each(Object.keys(UPGRADE_TRANSPORTS))('%s: malformed, unknown and revoked keys are refused before the upgrade', async (name) => {
    const carry = UPGRADE_TRANSPORTS[name]!;
    expect(await expectRefused(carry(MALFORMED), 'invalid_api_key')).toMatch(/^Incorrect API key provided/);
    expect(await expectRefused(carry(UNKNOWN), 'invalid_api_key')).toMatch(/^Incorrect API key provided/);
    expect(await expectRefused(carry(keys.revoked), 'api_key_disabled')).toBe('This API key has been disabled.');
  });

  it('no key: 401 naming every way an upgrade takes one (an empty query value or key subprotocol is no key)', async () => {
    const expected =
      'You did not provide an API key. Pass it in the Authorization header ("Bearer sk_svc_..." or "Token sk_svc_..."), the X-API-Key header, the api_key or access_token query parameter, or the WebSocket subprotocol "openai-insecure-api-key.sk_svc_...".';
    expect(await expectRefused({}, 'invalid_api_key')).toBe(expected);
    expect(await expectRefused({ query: { api_key: '', access_token: '' } }, 'invalid_api_key')).toBe(expected);
    expect(await expectRefused({ protocols: ['realtime', KEY_PROTOCOL] }, 'invalid_api_key')).toBe(expected);
  });

  it.each([
    [
      'Authorization and ?api_key=',
      () => ({ headers: { authorization: `Bearer ${h.key}` }, query: { api_key: keys.other } }),
      'in the Authorization header and in the api_key query parameter',
    ],
    [
      '?api_key= and ?access_token=',
      () => ({ query: { api_key: h.key, access_token: keys.other } }),
      'in the api_key query parameter and in the access_token query parameter',
    ],
    [
      'X-API-Key and the subprotocol',
      () => ({ headers: { 'x-api-key': h.key }, protocols: ['realtime', `${KEY_PROTOCOL}${keys.other}`] }),
      'in the X-API-Key header and in the openai-insecure-api-key.… subprotocol',
    ],
  ] as [string, () => Carried, string][])('two different keys (%s) are refused, naming where they came from', async (_name, carried, where) => {
    const message = await expectRefused(carried(), 'invalid_api_key');
    expect(message).toContain(where);
    expect(message).not.toContain('sk_svc_');
  });

  it('the same key in several places is one key: the session opens', async () => {
    await expectOpened({
      headers: { authorization: `Token ${h.key}`, 'x-api-key': h.key },
      query: { api_key: h.key, access_token: h.key },
      protocols: ['realtime', `${KEY_PROTOCOL}${h.key}`],
    });
  });
});

describe('the subprotocol the handshake selects', () => {
  it.each([
    ['realtime, when offered (OpenAI’s browser client)', ['realtime', 'KEY', 'openai-beta.realtime-v1'], 'realtime'],
    ['realtime, wherever it is in the list', ['openai-beta.realtime-v1', 'KEY', 'realtime'], 'realtime'],
    ['else the first that carries no key', ['KEY', 'openai-beta.realtime-v1'], 'openai-beta.realtime-v1'],
    ['Deepgram’s browser form: token, then the key', ['token', 'BARE'], 'token'],
  ])('%s', async (_name, offered, selected) => {
    const withKey = (p: string) => (p === 'KEY' ? `${KEY_PROTOCOL}${h.key}` : p === 'BARE' ? h.key : p);
    const u = await expectOpened({ protocols: offered.map(withKey) });
    expect(u.protocol).toBe(withKey(selected));
  });

  it.each([
    ['only the key', ['KEY']],
    ['only Deepgram’s form (token, then the key)', ['token', 'BARE']],
    ['the key and realtime', ['KEY', 'realtime']],
    ['the key first, then another', ['KEY', 'openai-beta.realtime-v1']],
  ])('the 101 never names the key: %s', async (_name, offered) => {
    const protocols = offered.map((p) => (p === 'KEY' ? `${KEY_PROTOCOL}${h.key}` : p === 'BARE' ? h.key : p));
    const answer = await rawUpgrade(protocols);
    expect(answer.status).toBe(101);
    expect(answer.protocol ?? '').not.toContain(h.key);
    expect(answer.protocol ?? '').not.toContain(KEY_PROTOCOL);
  });

  it('a client that offers only its key gets no subprotocol: `ws` and browsers then fail the handshake, so it must offer one more', async () => {
    expect((await rawUpgrade([`${KEY_PROTOCOL}${h.key}`])).protocol).toBeUndefined();
    const failed = await new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(wsUrl(h, { model: 'local-stt' }), [`${KEY_PROTOCOL}${h.key}`]);
      ws.once('open', () => {
        ws.terminate();
        reject(new Error('the handshake succeeded'));
      });
      ws.once('error', (err) => resolve(err.message));
    });
    expect(failed).toBe('Server sent no subprotocol');
    // Node's global WebSocket follows the Fetch standard as browsers do: protocols offered and none answered fails.
    const browser = new globalThis.WebSocket(wsUrl(h, { model: 'local-stt' }), [`${KEY_PROTOCOL}${h.key}`]);
    const outcome = await new Promise<string>((resolve) => {
      browser.addEventListener('open', () => resolve('open'), { once: true });
      browser.addEventListener('error', () => resolve('error'), { once: true });
    });
    if (outcome === 'open') browser.close();
    expect(outcome).toBe('error');
  });

  it('a client that offers no subprotocol gets none (and authenticates as before)', async () => {
    const u = await expectOpened({ headers: { authorization: `Bearer ${h.key}` } });
    expect(u.protocol).toBe('');
  });

  it('a browser’s WebSocket (Node’s global, which fails a handshake answering a protocol it did not offer) opens with the key in the subprotocol', async () => {
    const url = wsUrl(h, { model: 'local-stt' });
    const ws = new globalThis.WebSocket(url, ['realtime', `${KEY_PROTOCOL}${h.key}`, 'openai-beta.realtime-v1']);
    const first = await new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.addEventListener('message', (e) => resolve(JSON.parse(String(e.data)) as Record<string, unknown>), { once: true });
      ws.addEventListener('error', () => reject(new Error('the browser WebSocket failed')), { once: true });
    });
    expect(ws.protocol).toBe('realtime');
    expect(first.type).toBe('session.started');
    const closed = new Promise<number>((resolve) => ws.addEventListener('close', (e) => resolve(e.code), { once: true }));
    ws.send(JSON.stringify({ type: 'close' }));
    expect(await closed).toBe(1000);
  });
});

describe('keys in logs: a real `svc gateway` process', () => {
  let gw: SvcProcess | undefined;
  afterAll(async () => {
    if (gw) await stopSvc(gw);
  });

  it('URLs carrying the key as access_token or api_key are logged redacted, and no key appears anywhere in the output', async () => {
    gw = await startSvcGateway('key-logs', { DATABASE_URL: h.testDb.url, SVC_DATA_DIR: h.testDb.dataDir, LOG_LEVEL: 'info' });
    const base = gw.base;
    // An upgrade refused after admission (unknown model) is answered, so logged, with its URL.
    const refused = (query: string, init: Carried = {}) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/stt/websocket?${query}`, init.protocols ?? [], { headers: init.headers });
        ws.once('unexpected-response', (req, res) => {
          res.resume();
          res.once('end', () => {
            req.destroy();
            resolve(res.statusCode ?? 0);
          });
        });
        ws.once('open', () => {
          ws.terminate();
          reject(new Error('the upgrade was accepted'));
        });
        ws.once('error', reject);
      });
    expect(await refused(`model=nope&access_token=${h.key}`)).toBe(404);
    expect(await refused(`api_key=${h.key}&model=nope`)).toBe(404);
    expect(await refused('model=nope', { protocols: ['realtime', `${KEY_PROTOCOL}${h.key}`] })).toBe(404);
    expect(await refused('model=nope', { headers: { 'x-api-key': h.key } })).toBe(404);
    expect((await fetch(`${base}/v1/models?access_token=${keys.other}`, { headers: { authorization: `Token ${h.key}` } })).status).toBe(200);
    // Batched log lines are written out at exit; all of them are read once stdout closes.
    const outputClosed = new Promise((resolve) => gw!.child.once('close', resolve));
    await stopSvc(gw);
    await outputClosed;
    const out = gw.output();
    // Every line is there, up to the last one written before the process exits.
    expect(out).toContain('"msg":"shut down"');
    expect(out).toContain('"url":"/stt/websocket?model=nope&access_token=[redacted]"');
    expect(out).toContain('"url":"/stt/websocket?api_key=[redacted]&model=nope"');
    expect(out).toContain('"url":"/v1/models?access_token=[redacted]"');
    for (const key of [h.key, keys.other]) {
      expect(out.includes(key.slice(11)), 'the secret part of a key is in the output').toBe(false);
    }
  }, 90_000);
});
