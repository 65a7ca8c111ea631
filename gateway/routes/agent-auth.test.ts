// The {auth_url} routes over real HTTP against the real gateway (SQLite, or PostgreSQL with
// TEST_DB=postgresql): discovery as a standard OAuth client reads it, both registration
// methods end to end (the user's confirmation through the same service the dashboard page
// calls), the error envelope of every registration error, the per-IP limit and the per-address
// cap on anonymous registrations, registration turned off and its store down.
import { createServer } from 'node:net';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../server/clock.ts';
import type { Database } from '../../server/db/database.ts';
import { redactUrl } from '../redact-url.ts';
import { wavHeader } from '../audio/wav.ts';
import { confirmClaim } from '../../server/services/registrations/confirm-claim.ts';
import { createGuessThrottle } from '../../server/services/registrations/guess-throttle.ts';
import { GRANT_CLAIM, GRANT_JWT_BEARER, registrationSettings } from '../../server/services/registrations/registration-rules.ts';
import { signUp } from '../../server/services/users/sign-up.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';

let h: GatewayHarness;
/** A clock held 15 s into a minute, for the per-IP limit: its requests all count in one window, 45 s from its end. */
const inOneWindow = () => manualClock(A_WINDOW_START + 15_000);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * A gateway whose configured URLs are the ones it listens on (the issuer must equal them).
 * `clock`: the per-IP limit's windows and the claims' time; the system's unless given.
 */
async function gatewayAtItsOwnUrl(env: Record<string, string> = {}, clock?: Clock) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  return startGateway({
    port,
    clock,
    env: {
      PUBLIC_BASE_URL: base,
      DASHBOARD_URL: 'http://dash.example.test',
      SVC_AGENT_AUTH_IP_RPM: '100000',
      SVC_TRIAL_MAX_PER_ADDRESS_PER_HOUR: '100000',
      ...env,
    },
  });
}

beforeAll(async () => {
  h = await gatewayAtItsOwnUrl();
});
afterAll(async () => {
  await h?.close();
});

interface Envelope {
  error: { message: string; type: string; code: string; param: string | null };
}

const postJson = (path: string, body: unknown, base = h.url) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
const postForm = (params: Record<string, string>, base = h.url) =>
  fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });

async function expectError(res: Response | Promise<Response>, status: number, code: string) {
  const r = await res;
  const body = (await r.json()) as Envelope;
  expect({ status: r.status, code: body.error?.code }).toEqual({ status, code });
  expect(typeof body.error.message).toBe('string');
  expect(body.error.type).toBe(status === 429 ? 'rate_limit_error' : status >= 500 ? 'api_error' : 'invalid_request_error');
  return { res: r, body };
}

async function newUser(db: Database) {
  const u = await signUp(db, { email: `user-${Math.random().toString(36).slice(2)}@example.com`, password: 'correct horse battery' });
  return { id: u.userId, email: u.email, orgId: u.orgId };
}

/** The user enters the code on the dashboard page (the same service the page calls). */
async function userConfirms(harness: GatewayHarness, user: Awaited<ReturnType<typeof newUser>>, code: string) {
  const deps = { db: harness.testDb.db, settings: registrationSettings(harness.runtime.ctx.config), now: () => new Date() };
  return confirmClaim(deps, { code, user, ip: null, throttle: createGuessThrottle(), orgId: user.orgId });
}

/** Lets the next claim poll through at once instead of waiting the 5-second interval. */
async function forgetLastPoll(harness: GatewayHarness, registrationId: string) {
  await harness.testDb.db.prisma.agentRegistration.update({ where: { id: registrationId }, data: { lastPollAt: null } });
}

const models = (key: string) => fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

describe('discovery', () => {
  it('a standard OAuth client (oauth4webapi) accepts the authorization-server metadata; issuer = the URL it is served from', async () => {
    const issuer = new URL(h.url);
    const response = await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true });
    expect(response.headers.get('cache-control')).toContain('max-age');
    const as = await oauth.processDiscoveryResponse(issuer, response);
    expect(as.issuer).toBe(h.url);
    expect(as.token_endpoint).toBe(`${h.url}/oauth2/token`);
    expect(as.grant_types_supported).toEqual([GRANT_JWT_BEARER, GRANT_CLAIM]);
    expect(as.agent_auth).toMatchObject({
      identity_endpoint: `${h.url}/agent/identity`,
      claim_endpoint: `${h.url}/agent/identity/claim`,
      token_endpoint: `${h.url}/oauth2/token`,
      verification_uri: 'http://dash.example.test/claim',
      identity_types_supported: ['anonymous', 'service_auth'],
      interval: 5,
      user_code_expires_in: 600,
    });
  });

  it('the protected-resource metadata describes {base_url}/v1 (RFC 9728), also at its path-suffixed address', async () => {
    const resource = new URL(`${h.url}/v1`);
    const response = await oauth.resourceDiscoveryRequest(resource, { [oauth.allowInsecureRequests]: true });
    const rs = await oauth.processResourceDiscoveryResponse(resource, response);
    expect(rs).toMatchObject({ resource: `${h.url}/v1`, authorization_servers: [h.url], bearer_methods_supported: ['header'], scopes_supported: ['api'] });
    const plain = await fetch(`${h.url}/.well-known/oauth-protected-resource`);
    expect(await plain.json()).toEqual(rs);
  });

  it('identity_types_supported follows configuration: anonymous off lists service_auth only', async () => {
    const off = await gatewayAtItsOwnUrl({ SVC_AGENT_ANONYMOUS: 'off' });
    try {
      const as = (await (await fetch(`${off.url}/.well-known/oauth-authorization-server`)).json()) as {
        grant_types_supported: string[];
        agent_auth: Record<string, unknown>;
      };
      expect(as.agent_auth.identity_types_supported).toEqual(['service_auth']);
      expect(as.grant_types_supported).toEqual([GRANT_CLAIM]);
      await expectError(postJson('/agent/identity', { type: 'anonymous' }, off.url), 400, 'anonymous_not_enabled');
      const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: 'a@example.com' }, off.url);
      expect(reg.status).toBe(200);
      await expectError(postForm({ grant_type: GRANT_JWT_BEARER, assertion: 'x.y.z' }, off.url), 400, 'anonymous_not_enabled');
    } finally {
      await off.close();
    }
  });
});

describe('anonymous registration, end to end', () => {
  it('register, trial key (same key on repeat, via a standard client), claim, confirm, new key; the trial key is disabled', async () => {
    const res = await postJson('/agent/identity', { type: 'anonymous' });
    expect(res.status).toBe(200);
    const reg = (await res.json()) as Record<string, string>;
    expect(reg).toMatchObject({
      registration_type: 'anonymous',
      claim_url: `${h.url}/agent/identity/claim`,
      pre_claim_scopes: ['api:trial'],
      post_claim_scopes: ['api'],
    });
    expect(reg.identity_assertion).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(reg.claim_token).toMatch(/^claim_/);
    expect(new Date(reg.claim_token_expires!).getTime() - Date.now()).toBeGreaterThan(23.9 * 3600_000);

    // jwt-bearer through oauth4webapi's generic token request: form-encoded, Bearer token back.
    const as = await oauth.processDiscoveryResponse(
      new URL(h.url),
      await oauth.discoveryRequest(new URL(h.url), { algorithm: 'oauth2', [oauth.allowInsecureRequests]: true }),
    );
    const client = { client_id: 'agent' };
    const tokenResponse = await oauth.genericTokenEndpointRequest(
      as,
      client,
      oauth.None(),
      GRANT_JWT_BEARER,
      { assertion: reg.identity_assertion! },
      { [oauth.allowInsecureRequests]: true },
    );
    expect(tokenResponse.headers.get('cache-control')).toBe('no-store');
    const trial = await oauth.processGenericTokenEndpointResponse(as, client, tokenResponse);
    expect(trial).toMatchObject({ token_type: 'bearer', scope: 'api:trial' });
    expect(trial.access_token).toMatch(/^sk_svc_[A-Za-z0-9_-]{43}$/);
    expect((await models(trial.access_token)).status).toBe(200);
    // A clip the agent uploads during its trial (it moves to the user's org at the claim).
    const clip = Buffer.concat([wavHeader({ sampleRate: 16000, channels: 1, encoding: 'pcm_s16le', dataByteLength: 32000 }), Buffer.alloc(32000)]);
    const uploaded = await fetch(`${h.url}/blobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${trial.access_token}`, 'content-type': 'audio/wav' },
      body: clip,
    });
    expect(uploaded.status).toBe(201);
    const blob = (await uploaded.json()) as { id: string; size_bytes: number };

    // Repeating the exchange (plain form post this time) returns the same key, never a second.
    const again = (await (await postForm({ grant_type: GRANT_JWT_BEARER, assertion: reg.identity_assertion! })).json()) as Record<string, string>;
    expect(again).toEqual({ access_token: trial.access_token, token_type: 'Bearer', scope: 'api:trial' });

    const user = await newUser(h.testDb.db);
    const claimRes = await postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: user.email });
    expect(claimRes.status).toBe(200);
    const claim = (await claimRes.json()) as { claim_attempt: { user_code: string; expires_in: number; verification_uri: string; interval: number } };
    expect(claim).toMatchObject({ registration_id: reg.registration_id, registration_type: 'anonymous' });
    expect(claim.claim_attempt).toEqual({
      user_code: expect.stringMatching(/^\d{6}$/),
      expires_in: 600,
      verification_uri: 'http://dash.example.test/claim',
      interval: 5,
    });

    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'authorization_pending');
    const tooFast = await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 429, 'slow_down');
    // The spec's table: slow_down means "wait a minute".
    expect(tooFast.res.headers.get('retry-after')).toBe('60');

    await userConfirms(h, user, claim.claim_attempt.user_code);
    // The trial key stops at once.
    await expectError(models(trial.access_token), 401, 'api_key_disabled');
    // The trial's blob is the user's org's now, and so are its bytes under the storage quota.
    const { trialOrgId } = await h.testDb.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registration_id } });
    const blobBytes = async (id: string) => (await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id } })).blobBytes;
    expect(await h.testDb.db.prisma.blob.findUniqueOrThrow({ where: { id: blob.id } })).toMatchObject({ orgId: user.orgId });
    expect(await blobBytes(user.orgId)).toBe(BigInt(blob.size_bytes));
    expect(await blobBytes(trialOrgId!)).toBe(0n);
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token }), 400, 'already_claimed');

    const delivered = await postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! });
    expect(delivered.status).toBe(200);
    expect(delivered.headers.get('cache-control')).toBe('no-store');
    const key = (await delivered.json()) as Record<string, string>;
    expect(key).toEqual({ access_token: expect.stringMatching(/^sk_svc_/), token_type: 'Bearer', scope: 'api' });
    expect(key.access_token).not.toBe(trial.access_token);
    expect((await models(key.access_token!)).status).toBe(200);
    const row = await h.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: user.orgId } });
    expect(row.isTrial).toBe(false);

    // The same key again within 10 minutes; after that invalid_grant, and the sealed copy is gone.
    const twice = (await (await postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! })).json()) as Record<string, string>;
    expect(twice.access_token).toBe(key.access_token);
    await h.testDb.db.prisma.agentRegistration.update({ where: { id: reg.registration_id }, data: { deliveredAt: new Date(Date.now() - 10 * 60_000 - 1) } });
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'invalid_grant');
    expect((await h.testDb.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registration_id } })).issuedKeySealed).toBeNull();
    expect((await models(key.access_token!)).status).toBe(200);
  });

  it('concurrent exchanges of one assertion get one key; concurrent polls at confirmation get one key', async () => {
    const reg = (await (await postJson('/agent/identity', { type: 'anonymous' })).json()) as Record<string, string>;
    const exchanges = await Promise.all(
      Array.from({ length: 5 }, () =>
        postForm({ grant_type: GRANT_JWT_BEARER, assertion: reg.identity_assertion! }).then((r) => r.json() as Promise<Record<string, string>>),
      ),
    );
    expect(new Set(exchanges.map((e) => e.access_token)).size).toBe(1);

    const user = await newUser(h.testDb.db);
    const claim = (await (await postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: user.email })).json()) as {
      claim_attempt: { user_code: string };
    };
    await userConfirms(h, user, claim.claim_attempt.user_code);
    const polls = await Promise.all(Array.from({ length: 6 }, () => postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! })));
    expect(polls.map((p) => p.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const keys = await Promise.all(polls.map((p) => p.json() as Promise<Record<string, string>>));
    expect(new Set(keys.map((k) => k.access_token)).size).toBe(1);
    expect(await h.testDb.db.prisma.apiKey.count({ where: { orgId: user.orgId } })).toBe(1);
  });
});

describe('service_auth registration, end to end', () => {
  it("answers the spec's registration record; a new code answers it again; the claim completes", async () => {
    const user = await newUser(h.testDb.db);
    const res = await postJson('/agent/identity', { type: 'service_auth', login_hint: user.email.toUpperCase() });
    expect(res.status).toBe(200);
    const reg = (await res.json()) as Record<string, unknown> & { claim: { user_code: string } };
    expect(Object.keys(reg).sort()).toEqual(
      ['claim', 'claim_token', 'claim_token_expires', 'claim_url', 'post_claim_scopes', 'registration_id', 'registration_type', 'token_endpoint'].sort(),
    );
    expect(reg).toMatchObject({ registration_type: 'service_auth', claim_url: `${h.url}/agent/identity/claim`, post_claim_scopes: ['api'] });
    expect(reg.claim).toEqual({
      user_code: expect.stringMatching(/^\d{6}$/),
      expires_in: 600,
      verification_uri: 'http://dash.example.test/claim',
      interval: 5,
    });
    expect(new Date(reg.claim_token_expires as string).toISOString()).toBe(reg.claim_token_expires);

    const renewed = (await (await postJson('/agent/identity/claim', { claim_token: reg.claim_token })).json()) as typeof reg;
    expect(renewed).toMatchObject({
      registration_id: reg.registration_id,
      registration_type: 'service_auth',
      claim_token: reg.claim_token,
      claim_url: reg.claim_url,
    });
    expect(renewed.claim.user_code).toMatch(/^\d{6}$/);

    await userConfirms(h, user, renewed.claim.user_code);
    const key = (await (await postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token as string })).json()) as Record<string, string>;
    expect((await models(key.access_token!)).status).toBe(200);
  });
});

describe('who the agent is', () => {
  it('the name it gives itself (client_name) and its User-Agent are kept for the claim page, printable and bounded; a bad name is 400', async () => {
    const res = await fetch(`${h.url}/agent/identity`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': `support-bot/2.1 ${'x'.repeat(300)}` },
      body: JSON.stringify({ type: 'anonymous', client_name: '  Support Bot  ' }),
    });
    expect(res.status).toBe(200);
    const reg = (await res.json()) as Record<string, string>;
    const row = await h.testDb.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: reg.registration_id } });
    expect(row).toMatchObject({ clientName: 'Support Bot', clientAddress: '127.0.0.1' });
    expect(row.userAgent).toMatch(/^support-bot\/2\.1 x+$/);
    expect(row.userAgent).toHaveLength(200);
    // Without a name: none is made up.
    const plain = (await (await postJson('/agent/identity', { type: 'anonymous' })).json()) as Record<string, string>;
    expect(await h.testDb.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: plain.registration_id } })).toMatchObject({ clientName: null });
    for (const [name, message] of [
      ['x'.repeat(101), 'client_name: at most 100 characters'],
      ['  ', 'client_name: must not be empty'],
      ['bot\u0007', 'client_name: must be text without control characters'],
      [42, expect.stringMatching(/^client_name: /)],
    ] as const) {
      const refused = await expectError(postJson('/agent/identity', { type: 'anonymous', client_name: name }), 400, 'invalid_request');
      expect(refused.body.error).toMatchObject({ param: 'client_name', message });
    }
  });
});

describe('errors', () => {
  it('each registration error in the envelope with the right status', async () => {
    await expectError(postJson('/agent/identity', { type: 'service_auth', login_hint: 'not-an-email' }), 400, 'invalid_login_hint');
    await expectError(postJson('/agent/identity', { type: 'service_auth' }), 400, 'invalid_login_hint');
    await expectError(postJson('/agent/identity', { type: 'service_auth', login_hint: 42 }), 400, 'invalid_login_hint');
    await expectError(postJson('/agent/identity', { type: 'identity_assertion', assertion: 'eyJ...' }), 400, 'identity_assertion_not_enabled');
    await expectError(postJson('/agent/identity', { assertion: 'eyJ...' }), 400, 'identity_assertion_not_enabled');
    const badType = await expectError(postJson('/agent/identity', { type: 'robot' }), 400, 'invalid_request');
    expect(badType.body.error.param).toBe('type');
    await expectError(postJson('/agent/identity', { type: 7 }), 400, 'invalid_request');
    await expectError(postJson('/agent/identity/claim', { claim_token: 'claim_unknown', email: 'a@example.com' }), 410, 'claim_expired');
    await expectError(postJson('/agent/identity/claim', { email: 'a@example.com' }), 400, 'invalid_request');

    const reg = (await (await postJson('/agent/identity', { type: 'anonymous' })).json()) as Record<string, string>;
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: 'nope' }), 400, 'invalid_login_hint');
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: ['a@example.com'] }), 400, 'invalid_login_hint');
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token }), 400, 'invalid_login_hint');

    // expired_token: the 10-minute code ran out.
    await postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: 'a@example.com' });
    await h.testDb.db.prisma.claimAttempt.updateMany({ where: { registrationId: reg.registration_id }, data: { expiresAt: new Date(Date.now() - 1) } });
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'expired_token');
    // invalid_grant: the registration is older than 24 hours; the claim endpoint says 410.
    await h.testDb.db.prisma.agentRegistration.update({ where: { id: reg.registration_id }, data: { expiresAt: new Date(Date.now() - 1) } });
    await forgetLastPoll(h, reg.registration_id!);
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'invalid_grant');
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token }), 410, 'claim_expired');
    // Gone altogether (purged a week after it ended, or never there): the poll says
    // invalid_grant as the spec's claim table does; 410 claim_expired is the claim endpoint's.
    await h.testDb.db.prisma.agentRegistration.delete({ where: { id: reg.registration_id } });
    const gone = await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'invalid_grant');
    expect(gone.body.error.param).toBe('claim_token');
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: 'claim_unknown' }), 400, 'invalid_grant');
    await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token }), 410, 'claim_expired');
  });

  it('token endpoint: grant types, missing and repeated parameters, bad assertions', async () => {
    await expectError(postForm({ grant_type: 'client_credentials' }), 400, 'unsupported_grant_type');
    await expectError(postForm({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: 'x' }), 400, 'unsupported_grant_type');
    await expectError(postForm({}), 400, 'invalid_request');
    await expectError(postForm({ grant_type: GRANT_CLAIM }), 400, 'invalid_request');
    await expectError(postForm({ grant_type: GRANT_JWT_BEARER }), 400, 'invalid_request');
    await expectError(postForm({ grant_type: GRANT_JWT_BEARER, assertion: 'a.b.c' }), 400, 'invalid_grant');
    const repeated = await fetch(`${h.url}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=${encodeURIComponent(GRANT_CLAIM)}&claim_token=a&claim_token=b`,
    });
    await expectError(repeated, 400, 'invalid_request');
  });

  it('malformed bodies are invalid_json; oversized ones 413; wrong methods 405', async () => {
    for (const body of ['[]', '"anonymous"', '{', 'null']) await expectError(postJson('/agent/identity', body), 400, 'invalid_json');
    await expectError(fetch(`${h.url}/agent/identity`, { method: 'POST' }), 400, 'invalid_json');
    await expectError(
      fetch(`${h.url}/agent/identity`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'type=anonymous' }),
      400,
      'invalid_json',
    );
    await expectError(postJson('/agent/identity', { type: 'anonymous', pad: 'x'.repeat(20_000) }), 413, 'body_too_large');
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: 'x'.repeat(20_000) }), 413, 'body_too_large');
    await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: 'x'.repeat(5_000) }), 400, 'invalid_request');
    const get = await expectError(fetch(`${h.url}/oauth2/token`), 405, 'method_not_allowed');
    expect(get.res.headers.get('allow')).toBe('POST');
  });

  it('responses that carry secrets, and every error, are Cache-Control: no-store; discovery may be cached', async () => {
    const noStore = (r: Response) =>
      expect({ url: r.url, cacheControl: r.headers.get('cache-control'), pragma: r.headers.get('pragma') }).toEqual({
        url: r.url,
        cacheControl: 'no-store',
        pragma: 'no-cache',
      });
    const anonymous = await postJson('/agent/identity', { type: 'anonymous' });
    noStore(anonymous);
    const reg = (await anonymous.json()) as Record<string, string>;
    noStore(await postJson('/agent/identity', { type: 'service_auth', login_hint: 'cache@example.com' }));
    noStore(await postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: 'cache@example.com' }));
    noStore(await postForm({ grant_type: GRANT_JWT_BEARER, assertion: reg.identity_assertion! }));
    noStore((await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 400, 'authorization_pending')).res);
    noStore((await expectError(postJson('/agent/identity', { type: 'robot' }), 400, 'invalid_request')).res);
    noStore(
      (
        await expectError(
          fetch(`${h.url}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: '<x/>' }),
          415,
          'unsupported_media_type',
        )
      ).res,
    );
    expect((await fetch(`${h.url}/.well-known/oauth-authorization-server`)).headers.get('cache-control')).toBe('public, max-age=60');
  });

  it('other body types are 415 naming what the routes take; form parameters named like Object members are plain names', async () => {
    for (const type of ['application/xml', 'multipart/form-data; boundary=x', 'application/octet-stream']) {
      const { body } = await expectError(
        fetch(`${h.url}/oauth2/token`, { method: 'POST', headers: { 'content-type': type }, body: '--x--' }),
        415,
        'unsupported_media_type',
      );
      expect(body.error.message).toContain('application/x-www-form-urlencoded');
    }
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const res = await fetch(`${h.url}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `${name}=1&grant_type=client_credentials`,
      });
      await expectError(res, 400, 'unsupported_grant_type');
    }
  });

  it('claim tokens, assertions and codes put in a query string are redacted from the logged URL', () => {
    expect(redactUrl('/oauth2/token?grant_type=x&claim_token=claim_secret&assertion=eyJ.a.b')).toBe(
      '/oauth2/token?grant_type=x&claim_token=[redacted]&assertion=[redacted]',
    );
    expect(redactUrl('/claim?Code=123456&access%5Ftoken=sk_svc_x&user_code=654321')).toBe(
      '/claim?Code=[redacted]&access%5Ftoken=[redacted]&user_code=[redacted]',
    );
    expect(redactUrl('/v1/models&api_key=sk_svc_x')).toBe('/v1/models&api_key=[redacted]'); // no '?', still a parameter
    expect(redactUrl('/v1/models')).toBe('/v1/models');
  });

  it('per-IP limit without trusted proxies: a client cannot escape it by writing X-Forwarded-For', async () => {
    const limited = await gatewayAtItsOwnUrl({ SVC_AGENT_AUTH_IP_RPM: '3' }, inOneWindow());
    try {
      for (let i = 0; i < 3; i++) {
        expect((await fetch(`${limited.url}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })).status).toBe(200);
      }
      await expectError(fetch(`${limited.url}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-for': '203.0.113.99' } }), 429, 'slow_down');
    } finally {
      await limited.close();
    }
  });

  it('per-IP limit behind one trusted proxy (SVC_TRUSTED_PROXIES=1): the address the proxy appended, not what the client wrote before it', async () => {
    const limited = await gatewayAtItsOwnUrl({ SVC_AGENT_AUTH_IP_RPM: '2', SVC_TRUSTED_PROXIES: '1' }, inOneWindow());
    try {
      const from = (xff: string) => fetch(`${limited.url}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-for': xff } });
      expect((await from('1.1.1.1, 203.0.113.5')).status).toBe(200);
      expect((await from('2.2.2.2, 203.0.113.5')).status).toBe(200);
      await expectError(from('3.3.3.3, 203.0.113.5'), 429, 'slow_down');
      // Another client behind the same proxy has its own allowance.
      expect((await from('203.0.113.6')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('per-IP limit behind two trusted proxies with a one-entry X-Forwarded-For: the request skipped a proxy, so the peer counts, not the entry', async () => {
    const limited = await gatewayAtItsOwnUrl({ SVC_AGENT_AUTH_IP_RPM: '2', SVC_TRUSTED_PROXIES: '2' }, inOneWindow());
    try {
      const from = (xff: string) => fetch(`${limited.url}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-for': xff } });
      expect((await from('203.0.113.1')).status).toBe(200);
      expect((await from('203.0.113.2')).status).toBe(200);
      await expectError(from('203.0.113.3'), 429, 'slow_down');
    } finally {
      await limited.close();
    }
  });

  it('anonymous registrations per address per hour (SVC_TRIAL_MAX_PER_ADDRESS_PER_HOUR): 429 slow_down with Retry-After; the address is recorded; another client behind the proxy has its own', async () => {
    const capped = await gatewayAtItsOwnUrl({ SVC_TRIAL_MAX_PER_ADDRESS_PER_HOUR: '2', SVC_TRUSTED_PROXIES: '1' });
    try {
      const register = (xff: string) =>
        fetch(`${capped.url}/agent/identity`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': xff },
          body: '{"type":"anonymous"}',
        });
      const first = (await (await register('spoofed, 203.0.113.7')).json()) as Record<string, string>;
      expect((await register('other-spoof, 203.0.113.7')).status).toBe(200);
      const { res, body } = await expectError(register('203.0.113.7'), 429, 'slow_down');
      const wait = Number(res.headers.get('retry-after'));
      expect(wait).toBeGreaterThan(3500);
      expect(wait).toBeLessThanOrEqual(3600);
      expect(body.error.message).toContain('2 per hour');
      expect(res.headers.get('cache-control')).toBe('no-store');
      const row = await capped.testDb.db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: first.registration_id } });
      expect(row.clientAddress).toBe('203.0.113.7');
      // service_auth gives no trial: not capped.
      expect(
        (
          await fetch(`${capped.url}/agent/identity`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.7' },
            body: '{"type":"service_auth","login_hint":"cap@example.com"}',
          })
        ).status,
      ).toBe(200);
      expect((await register('203.0.113.8')).status).toBe(200);
    } finally {
      await capped.close();
    }
  });

  it('per-IP limit: 429 slow_down with Retry-After on every registration route; keyed routes are not affected', async () => {
    const limited = await gatewayAtItsOwnUrl({ SVC_AGENT_AUTH_IP_RPM: '3' }, inOneWindow());
    try {
      for (let i = 0; i < 3; i++) expect((await fetch(`${limited.url}/.well-known/oauth-authorization-server`)).status).toBe(200);
      const { res } = await expectError(postJson('/agent/identity', { type: 'anonymous' }, limited.url), 429, 'slow_down');
      expect(res.headers.get('retry-after')).toBe('45');
      await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: 'x' }, limited.url), 429, 'slow_down');
      await expectError(fetch(`${limited.url}/.well-known/oauth-protected-resource`), 429, 'slow_down');
      expect((await fetch(`${limited.url}/v1/models`, { headers: limited.headers })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('registration turned off: 503 agent_auth_unavailable on every registration route; the API still works', async () => {
    const off = await gatewayAtItsOwnUrl({ SVC_AGENT_AUTH: 'off' });
    try {
      const calls = [
        fetch(`${off.url}/.well-known/oauth-authorization-server`),
        fetch(`${off.url}/.well-known/oauth-protected-resource`),
        postJson('/agent/identity', { type: 'anonymous' }, off.url),
        postJson('/agent/identity/claim', { claim_token: 'x' }, off.url),
        postForm({ grant_type: GRANT_CLAIM, claim_token: 'x' }, off.url),
      ];
      for (const call of calls) await expectError(call, 503, 'agent_auth_unavailable');
      expect((await fetch(`${off.url}/v1/models`, { headers: off.headers })).status).toBe(200);
    } finally {
      await off.close();
    }
  });

  it('registration store down: 503 agent_auth_unavailable to register, temporarily_unavailable to the token grants; retrying later works', async () => {
    const reg = (await (await postJson('/agent/identity', { type: 'anonymous' })).json()) as Record<string, string>;
    const ctx = h.runtime.ctx;
    const healthy = ctx.db;
    const fail = () => Promise.reject(Object.assign(new Error("Can't reach database server"), { code: 'P1001' }));
    const model = new Proxy({}, { get: () => fail });
    ctx.db = { ...healthy, prisma: new Proxy({}, { get: () => model }) as Database['prisma'] };
    try {
      await expectError(postJson('/agent/identity', { type: 'anonymous' }), 503, 'agent_auth_unavailable');
      await expectError(postJson('/agent/identity/claim', { claim_token: reg.claim_token, email: 'a@example.com' }), 503, 'agent_auth_unavailable');
      await expectError(postForm({ grant_type: GRANT_JWT_BEARER, assertion: reg.identity_assertion! }), 503, 'temporarily_unavailable');
      await expectError(postForm({ grant_type: GRANT_CLAIM, claim_token: reg.claim_token! }), 503, 'temporarily_unavailable');
    } finally {
      ctx.db = healthy;
    }
    const key = await postForm({ grant_type: GRANT_JWT_BEARER, assertion: reg.identity_assertion! });
    expect(key.status).toBe(200);
  });
});
