// GET /v1/logs and GET /v1/logs/:id over real HTTP: the real gateway runtime on a throw-away
// SQLite or PostgreSQL database, a scripted OpenAI-compatible upstream, two orgs. Each key sees
// its own org's rows only, whatever it filters by; filters, pages, exports; every answer as the
// OpenAPI document says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { CSV_HEADER } from '../../server/services/logs/present-request-log.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { openApiResponseChecker, type OpenApiResponseChecker } from '../../test/support/openapi-responses.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;
let up: ScriptedUpstream;
let checker: OpenApiResponseChecker;
/** The other org and its key: its rows must never reach h's key. */
const other = { orgId: '', key: '', keyId: '' };
const second = { key: '', keyId: '' };
const ids = { mine: [] as string[], theirs: [] as string[], failed: '' };
let seq = 0;

interface Page {
  object: string;
  data: { id: string; request_id: string; model: string | null; status: number; key: { id: string | null; name: string }; route: string }[];
  has_more: boolean;
  next_cursor: string | null;
}

beforeAll(async () => {
  h = await startGateway({ env: { SVC_LOG_FLUSH_MS: '60000', SVC_HEALTH_CHECK_SECONDS: '3600' } });
  up = await startScriptedUpstream({ kind: 'ok' });
  for (const id of ['logs-a', 'logs-b']) {
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id,
      modality: 'llm',
      prices: { outputPicoPerToken: 1_000n },
      upstream: { url: up.url, protocol: 'openai' },
    });
  }
  await h.runtime.ctx.registry.refresh();
  const org = await createOrg(h.testDb.db, { name: 'the other org', creditsMicros: 10_000_000n });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'theirs' });
  Object.assign(other, { orgId: org.id, key: key.key, keyId: key.id });
  const mine2 = await createApiKey(h.testDb.db.prisma, { orgId: h.orgId, name: 'second' });
  Object.assign(second, { key: mine2.key, keyId: mine2.id });

  ids.mine.push(await chat(h.key, 'logs-a'), await chat(h.key, 'logs-b'), await chat(second.key, 'logs-a'));
  ids.failed = await chat(h.key, 'no-such-model');
  ids.mine.push(ids.failed);
  ids.theirs.push(await chat(other.key, 'logs-a'), await chat(other.key, 'logs-b'));
  await h.settled();
  await h.runtime.ctx.requestLog!.flush();

  const doc = (await (await fetch(`${h.url}/openapi.json`)).json()) as Record<string, unknown>;
  checker = openApiResponseChecker(doc);
}, 60_000);

afterAll(async () => {
  await up?.close();
  await h?.close();
});

async function chat(key: string, model: string): Promise<string> {
  const requestId = `logs-route-${++seq}-${Date.now()}`;
  const res = await fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  return requestId;
}

/** GET path with a key; the answer checked against the OpenAPI document. */
async function get(path: string, key = h.key) {
  const res = await fetch(`${h.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  const contentType = res.headers.get('content-type');
  let json: unknown;
  if (contentType?.startsWith('application/json')) json = JSON.parse(text);
  expect(checker.problems({ method: 'GET', path, status: res.status, contentType, json })).toEqual([]);
  return { status: res.status, json: json as Page & { error: { code: string; param: string | null } }, text, headers: res.headers };
}

const requestIds = (page: Page) => page.data.map((r) => r.request_id).sort();

describe('GET /v1/logs', () => {
  it("lists the key's org's rows only, newest first", async () => {
    const mine = await get('/v1/logs');
    expect(mine.status).toBe(200);
    expect(mine.json.object).toBe('list');
    expect(requestIds(mine.json)).toEqual([...ids.mine].sort());
    const times = mine.json.data.map((r) => (r as unknown as { created_at: string }).created_at);
    expect([...times].sort().reverse()).toEqual(times);
    const theirs = await get('/v1/logs', other.key);
    expect(requestIds(theirs.json)).toEqual([...ids.theirs].sort());
  });

  it("no filter reaches another org's rows: their key id, request id or model give nothing", async () => {
    expect((await get(`/v1/logs?key=${other.keyId}`)).json.data).toEqual([]);
    expect((await get(`/v1/logs?request_id=${ids.theirs[0]}`)).json.data).toEqual([]);
    const byModel = await get('/v1/logs?model=logs-b');
    expect(requestIds(byModel.json)).toEqual([ids.mine[1]]);
  });

  it('filters by key, model, route, status, kind, request id and time', async () => {
    expect(requestIds((await get(`/v1/logs?key=${second.keyId}`)).json)).toEqual([ids.mine[2]]);
    expect(requestIds((await get(`/v1/logs?key=${h.keyId}&model=logs-a`)).json)).toEqual([ids.mine[0]]);
    expect((await get('/v1/logs?route=%2Fv1%2Fchat%2Fcompletions')).json.data).toHaveLength(ids.mine.length);
    expect((await get('/v1/logs?route=%2Ftts%2Fbytes')).json.data).toEqual([]);
    expect(requestIds((await get('/v1/logs?status=error')).json)).toEqual([ids.failed]);
    expect(requestIds((await get('/v1/logs?status=404')).json)).toEqual([ids.failed]);
    expect((await get('/v1/logs?status=5xx')).json.data).toEqual([]);
    expect((await get('/v1/logs?status=ok')).json.data).toHaveLength(ids.mine.length - 1);
    expect((await get('/v1/logs?kind=session')).json.data).toEqual([]);
    expect(requestIds((await get(`/v1/logs?request_id=${ids.failed}`)).json)).toEqual([ids.failed]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await get(`/v1/logs?from=${future}`)).json.data).toEqual([]);
    expect((await get(`/v1/logs?to=${future}`)).json.data).toHaveLength(ids.mine.length);
  });

  it('pages with a cursor: every row once, none repeated', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Page = (await get(`/v1/logs?limit=1${cursor ? `&cursor=${cursor}` : ''}`)).json;
      expect(page.data).toHaveLength(1);
      seen.push(page.data[0]!.request_id);
      expect(page.has_more).toBe(page.next_cursor !== null);
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual([...ids.mine].sort());
  });

  it('400 invalid_request for a cursor it did not issue, a page over 200, an unknown filter or a bad time', async () => {
    for (const [query, param] of [
      ['cursor=not-a-cursor', 'cursor'],
      ['limit=201', 'limit'],
      ['colour=blue', 'colour'],
      ['from=yesterday', 'from'],
      ['status=7xx', 'status'],
    ] as const) {
      const res = await get(`/v1/logs?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error).toMatchObject({ code: 'invalid_request', param });
    }
  });

  it('401 without a key', async () => {
    const res = await fetch(`${h.url}/v1/logs`);
    expect(res.status).toBe(401);
  });

  it('exports JSON Lines and CSV of the filtered rows', async () => {
    const jsonl = await get('/v1/logs?format=jsonl&model=logs-a');
    expect(jsonl.status).toBe(200);
    expect(jsonl.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = jsonl.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Page['data'][number]);
    expect(lines.map((l) => l.request_id).sort()).toEqual([ids.mine[0], ids.mine[2]].sort());
    const csv = await get('/v1/logs?format=csv');
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.headers.get('content-disposition')).toBe('attachment; filename="svc-logs.csv"');
    expect(csv.text.startsWith(CSV_HEADER)).toBe(true);
    expect(csv.text.split('\r\n').filter(Boolean)).toHaveLength(1 + ids.mine.length);
    expect(csv.text).toContain(`,${ids.failed},`);
    expect(csv.text).not.toContain(ids.theirs[0]);
    // A page of 1 names the next page in its header.
    const first = await get('/v1/logs?format=csv&limit=1');
    expect(first.headers.get('x-svc-next-cursor')).toMatch(/^[A-Za-z0-9_-]+$/);
  });
});

describe('GET /v1/logs/:id', () => {
  it("answers the org's own row with its turns; another org's row is 404 as an unknown one is", async () => {
    const [row] = (await get(`/v1/logs?request_id=${ids.failed}`)).json.data;
    const one = await get(`/v1/logs/${row!.id}`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ id: row!.id, request_id: ids.failed, status: 404, error_code: 'model_not_found', turns: [] });
    const [theirs] = (await get(`/v1/logs?request_id=${ids.theirs[0]}`, other.key)).json.data;
    const refused = await get(`/v1/logs/${theirs!.id}`);
    expect(refused.status).toBe(404);
    expect(refused.json.error).toMatchObject({ code: 'not_found' });
    expect((await get('/v1/logs/log_unknown')).status).toBe(404);
  });
});
