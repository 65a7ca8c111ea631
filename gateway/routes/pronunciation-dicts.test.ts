// Route tests of /pronunciation-dicts over real HTTP (the real gateway runtime on a throw-away
// SQLite or PostgreSQL database): happy paths, every error in the envelope, isolation between
// two orgs on every route, the limits, and TTS reading a dictionary as it is after a PATCH or
// a DELETE (local flite engine, audio compared with what flite makes of the expected text).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import { MAX_DICTS_PER_ORG, MAX_ENTRIES_PER_DICT, MAX_ENTRIES_PER_ORG } from '../../server/services/dicts/dict-input.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { bytesOf, expectError, natural, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';

let h: GatewayHarness;
/** Keys of the harness org (A), another org (B), an org with no credit, and a fresh org per limit test. */
let keyA: string;
let keyB: string;
let keyBroke: string;

beforeAll(async () => {
  h = await startTtsGateway();
  keyA = h.key;
  const orgB = await createOrg(h.testDb.db, { name: 'org B', creditsMicros: 1_000_000n });
  keyB = (await createApiKey(h.testDb.db.prisma, { orgId: orgB.id, name: 'b', rateLimitRpm: 100_000 })).key;
  const broke = await createOrg(h.testDb.db, { name: 'broke org' });
  keyBroke = (await createApiKey(h.testDb.db.prisma, { orgId: broke.id, name: 'broke' })).key;
});

afterAll(async () => {
  await h?.close();
});

interface Req {
  body?: unknown;
  /** Sent as is (not JSON-encoded). */
  raw?: string;
  key?: string | null;
  headers?: Record<string, string>;
}

function call(method: string, path: string, r: Req = {}): Promise<Response> {
  const key = r.key === undefined ? keyA : r.key;
  const headers: Record<string, string> = { ...(key ? { authorization: `Bearer ${key}` } : {}) };
  let body: string | undefined;
  if (r.raw !== undefined) body = r.raw;
  else if (r.body !== undefined) body = JSON.stringify(r.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${h.url}${path}`, { method, headers: { ...headers, ...r.headers }, body });
}

async function json<T = Record<string, unknown>>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect(res.status, text.slice(0, 500)).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return JSON.parse(text) as T;
}

interface Entry {
  grapheme: string;
  alias: string | null;
  phoneme: string | null;
  case_sensitive: boolean;
}
interface Dict {
  id: string;
  name: string;
  entry_count: number;
  created_at: string;
  updated_at: string;
  entries: Entry[];
}

async function create(body: unknown, key = keyA): Promise<Dict> {
  return json<Dict>(await call('POST', '/pronunciation-dicts', { body, key }), 201);
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const E = (status: number, code: string, param: string | null = null) => ({ status, code, param });

describe('happy paths', () => {
  it('creates a dictionary: 201 with the full record, entries in the order given', async () => {
    const d = await create({
      name: '  Tech terms  ',
      entries: [
        { grapheme: 'SQL', alias: 'sequel' },
        { grapheme: ' GIF ', phoneme: " dZ'If ", case_sensitive: true },
        { grapheme: 'café', alias: 'coffee 😀', phoneme: null },
      ],
    });
    expect(d.id).toMatch(/^pdict_[a-z0-9]{20}$/);
    expect(d).toEqual({
      id: d.id,
      name: 'Tech terms',
      entry_count: 3,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
      entries: [
        { grapheme: 'SQL', alias: 'sequel', phoneme: null, case_sensitive: false },
        { grapheme: 'GIF', alias: null, phoneme: "dZ'If", case_sensitive: true },
        { grapheme: 'café', alias: 'coffee 😀', phoneme: null, case_sensitive: false },
      ],
    });
    expect(Date.now() - Date.parse(d.created_at)).toBeLessThan(60_000);
    expect(await json(await call('GET', `/pronunciation-dicts/${d.id}`), 200)).toEqual(d);
  });

  it('entries may be omitted (an empty dictionary)', async () => {
    const d = await create({ name: 'empty' });
    expect(d).toMatchObject({ name: 'empty', entry_count: 0, entries: [] });
  });

  it('lists the org\u2019s dictionaries without entries, newest first', async () => {
    const older = await create({ name: 'older', entries: [{ grapheme: 'a', alias: 'b' }] });
    await new Promise((r) => setTimeout(r, 5));
    const newer = await create({ name: 'newer' });
    const { dicts } = await json<{ dicts: Record<string, unknown>[] }>(await call('GET', '/pronunciation-dicts'), 200);
    const ids = dicts.map((d) => d.id);
    expect(ids.indexOf(newer.id)).toBeLessThan(ids.indexOf(older.id));
    expect(dicts.find((d) => d.id === older.id)).toEqual({
      id: older.id,
      name: 'older',
      entry_count: 1,
      created_at: older.created_at,
      updated_at: older.updated_at,
    });
    for (const d of dicts) expect(Object.keys(d).sort()).toEqual(['created_at', 'entry_count', 'id', 'name', 'updated_at']);
  });

  it('PATCH renames and keeps the entries; PATCH entries replaces them all and keeps the name', async () => {
    const d = await create({
      name: 'v1',
      entries: [
        { grapheme: 'one', alias: '1' },
        { grapheme: 'two', alias: '2' },
      ],
    });
    await new Promise((r) => setTimeout(r, 5));
    const renamed = await json<Dict>(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { name: 'v2' } }), 200);
    expect(renamed).toMatchObject({ id: d.id, name: 'v2', entry_count: 2, entries: d.entries, created_at: d.created_at });
    expect(Date.parse(renamed.updated_at)).toBeGreaterThan(Date.parse(d.updated_at));

    const replaced = await json<Dict>(
      await call('PATCH', `/pronunciation-dicts/${d.id}`, {
        body: {
          entries: [
            { grapheme: 'three', phoneme: 'Tri:' },
            { grapheme: 'one', alias: 'uno' },
          ],
        },
      }),
      200,
    );
    expect(replaced).toMatchObject({
      name: 'v2',
      entry_count: 2,
      entries: [
        { grapheme: 'three', alias: null, phoneme: 'Tri:', case_sensitive: false },
        { grapheme: 'one', alias: 'uno', phoneme: null, case_sensitive: false },
      ],
    });
    expect(await json(await call('GET', `/pronunciation-dicts/${d.id}`), 200)).toEqual(replaced);

    const both = await json<Dict>(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { name: 'v3', entries: [] } }), 200);
    expect(both).toMatchObject({ name: 'v3', entry_count: 0, entries: [] });
    // Only this dictionary's entries were replaced: the database holds none left over.
    expect(await h.testDb.db.prisma.pronunciationEntry.count({ where: { dictId: d.id } })).toBe(0);
  });

  it('DELETE soft-deletes: {id, deleted:true}, then 404 on every route and gone from the list', async () => {
    const d = await create({ name: 'doomed', entries: [{ grapheme: 'x', alias: 'y' }] });
    expect(await json(await call('DELETE', `/pronunciation-dicts/${d.id}`), 200)).toEqual({ id: d.id, deleted: true });
    for (const [method, body] of [['GET'], ['PATCH', { name: 'back' }], ['DELETE']] as const) {
      await expectError(await call(method, `/pronunciation-dicts/${d.id}`, { body }), E(404, 'dict_not_found'));
    }
    const { dicts } = await json<{ dicts: { id: string }[] }>(await call('GET', '/pronunciation-dicts'), 200);
    expect(dicts.map((x) => x.id)).not.toContain(d.id);
    // Soft: the row is still there, marked.
    expect((await h.testDb.db.prisma.pronunciationDict.findUniqueOrThrow({ where: { id: d.id } })).deletedAt).not.toBeNull();
  });

  it('a full dictionary of large entries fits in one request (over the gateway\u2019s default 1 MB body cap)', async () => {
    // 10,000 entries at every per-entry maximum would be ~23 MB; the 8 MB body cap leaves ~800 bytes an entry.
    const entries = Array.from({ length: MAX_ENTRIES_PER_DICT }, (_, i) => ({
      grapheme: `${i}`.padEnd(100, 'g'),
      alias: 'é'.repeat(300),
      case_sensitive: i % 2 === 0,
    }));
    const body = JSON.stringify({ name: 'n'.repeat(100), entries });
    expect(Buffer.byteLength(body)).toBeGreaterThan(7 * 1024 * 1024);
    expect(Buffer.byteLength(body)).toBeLessThan(8 * 1024 * 1024);
    const d = await json<Dict>(await call('POST', '/pronunciation-dicts', { raw: body }), 201);
    expect(d.entry_count).toBe(MAX_ENTRIES_PER_DICT);
    const last = MAX_ENTRIES_PER_DICT - 1;
    expect(d.entries[last]).toEqual({ grapheme: entries[last]!.grapheme, alias: entries[last]!.alias, phoneme: null, case_sensitive: last % 2 === 0 });
    await json(await call('DELETE', `/pronunciation-dicts/${d.id}`), 200);
  });

  it('lengths count characters (code points), not UTF-16 units', async () => {
    const d = await create({ name: '😀'.repeat(100), entries: [{ grapheme: '😀'.repeat(200), alias: '😀'.repeat(1000) }] });
    expect([...d.name]).toHaveLength(100);
    await expectError(await call('POST', '/pronunciation-dicts', { body: { name: '😀'.repeat(101) } }), E(400, 'invalid_request', 'name'));
  });
});

describe('errors', () => {
  const valid = (over: Record<string, unknown> = {}) => ({ grapheme: 'SQL', alias: 'sequel', ...over });
  const cases: [string, unknown, ReturnType<typeof E>][] = [
    ['name missing', { entries: [] }, E(400, 'invalid_request', 'name')],
    ['name empty', { name: '' }, E(400, 'invalid_request', 'name')],
    ['name only spaces', { name: '   ' }, E(400, 'invalid_request', 'name')],
    ['name of 101 characters', { name: 'n'.repeat(101) }, E(400, 'invalid_request', 'name')],
    ['name a number', { name: 42 }, E(400, 'invalid_request', 'name')],
    ['name with a newline', { name: 'a\nb' }, E(400, 'invalid_request', 'name')],
    ['name with NUL', { name: 'a\u0000b' }, E(400, 'invalid_request', 'name')],
    ['entries not an array', { name: 'n', entries: { grapheme: 'a', alias: 'b' } }, E(400, 'invalid_request', 'entries')],
    ['an entry not an object', { name: 'n', entries: ['SQL=sequel'] }, E(400, 'invalid_request', 'entries[0]')],
    ['both alias and phoneme', { name: 'n', entries: [valid({ phoneme: 'si:kw@l' })] }, E(400, 'invalid_request', 'entries[0].phoneme')],
    ['neither alias nor phoneme', { name: 'n', entries: [{ grapheme: 'SQL' }] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['neither (both null)', { name: 'n', entries: [{ grapheme: 'SQL', alias: null, phoneme: null }] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['grapheme missing', { name: 'n', entries: [{ alias: 'x' }] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['grapheme empty', { name: 'n', entries: [valid({ grapheme: '' })] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['grapheme only spaces', { name: 'n', entries: [valid({ grapheme: '  ' })] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['grapheme of 201 characters', { name: 'n', entries: [valid({ grapheme: 'g'.repeat(201) })] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['grapheme a number', { name: 'n', entries: [valid({ grapheme: 7 })] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['grapheme with a tab', { name: 'n', entries: [valid({ grapheme: 'a\tb' })] }, E(400, 'invalid_request', 'entries[0].grapheme')],
    ['alias empty', { name: 'n', entries: [valid({ alias: '' })] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['alias only spaces', { name: 'n', entries: [valid({ alias: '   ' })] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['alias of 1001 characters', { name: 'n', entries: [valid({ alias: 'a'.repeat(1001) })] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['alias an object', { name: 'n', entries: [valid({ alias: { text: 'x' } })] }, E(400, 'invalid_request', 'entries[0].alias')],
    ['phoneme with brackets', { name: 'n', entries: [{ grapheme: 'x', phoneme: 'a]]b' }] }, E(400, 'invalid_request', 'entries[0].phoneme')],
    ['phoneme in IPA', { name: 'n', entries: [{ grapheme: 'x', phoneme: 'ˈhɛloʊ' }] }, E(400, 'invalid_request', 'entries[0].phoneme')],
    ['phoneme of 1001 characters', { name: 'n', entries: [{ grapheme: 'x', phoneme: 'a'.repeat(1001) }] }, E(400, 'invalid_request', 'entries[0].phoneme')],
    ['case_sensitive a string', { name: 'n', entries: [valid({ case_sensitive: 'yes' })] }, E(400, 'invalid_request', 'entries[0].case_sensitive')],
    ['an unknown field', { name: 'n', entires: [] }, E(400, 'invalid_request', 'entires')],
    ['an unknown entry field', { name: 'n', entries: [valid({ sounds_like: 'x' })] }, E(400, 'invalid_request', 'entries[0].sounds_like')],
    [
      'the same grapheme twice, ignoring case',
      { name: 'n', entries: [valid(), valid({ grapheme: 'sql', alias: 'S Q L' })] },
      E(400, 'invalid_request', 'entries[1].grapheme'),
    ],
    [
      'the fourth entry bad (the spec\u2019s param example)',
      { name: 'n', entries: [valid({ grapheme: 'a' }), valid({ grapheme: 'b' }), valid({ grapheme: 'c' }), valid({ grapheme: 'd', alias: '' })] },
      E(400, 'invalid_request', 'entries[3].alias'),
    ],
    [
      'too many entries',
      { name: 'n', entries: Array.from({ length: MAX_ENTRIES_PER_DICT + 1 }, (_, i) => valid({ grapheme: `w${i}` })) },
      E(400, 'invalid_request', 'entries'),
    ],
  ];

  it.each(cases)('POST: %s', async (_label, body, expected) => {
    const err = await expectError(await call('POST', '/pronunciation-dicts', { body }), expected);
    if (expected.param) expect(err.message.startsWith(`${expected.param}: `)).toBe(true);
    expect(err.type).toBe('invalid_request_error');
  });

  it.each(cases.filter(([label]) => !label.startsWith('name missing')))('PATCH: %s', async (_label, body, expected) => {
    const d = await create({ name: 'target' });
    await expectError(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body }), expected);
  });

  it('messages tell a missing field from one of the wrong type', async () => {
    expect((await expectError(await call('POST', '/pronunciation-dicts', { body: {} }), E(400, 'invalid_request', 'name'))).message).toBe('name: is required');
    expect((await expectError(await call('POST', '/pronunciation-dicts', { body: { name: 1 } }), E(400, 'invalid_request', 'name'))).message).toBe(
      'name: must be a string',
    );
    const neither = await expectError(
      await call('POST', '/pronunciation-dicts', { body: { name: 'n', entries: [{ grapheme: 'x' }] } }),
      E(400, 'invalid_request', 'entries[0].alias'),
    );
    expect(neither.message).toBe('entries[0].alias: give an alias (replacement text) or a phoneme');
  });

  it('a lone surrogate (from \\ud800 in the JSON) is refused, not stored altered', async () => {
    const raw = '{"name":"n","entries":[{"grapheme":"a\\ud800","alias":"b"}]}';
    await expectError(await call('POST', '/pronunciation-dicts', { raw }), E(400, 'invalid_request', 'entries[0].grapheme'));
  });

  it.each([
    ['not JSON', 'name=x', E(400, 'invalid_json')],
    ['truncated JSON', '{"name":"x"', E(400, 'invalid_json')],
    ['an empty body', '', E(400, 'invalid_json')],
    ['an array', '[{"name":"x"}]', E(400, 'invalid_json')],
    ['null', 'null', E(400, 'invalid_json')],
    ['a string', '"x"', E(400, 'invalid_json')],
    ['a prototype-poisoning key', '{"name":"x","__proto__":{"a":1}}', E(400, 'invalid_json')],
  ])('POST and PATCH with %s -> invalid_json', async (_label, raw, expected) => {
    await expectError(await call('POST', '/pronunciation-dicts', { raw }), expected);
    const d = await create({ name: 'target' });
    await expectError(await call('PATCH', `/pronunciation-dicts/${d.id}`, { raw }), expected);
  });

  it('a text/plain body is not a JSON object -> invalid_json', async () => {
    await expectError(await call('POST', '/pronunciation-dicts', { raw: '{"name":"x"}', headers: { 'content-type': 'text/plain' } }), E(400, 'invalid_json'));
  });

  it('an unknown content type -> 415 unsupported_media_type', async () => {
    await expectError(
      await call('POST', '/pronunciation-dicts', { raw: '<dict/>', headers: { 'content-type': 'application/xml' } }),
      E(415, 'unsupported_media_type'),
    );
  });

  it('a body over 8 MB -> 413 body_too_large', async () => {
    const raw = JSON.stringify({ name: 'n', entries: [{ grapheme: 'a', alias: 'b'.repeat(8 * 1024 * 1024) }] });
    await expectError(await call('POST', '/pronunciation-dicts', { raw }), E(413, 'body_too_large'));
  });

  it('PATCH with nothing to change -> 400', async () => {
    const d = await create({ name: 'target' });
    await expectError(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: {} }), E(400, 'invalid_request', null));
  });

  it.each([
    ['GET', undefined],
    ['PATCH', { name: 'x' }],
    ['DELETE', undefined],
  ] as const)('%s of an unknown id -> 404 dict_not_found', async (method, body) => {
    const err = await expectError(await call(method, '/pronunciation-dicts/pdict_doesnotexist', { body }), E(404, 'dict_not_found'));
    expect(err.message).toContain('pdict_doesnotexist');
  });

  it('a very long id is 404 in the envelope too, and not echoed in full', async () => {
    await expectError(await call('GET', `/pronunciation-dicts/${'x'.repeat(100)}`), E(404, 'dict_not_found'));
    // Past the router's 100-character cap on a path parameter: not_found before any lookup.
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const err = await expectError(await call(method, `/pronunciation-dicts/${'x'.repeat(5000)}`), E(404, 'not_found'));
      expect(err.message.length).toBeLessThan(300);
    }
  });

  it('wrong methods -> 405 with Allow', async () => {
    const item = await call('PUT', '/pronunciation-dicts/pdict_x', { body: { name: 'x' } });
    expect(item.headers.get('allow')).toBe('GET, PATCH, DELETE');
    await expectError(item, E(405, 'method_not_allowed'));
    const collection = await call('DELETE', '/pronunciation-dicts');
    expect(collection.headers.get('allow')).toMatch(/GET.*POST/);
    await expectError(collection, E(405, 'method_not_allowed'));
  });

  const everyRoute = (id: string): [string, string, unknown][] => [
    ['GET', '/pronunciation-dicts', undefined],
    ['POST', '/pronunciation-dicts', { name: 'x' }],
    ['GET', `/pronunciation-dicts/${id}`, undefined],
    ['PATCH', `/pronunciation-dicts/${id}`, { name: 'x' }],
    ['DELETE', `/pronunciation-dicts/${id}`, undefined],
  ];

  it('every route: no key -> 401 invalid_api_key, unknown key -> 401 invalid_api_key', async () => {
    const d = await create({ name: 'guarded' });
    for (const [method, path, body] of everyRoute(d.id)) {
      await expectError(await call(method, path, { body, key: null }), E(401, 'invalid_api_key'));
      await expectError(await call(method, path, { body, key: `sk_svc_${'A'.repeat(43)}` }), E(401, 'invalid_api_key'));
    }
    expect((await json<Dict>(await call('GET', `/pronunciation-dicts/${d.id}`), 200)).name).toBe('guarded');
  });

  it('every route: an org with no credit -> 402 insufficient_quota (admitted only with a balance, never debited)', async () => {
    for (const [method, path, body] of everyRoute('pdict_x')) {
      await expectError(await call(method, path, { body, key: keyBroke }), { ...E(402, 'insufficient_quota'), type: 'insufficient_quota' });
    }
    const before = await h.balanceMicros();
    await json(await call('GET', '/pronunciation-dicts'), 200);
    await create({ name: 'free' });
    expect(await h.balanceMicros()).toBe(before);
  });

  it('over the key\u2019s rate limit -> 429 rate_limit_exceeded with Retry-After', async () => {
    const org = await createOrg(h.testDb.db, { name: 'limited', creditsMicros: 1_000_000n });
    const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'l', rateLimitRpm: 1 })).key;
    // One request per clock minute: of three in a row, at most two fall in different minutes.
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 3 && !limited; i++) {
      const res = await call('GET', '/pronunciation-dicts', { key });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
      else await res.arrayBuffer();
    }
    expect(limited, `statuses ${statuses.join(',')}`).toBeDefined();
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await expectError(limited!, { ...E(429, 'rate_limit_exceeded'), type: 'rate_limit_error' });
  });
});

describe('isolation between orgs', () => {
  it('another org\u2019s dictionary is indistinguishable from a missing one on every route, and is left untouched', async () => {
    const mine = await create({ name: 'A private', entries: [{ grapheme: 'fox', alias: 'wolf' }] });
    const missing = `pdict_${'0'.repeat(20)}`;
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'stolen', entries: [] }],
      ['DELETE', undefined],
    ] as const) {
      const theirs = await call(method, `/pronunciation-dicts/${mine.id}`, { body, key: keyB });
      const none = await call(method, `/pronunciation-dicts/${missing}`, { body, key: keyB });
      const a = await expectError(theirs, E(404, 'dict_not_found'));
      const b = await expectError(none, E(404, 'dict_not_found'));
      expect(a.message.replace(mine.id, '<id>')).toBe(b.message.replace(missing, '<id>'));
      expect(a.type).toBe(b.type);
    }
    const { dicts } = await json<{ dicts: { id: string }[] }>(await call('GET', '/pronunciation-dicts', { key: keyB }), 200);
    expect(dicts.map((d) => d.id)).not.toContain(mine.id);
    expect(await json(await call('GET', `/pronunciation-dicts/${mine.id}`), 200)).toEqual(mine);
  });

  it('each org lists only its own; B\u2019s dictionary is as invisible to A', async () => {
    const theirs = await create({ name: 'B private' }, keyB);
    const { dicts: listB } = await json<{ dicts: { id: string }[] }>(await call('GET', '/pronunciation-dicts', { key: keyB }), 200);
    expect(listB.map((d) => d.id)).toContain(theirs.id);
    const { dicts: listA } = await json<{ dicts: { id: string }[] }>(await call('GET', '/pronunciation-dicts'), 200);
    expect(listA.map((d) => d.id)).not.toContain(theirs.id);
    await expectError(await call('GET', `/pronunciation-dicts/${theirs.id}`), E(404, 'dict_not_found'));
  });
});

describe('org limits', () => {
  async function freshOrg() {
    const org = await createOrg(h.testDb.db, { name: 'limits', creditsMicros: 1_000_000n });
    const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k', rateLimitRpm: 100_000 })).key;
    return { orgId: org.id, key };
  }

  it(`at ${MAX_DICTS_PER_ORG} live dictionaries, creating one more is refused; deleting one makes room`, async () => {
    const { orgId, key } = await freshOrg();
    const ids = Array.from({ length: MAX_DICTS_PER_ORG }, () => newId('pdict'));
    await h.testDb.db.prisma.pronunciationDict.createMany({ data: ids.map((id) => ({ id, orgId, name: 'filler' })) });
    const err = await expectError(await call('POST', '/pronunciation-dicts', { body: { name: 'one too many' }, key }), E(400, 'invalid_request', null));
    expect(err.message).toContain(String(MAX_DICTS_PER_ORG));
    await json(await call('DELETE', `/pronunciation-dicts/${ids[0]}`, { key }), 200);
    await create({ name: 'fits now' }, key);
  });

  it(`the org's dictionaries hold at most ${MAX_ENTRIES_PER_ORG} entries in all`, async () => {
    const { orgId, key } = await freshOrg();
    const prisma = h.testDb.db.prisma;
    const filler = newId('pdict');
    await prisma.pronunciationDict.create({ data: { id: filler, orgId, name: 'filler' } });
    // One INSERT ... SELECT of MAX_ENTRIES_PER_ORG - 1 rows: through the client this takes
    // tens of seconds on a busy PostgreSQL.
    const last = MAX_ENTRIES_PER_ORG - 2;
    const numbers =
      h.testDb.dialect === 'postgresql'
        ? `SELECT g FROM generate_series(0, ${last}) AS g`
        : `WITH RECURSIVE n(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM n WHERE g < ${last}) SELECT g FROM n`;
    await prisma.$executeRawUnsafe(
      `INSERT INTO "PronunciationEntry" ("id", "dictId", "position", "grapheme", "alias", "caseSensitive") SELECT 'pent_filler_' || g, ${h.testDb.dialect === 'postgresql' ? '$1' : '?'}, g, 'g' || g, 'a', false FROM (${numbers}) AS numbers`,
      filler,
    );
    expect(await prisma.pronunciationEntry.count({ where: { dictId: filler } })).toBe(MAX_ENTRIES_PER_ORG - 1);
    const two = [
      { grapheme: 'a', alias: 'b' },
      { grapheme: 'c', alias: 'd' },
    ];
    await expectError(await call('POST', '/pronunciation-dicts', { body: { name: 'over', entries: two }, key }), E(400, 'invalid_request', 'entries'));
    const d = await create({ name: 'exactly at the cap', entries: two.slice(0, 1) }, key);
    // Replacing its one entry with one is fine (its own entries do not count twice); two are not.
    await json(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { entries: [{ grapheme: 'x', alias: 'y' }] }, key }), 200);
    await expectError(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { entries: two }, key }), E(400, 'invalid_request', 'entries'));
    // A deleted dictionary's entries no longer count.
    await json(await call('DELETE', `/pronunciation-dicts/${filler}`, { key }), 200);
    await json(await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { entries: two }, key }), 200);
  });
});

describe('TTS reads the dictionary as it is now', () => {
  const NASA = 'NASA launched it.';
  const raw16k = { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' };
  const samplesOf = async (res: Response) => {
    expect(res.status, res.status === 200 ? '' : await res.clone().text()).toBe(200);
    return (await bytesOf(res)).length / 2;
  };
  const speak = (dictId: string, key = keyA) =>
    call('POST', '/tts/bytes', { body: ttsBody({ transcript: NASA, output_format: raw16k, pronunciation_dict_id: dictId }), key });

  it('POST, then PATCH the alias: the next synthesis says the new alias; after DELETE it is 404 dict_not_found', async () => {
    const d = await create({ name: 'space', entries: [{ grapheme: 'nasa', alias: 'the agency' }] });
    expect(await samplesOf(await speak(d.id))).toBe(natural('flite', 'slt', 'the agency launched it.').samples.length);

    await json(
      await call('PATCH', `/pronunciation-dicts/${d.id}`, {
        body: { entries: [{ grapheme: 'nasa', alias: 'National Aeronautics and Space Administration' }] },
      }),
      200,
    );
    expect(await samplesOf(await speak(d.id))).toBe(natural('flite', 'slt', 'National Aeronautics and Space Administration launched it.').samples.length);

    // case_sensitive set through the API: "nasa" no longer matches "NASA".
    await json(
      await call('PATCH', `/pronunciation-dicts/${d.id}`, { body: { entries: [{ grapheme: 'nasa', alias: 'the agency', case_sensitive: true }] } }),
      200,
    );
    expect(await samplesOf(await speak(d.id))).toBe(natural('flite', 'slt', NASA).samples.length);

    await expectError(await speak(d.id, keyB), E(404, 'dict_not_found', 'pronunciation_dict_id'));
    await json(await call('DELETE', `/pronunciation-dicts/${d.id}`), 200);
    await expectError(await speak(d.id), E(404, 'dict_not_found', 'pronunciation_dict_id'));
  });

  it(`a full dictionary (${MAX_ENTRIES_PER_DICT} entries) applies its last entry like its first`, async () => {
    const entries = Array.from({ length: MAX_ENTRIES_PER_DICT - 1 }, (_, i) => ({ grapheme: `launch${i}`, alias: 'x' }));
    const d = await create({ name: 'full', entries: [...entries, { grapheme: 'nasa', alias: 'the agency' }] });
    expect(d.entry_count).toBe(MAX_ENTRIES_PER_DICT);
    expect(await samplesOf(await speak(d.id))).toBe(natural('flite', 'slt', 'the agency launched it.').samples.length);
  });
});
