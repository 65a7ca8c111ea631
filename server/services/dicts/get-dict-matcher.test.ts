// The compiled-dictionary cache on a real database (SQLite, or PostgreSQL with
// TEST_DB=postgresql): repeated requests share one compiled dictionary, every edit of the
// entries is seen by the next request however quickly it follows, and the org and deletion
// checks are made on every request, cached or not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { createOrg } from '../orgs/create-org.ts';
import { applyPronunciation, compilePronunciation, type CompiledPronunciation } from './apply-pronunciation.ts';
import { createDict } from './create-dict.ts';
import { deleteDict } from './delete-dict.ts';
import type { DictEntryInput } from './dict-input.ts';
import { DictMatcherCache, getDictMatcher } from './get-dict-matcher.ts';
import { updateDict } from './update-dict.ts';

let t: TestDatabase;
let orgId: string;
let otherOrgId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  orgId = (await createOrg(t.db, { name: 'dicts', creditsMicros: 0n })).id;
  otherOrgId = (await createOrg(t.db, { name: 'other', creditsMicros: 0n })).id;
});
afterAll(async () => t?.drop());

const alias = (grapheme: string, a: string): DictEntryInput => ({ grapheme, alias: a, phoneme: null, case_sensitive: false });
const create = async (entries: DictEntryInput[]) => (await createDict(t.db.prisma, { orgId, dict: { name: 'd', entries } })).id;
const matcher = (dictId: string, cache: DictMatcherCache, org = orgId) => getDictMatcher(t.db.prisma, { orgId: org, dictId }, cache);
const say = (dict: CompiledPronunciation, text: string) => applyPronunciation(text, dict, null);

describe('getDictMatcher', () => {
  it('compiles a dictionary once and serves it again while its entries are unchanged (a rename included)', async () => {
    const cache = new DictMatcherCache();
    const id = await create([alias('SQL', 'sequel')]);
    const first = await matcher(id, cache);
    expect(say(first, 'SQL rocks')).toBe('sequel rocks');
    expect(await matcher(id, cache)).toBe(first);
    await updateDict(t.db.prisma, { orgId, dictId: id, update: { name: 'renamed' } });
    expect(await matcher(id, cache)).toBe(first);
    expect(cache.size).toBe(1);
  });

  it('sees every replacement of the entries at once, however close together (same millisecond included)', async () => {
    const cache = new DictMatcherCache();
    const id = await create([alias('SQL', 'v0')]);
    expect(say(await matcher(id, cache), 'SQL')).toBe('v0');
    for (let v = 1; v <= 6; v++) {
      await updateDict(t.db.prisma, { orgId, dictId: id, update: { entries: [alias('SQL', `v${v}`)] } });
      expect(say(await matcher(id, cache), 'SQL')).toBe(`v${v}`);
    }
    // Emptied, then filled again.
    await updateDict(t.db.prisma, { orgId, dictId: id, update: { entries: [] } });
    expect(say(await matcher(id, cache), 'SQL')).toBe('SQL');
    await updateDict(t.db.prisma, { orgId, dictId: id, update: { entries: [alias('SQL', 'back')] } });
    expect(say(await matcher(id, cache), 'SQL')).toBe('back');
    expect(cache.size).toBe(1);
  });

  it('answers dict_not_found for another org and after deletion, even when cached', async () => {
    const cache = new DictMatcherCache();
    const id = await create([alias('SQL', 'sequel')]);
    await matcher(id, cache);
    const notFound = { code: 'dict_not_found', param: 'pronunciation_dict_id' };
    await expect(matcher(id, cache, otherOrgId)).rejects.toMatchObject(notFound);
    await expect(matcher('pdict_nope', cache)).rejects.toMatchObject(notFound);
    await deleteDict(t.db.prisma, { orgId, dictId: id });
    await expect(matcher(id, cache)).rejects.toMatchObject(notFound);
  });

  it('uses the process-wide cache by default', async () => {
    const id = await create([alias('gif', 'jif')]);
    const first = await getDictMatcher(t.db.prisma, { orgId, dictId: id });
    expect(await getDictMatcher(t.db.prisma, { orgId, dictId: id })).toBe(first);
  });
});

describe('DictMatcherCache', () => {
  const compiled = (size: number) =>
    compilePronunciation(Array.from({ length: size }, (_, i) => ({ grapheme: `w${i}`, alias: 'x', phoneme: null, caseSensitive: false })));

  it('forgets the least recently used dictionary beyond its count', () => {
    const cache = new DictMatcherCache(2);
    const [a, b, c] = [compiled(1), compiled(1), compiled(1)];
    cache.set('a', '1', a);
    cache.set('b', '1', b);
    expect(cache.get('a', '1')).toBe(a);
    cache.set('c', '1', c);
    expect(cache.get('b', '1')).toBeUndefined();
    expect(cache.get('a', '1')).toBe(a);
    expect(cache.get('c', '1')).toBe(c);
  });

  it('holds one version per dictionary and answers only for that version', () => {
    const cache = new DictMatcherCache();
    cache.set('a', 'v1', compiled(1));
    const v2 = compiled(2);
    cache.set('a', 'v2', v2);
    expect(cache.size).toBe(1);
    expect(cache.get('a', 'v1')).toBeUndefined();
    expect(cache.get('a', 'v2')).toBe(v2);
  });

  it('keeps its total weight within bounds and never holds a dictionary heavier than all of it', () => {
    const one = compiled(10);
    const cache = new DictMatcherCache(100, one.weight * 2);
    cache.set('a', '1', one);
    cache.set('b', '1', compiled(10));
    cache.set('c', '1', compiled(10));
    expect(cache.size).toBe(2);
    expect(cache.get('a', '1')).toBeUndefined();
    cache.set('huge', '1', compiled(30));
    expect(cache.get('huge', '1')).toBeUndefined();
    expect(cache.size).toBe(2);
  });
});
