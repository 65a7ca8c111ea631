// The dashboard's gateway proxy against a real gateway with the local engines: allowlist,
// session, cross-site refusal, size cap, streaming, and the gateway's answers passed through.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWav } from '../../gateway/audio/wav.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { until } from '../../test/support/poll.ts';
import { startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../services/models/upsert-model.ts';
import { createOrg } from '../services/orgs/create-org.ts';
import { DASHBOARD_KEY_NAME, getOrCreateDashboardKey } from '../services/keys/get-dashboard-key.ts';
import { revokeApiKey } from '../services/keys/revoke-api-key.ts';
import { gatewayInternalUrl, MAX_PROXY_BODY_BYTES, parseByteRange, proxyToGateway, type GatewayProxyDeps } from './gateway-proxy.ts';

let h: GatewayHarness;
let llm: ScriptedUpstream;
let otherOrg: string;

const SESSION = 'x-test-org';
const DASH = 'http://dash.example:3000';

function deps(over: Partial<GatewayProxyDeps> = {}): GatewayProxyDeps {
  return {
    gatewayUrl: h.url,
    // Stands in for the next-auth session: the org named by a test header, or none.
    resolveOrg: async (req) => (req.headers.get(SESSION) ? { orgId: req.headers.get(SESSION)! } : null),
    keyFor: (orgId) => getOrCreateDashboardKey(h.testDb.db, orgId),
    ...over,
  };
}

function call(path: string[], init: RequestInit & { org?: string | null } = {}, over: Partial<GatewayProxyDeps> = {}) {
  const headers = new Headers(init.headers);
  if (init.org !== null) headers.set(SESSION, init.org ?? h.orgId);
  const req = new Request(`${DASH}/api/gateway/${path.join('/')}`, {
    ...init,
    headers,
    ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  return proxyToGateway(req, path, deps(over));
}

const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  // With the preview worker: the voices pages play previews through the proxy.
  h = await startTtsGateway({ env: { SVC_VOICE_PREVIEWS: 'on', SVC_PREVIEW_POLL_SECONDS: '0.2' } });
  otherOrg = (await createOrg(h.testDb.db, { name: 'other', creditsMicros: 1_000_000n })).id;
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['Hello ', 'from ', 'the ', 'LLM.'], usage: { prompt_tokens: 12, completion_tokens: 4 } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'chat-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 2_000_000n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
});
afterAll(async () => {
  await llm?.close();
  await h?.close();
});

describe('gateway proxy: forwarding', () => {
  it('synthesizes through the gateway with the org’s dashboard key: audio, cost and balance headers', async () => {
    const before = await h.balanceMicros();
    const res = await call(['tts', 'bytes'], json(ttsBody()));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^audio\/wav/);
    const cost = res.headers.get('x-svc-request-cost-usd');
    expect(cost).toMatch(/^\d+\.\d{6}$/);
    expect(res.headers.get('x-svc-credits-remaining-usd')).toMatch(/^\d+\.\d{6}$/);
    expect(res.headers.get('cache-control')).toBe('no-store, no-transform');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toContain('sandbox');
    const wav = parseWav(Buffer.from(await res.arrayBuffer()));
    expect(wav.sampleRate).toBe(16000);
    expect(wav.frameCount).toBeGreaterThan(8000); // more than half a second
    expect(await h.balanceMicros()).toBeLessThan(before);
    // Billed to the dashboard key, a real key of the org.
    const key = await h.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: h.orgId, name: DASHBOARD_KEY_NAME } });
    const ledger = await h.testDb.db.prisma.ledgerEntry.findFirstOrThrow({ where: { orgId: h.orgId, kind: 'usage' }, orderBy: { createdAt: 'desc' } });
    expect(ledger.apiKeyId).toBe(key.id);
  });

  it('streams a chat completion (the playground’s chat): its events, its usage chunk and its request id, debited to the dashboard key', async () => {
    const res = await call(
      ['v1', 'chat', 'completions'],
      json({ model: 'chat-llm', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } }),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).toBe('no-store, no-transform');
    const requestId = res.headers.get('x-request-id');
    expect(requestId).toBeTruthy();
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
      .map((e) => JSON.parse(e.slice(6)) as { choices: { delta?: { content?: string } }[]; usage?: { prompt_tokens: number; completion_tokens: number } });
    expect(events.map((e) => e.choices[0]?.delta?.content ?? '').join('')).toBe('Hello from the LLM.');
    expect(events.at(-1)?.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 4 });
    await h.settled();
    const key = await h.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: h.orgId, name: DASHBOARD_KEY_NAME } });
    const debit = await h.testDb.db.prisma.ledgerEntry.findFirstOrThrow({ where: { requestId: requestId! } });
    expect(debit).toMatchObject({ apiKeyId: key.id, inputTokens: 12, outputTokens: 4, amountMicros: -20n });
  });

  it('passes the gateway’s error envelope and status through', async () => {
    const res = await call(['tts', 'bytes'], json(ttsBody({ voice: { mode: 'id', id: 'voice_nope' } })));
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: expect.objectContaining({ code: 'voice_not_found', type: 'invalid_request_error' }) });
    const bad = await call(['tts', 'bytes'], { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('invalid_json');
  });

  it('sends the gateway neither cookies nor the browser’s Authorization, and streams the upload', async () => {
    let seen: { url: string; headers: Headers; body: string } | undefined;
    const capture: typeof fetch = async (url, init) => {
      seen = { url: String(url), headers: new Headers(init?.headers), body: await new Response(init?.body as BodyInit).text() };
      return new Response('{}', {
        status: 200,
        headers: { 'content-type': 'application/json', 'set-cookie': 'x=1', 'x-svc-request-cost-usd': '0.000001', server: 'fastify' },
      });
    };
    const res = await call(
      ['v1', 'audio', 'transcriptions'],
      {
        method: 'POST',
        headers: { cookie: 'next-auth.session-token=secret', authorization: 'Bearer sk_svc_browser', 'content-type': 'text/plain', 'x-custom': '1' },
        body: 'hello',
      },
      { fetch: capture },
    );
    expect(res.status).toBe(200);
    expect(seen!.url).toBe(`${h.url}/v1/audio/transcriptions`);
    expect(seen!.headers.get('cookie')).toBeNull();
    expect(seen!.headers.get('x-custom')).toBeNull();
    expect(seen!.headers.get('authorization')).toBe(`Bearer ${await getOrCreateDashboardKey(h.testDb.db, h.orgId)}`);
    expect(seen!.body).toBe('hello');
    // Only the gateway's own answer headers come back; never its cookies or server banner.
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.headers.get('server')).toBeNull();
    expect(res.headers.get('x-svc-request-cost-usd')).toBe('0.000001');
  });

  it('a job and a blob of another org are not found through the proxy (the key is the org’s)', async () => {
    const job = await h.testDb.db.prisma.job.create({ data: { id: 'job_otherorg1', orgId: otherOrg, kind: 'instant_clone', input: {} } });
    const mine = await call(['jobs', job.id], { method: 'GET' });
    expect(mine.status).toBe(404);
    expect((await mine.json()).error.code).toBe('job_not_found');
    const theirs = await call(['jobs', job.id], { method: 'GET', org: otherOrg });
    expect(theirs.status).toBe(200);
    expect(await theirs.json()).toMatchObject({ id: job.id, object: 'job' });
    expect((await call(['blobs', 'blob_missing', 'content'], { method: 'GET' })).status).toBe(404);
  });

  it("a voice's preview is forwarded to an org with no credit, for nothing; synthesis is not", async () => {
    const broke = (await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n })).id;
    const res = await until('the preview of flite-slt', async () => {
      const answer = await call(['voices', 'flite-slt', 'preview'], { method: 'GET', org: broke });
      if (answer.status === 200) return answer;
      expect((await answer.json()).error.code).toBe('preview_not_ready');
      return undefined;
    });
    expect(res.headers.get('content-type')).toBe('audio/wav');
    expect(res.headers.get('x-svc-preview-model')).toBe('local-flite');
    expect(parseWav(Buffer.from(await res.arrayBuffer())).frameCount).toBeGreaterThan(16_000);
    const tts = await call(['tts', 'bytes'], { ...json(ttsBody()), org: broke });
    expect(tts.status).toBe(402);
    await tts.arrayBuffer();
    await h.settled();
    expect(await h.testDb.db.prisma.ledgerEntry.count({ where: { orgId: broke } })).toBe(0);
  });

  it('a revoked dashboard key is replaced on the next call', async () => {
    const key = await h.testDb.db.prisma.apiKey.findFirstOrThrow({ where: { orgId: h.orgId, name: DASHBOARD_KEY_NAME, status: 'active' } });
    await revokeApiKey(h.testDb.db.prisma, { id: key.id, orgId: h.orgId });
    const res = await call(['tts', 'bytes'], json(ttsBody({ transcript: 'Hi.' })));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(await h.testDb.db.prisma.apiKey.count({ where: { orgId: h.orgId, name: DASHBOARD_KEY_NAME, status: 'active' } })).toBe(1);
  });
});

describe('gateway proxy: byte ranges of a stored recording (what <audio> asks to learn the length and seek)', () => {
  let blobId = '';
  let clip: Buffer;
  const get = (range?: string) => call(['blobs', blobId, 'content'], { method: 'GET', headers: range === undefined ? {} : { range } });

  beforeAll(async () => {
    // A real WAV stored through the gateway as the org (the dashboard's clone form does the same).
    const res = await call(['tts', 'bytes'], json(ttsBody({ transcript: 'A recording to seek in, long enough to have a few kilobytes.' })));
    clip = Buffer.from(await res.arrayBuffer());
    const stored = await fetch(`${h.url}/blobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'audio/wav' },
      body: new Uint8Array(clip),
    });
    expect(stored.status).toBe(201);
    blobId = ((await stored.json()) as { id: string }).id;
  });

  it('without Range: 200, the whole file, its Content-Length and Accept-Ranges: bytes', async () => {
    const res = await get();
    expect(res.status).toBe(200);
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('content-length')).toBe(String(clip.length));
    expect(res.headers.get('content-type')).toMatch(/^audio\/wav/);
    expect(Buffer.from(await res.arrayBuffer()).equals(clip)).toBe(true);
  });

  it.each([
    ['bytes=0-', 0, null],
    ['bytes=100-199', 100, 199],
    ['bytes=1000-', 1000, null],
    ['bytes=-50', -50, null],
    ['bytes=10-99999999', 10, null],
  ])('%s: 206 with exactly those bytes, Content-Range and Content-Length', async (range, from, to) => {
    const start = from < 0 ? clip.length + from : from;
    const end = to ?? clip.length - 1;
    const res = await get(range);
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${clip.length}`);
    expect(res.headers.get('content-length')).toBe(String(end - start + 1));
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(Buffer.from(await res.arrayBuffer()).equals(clip.subarray(start, end + 1))).toBe(true);
  });

  it('a range that starts past the end is 416 with Content-Range: bytes */size', async () => {
    const res = await get(`bytes=${clip.length}-`);
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe(`bytes */${clip.length}`);
    expect((await res.arrayBuffer()).byteLength).toBe(0);
  });

  it('a Range it does not take (several ranges, other units, reversed) gets the whole file with 200', async () => {
    for (const range of ['bytes=0-10,20-30', 'items=0-5', 'bytes=9-3', 'bytes=abc']) {
      const res = await get(range);
      expect(res.status, range).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).length, range).toBe(clip.length);
    }
  });

  it('stops reading the gateway’s answer once the range has passed', async () => {
    let pulled = 0;
    let cancelled = false;
    const endless: typeof fetch = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            pulled++;
            controller.enqueue(new Uint8Array(1024).fill(pulled));
          },
          cancel() {
            cancelled = true;
          },
        }),
        { status: 200, headers: { 'content-type': 'audio/wav', 'content-length': String(1024 * 1024 * 1024) } },
      );
    const res = await call(['blobs', 'blob_big', 'content'], { method: 'GET', headers: { range: 'bytes=1500-2600' } }, { fetch: endless });
    expect(res.status).toBe(206);
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.length).toBe(1101);
    // Bytes 1500..2047 come from the 2nd chunk (filled with 2), 2048..2600 from the 3rd.
    expect(body[0]).toBe(2);
    expect(body.at(-1)).toBe(3);
    expect(cancelled).toBe(true);
    expect(pulled).toBeLessThan(10);
  });

  it('ranges only where the allowlist says so: a TTS answer ignores Range', async () => {
    const res = await call(['tts', 'bytes'], {
      ...json(ttsBody({ transcript: 'Whole.' })),
      headers: { 'content-type': 'application/json', range: 'bytes=0-10' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('accept-ranges')).toBeNull();
    expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(11);
  });
});

describe('parseByteRange', () => {
  it.each<[string | null, number, ReturnType<typeof parseByteRange>]>([
    [null, 100, null],
    ['bytes=0-', 100, { start: 0, end: 99 }],
    ['bytes=0-0', 100, { start: 0, end: 0 }],
    ['bytes=99-', 100, { start: 99, end: 99 }],
    ['bytes=100-', 100, 'unsatisfiable'],
    ['bytes=-1', 100, { start: 99, end: 99 }],
    ['bytes=-500', 100, { start: 0, end: 99 }],
    ['bytes=-0', 100, 'unsatisfiable'],
    ['bytes=5-1', 100, null],
    ['bytes=-', 100, null],
    ['bytes=0-5,7-9', 100, null],
    ['bytes=0-', 0, null],
    [' bytes=3-4 ', 100, { start: 3, end: 4 }],
    ['bytes=1234567890123456-', 100, null],
  ])('%j of %d -> %j', (header, size, expected) => {
    expect(parseByteRange(header, size)).toEqual(expected);
  });
});

describe('gateway proxy: refusals', () => {
  it('401 without a session, before anything is forwarded', async () => {
    const res = await call(['tts', 'bytes'], { ...json(ttsBody()), org: null });
    expect(res.status).toBe(401);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_api_key', message: expect.stringContaining('Sign in') });
  });

  it('404 for routes outside the allowlist, including traversal and odd ids', async () => {
    for (const path of [
      ['voices'],
      ['voices', 'flite-slt'],
      ['v1', 'responses'],
      ['v1', 'chat'],
      ['keys'],
      ['voices', '..', 'profiles'],
      ['jobs', 'a/b'],
      ['jobs', '%2e%2e'],
      ['jobs', 'x'.repeat(101)],
      ['blobs', 'b1'],
      ['tts', 'bytes', 'extra'],
      [],
    ]) {
      const res = await call(path, json({}));
      expect(res.status, path.join('/')).toBe(404);
      expect((await res.json()).error.code).toBe('not_found');
    }
  });

  it('405 with Allow for a wrong method on an allowed route', async () => {
    const res = await call(['tts', 'bytes'], { method: 'GET' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect((await call(['jobs', 'job_1'], { method: 'DELETE' })).status).toBe(405);
  });

  it('403 for a cross-site request that carries the session', async () => {
    const fromElsewhere = await call(['tts', 'bytes'], { ...json(ttsBody()), headers: { 'content-type': 'application/json', origin: 'https://evil.example' } });
    expect(fromElsewhere.status).toBe(403);
    expect((await fromElsewhere.json()).error.code).toBe('forbidden');
    expect((await call(['tts', 'bytes'], { ...json(ttsBody()), headers: { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' } })).status).toBe(
      403,
    );
    const sameSite = await call(['tts', 'bytes'], {
      ...json(ttsBody({ transcript: 'Same.' })),
      headers: { 'content-type': 'application/json', origin: DASH, host: 'dash.example:3000', 'sec-fetch-site': 'same-origin' },
    });
    expect(sameSite.status).toBe(200);
    await sameSite.arrayBuffer();
  });

  it('413 for a body over the cap, declared or streamed', async () => {
    const declared = await call(['voices', 'clone'], { method: 'POST', headers: { 'content-length': String(MAX_PROXY_BODY_BYTES + 1) }, body: 'x' });
    expect(declared.status).toBe(413);
    expect((await declared.json()).error.code).toBe('body_too_large');
    const chunk = new Uint8Array(1024 * 1024);
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += chunk.byteLength;
        if (sent > MAX_PROXY_BODY_BYTES + 4 * chunk.byteLength) controller.close();
        else controller.enqueue(chunk);
      },
    });
    const drain: typeof fetch = async (_url, init) => {
      await new Response(init?.body as BodyInit).arrayBuffer();
      return new Response('{}');
    };
    const streamed = await call(['voices', 'clone'], { method: 'POST', body: endless }, { fetch: drain });
    expect(streamed.status).toBe(413);
  });

  it('502 upstream_unavailable when the gateway does not answer', async () => {
    const res = await call(['tts', 'bytes'], json(ttsBody()), { gatewayUrl: 'http://127.0.0.1:1' });
    expect(res.status).toBe(502);
    expect((await res.json()).error.code).toBe('upstream_unavailable');
  });
});

describe('gatewayInternalUrl', () => {
  it('uses loopback when the gateway listens on every address or loopback, else its public URL', () => {
    const at = (gatewayHost: string) => gatewayInternalUrl({ gatewayHost, gatewayPort: 8080, publicBaseUrl: 'https://api.example.com' });
    expect(at('0.0.0.0')).toBe('http://127.0.0.1:8080');
    expect(at('::')).toBe('http://127.0.0.1:8080');
    expect(at('127.0.0.1')).toBe('http://127.0.0.1:8080');
    expect(at('10.1.2.3')).toBe('https://api.example.com');
  });
});
