import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getDict } from '../../services/dicts/get-dict.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  h = await createApiHarness();
  alice = await h.signUpUser('alice@example.com');
  bob = await h.signUpUser('bob@example.com');
});
afterAll(async () => {
  await h?.drop();
});

const entry = (grapheme: string, alias: string) => ({ grapheme, alias, case_sensitive: false });

describe('dicts: happy path', () => {
  it('creates, lists, gets, edits and deletes a dictionary', async () => {
    const created = await alice.caller.dicts.create({
      name: ' Brands ',
      entries: [entry('SQL', 'sequel'), { grapheme: 'GIF', phoneme: "dZ'If", case_sensitive: true }],
    });
    expect(created).toMatchObject({
      name: 'Brands',
      entry_count: 2,
      entries: [
        { grapheme: 'SQL', alias: 'sequel', phoneme: null, case_sensitive: false },
        { grapheme: 'GIF', alias: null, phoneme: "dZ'If", case_sensitive: true },
      ],
    });
    expect(await alice.caller.dicts.get({ id: created.id })).toEqual(created);
    const listed = await alice.caller.dicts.list();
    expect(listed).toContainEqual({ id: created.id, name: 'Brands', entry_count: 2, created_at: created.created_at, updated_at: created.updated_at });

    const edited = await alice.caller.dicts.update({ id: created.id, entries: [entry('SQL', 'S Q L'), entry('NASA', 'nasa')] });
    expect(edited.entries.map((e) => [e.grapheme, e.alias])).toEqual([
      ['SQL', 'S Q L'],
      ['NASA', 'nasa'],
    ]);
    expect(edited.name).toBe('Brands');
    // What the API reads is what the dashboard saved.
    expect(
      (await getDict(h.db.prisma, { orgId: alice.orgId, dictId: created.id })).entries.map((e) => [e.grapheme, e.alias, e.phoneme, e.case_sensitive]),
    ).toEqual([
      ['SQL', 'S Q L', null, false],
      ['NASA', 'nasa', null, false],
    ]);
    expect((await alice.caller.dicts.update({ id: created.id, name: 'Renamed' })).name).toBe('Renamed');

    await expect(alice.caller.dicts.delete({ id: created.id })).resolves.toEqual({ id: created.id, deleted: true });
    expect((await alice.caller.dicts.list()).map((d) => d.id)).not.toContain(created.id);
    await expect(getDict(h.db.prisma, { orgId: alice.orgId, dictId: created.id })).rejects.toMatchObject({ code: 'dict_not_found' });
  });
});

describe('dicts: errors', () => {
  it('names the bad field, with the same rules as the API', async () => {
    await expect(alice.caller.dicts.create({ name: 'x', entries: [{ grapheme: 'a', alias: 'b', phoneme: 'c', case_sensitive: false }] })).rejects.toMatchObject(
      {
        code: 'BAD_REQUEST',
        message: 'entries[0].phoneme: give either alias or phoneme, not both',
      },
    );
    await expect(
      alice.caller.dicts.create({ name: 'x', entries: [entry('a', 'b'), entry('c', 'd'), { grapheme: ' ', alias: 'e', case_sensitive: false }] }),
    ).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/^entries\[2\]\.grapheme: /),
    });
    await expect(alice.caller.dicts.create({ name: '', entries: [] })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/^name: /),
    });
    const d = await alice.caller.dicts.create({ name: 'target', entries: [] });
    await expect(alice.caller.dicts.update({ id: d.id })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'Give name, entries or both.' });
    await expect(alice.caller.dicts.update({ id: d.id, entries: [entry('A', 'x'), entry('a', 'y')] })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/^entries\[1\]\.grapheme: same grapheme/),
    });
    // Input the types forbid still arrives from a browser: it is refused, not trusted.
    await expect(alice.caller.dicts.update({ id: d.id, entries: 'all' } as never)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'entries: must be an array',
    });
    await expect(alice.caller.dicts.get({ id: '' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('answers NOT_FOUND for an unknown or deleted id', async () => {
    await expect(alice.caller.dicts.get({ id: 'pdict_nope' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.dicts.update({ id: 'pdict_nope', name: 'x' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const d = await alice.caller.dicts.create({ name: 'once', entries: [] });
    await alice.caller.dicts.delete({ id: d.id });
    await expect(alice.caller.dicts.delete({ id: d.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('requires a session', async () => {
    const anonymous = h.callerFor(null);
    await expect(anonymous.dicts.list()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.dicts.create({ name: 'x', entries: [] })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.dicts.delete({ id: 'pdict_x' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});

describe('dicts: other orgs', () => {
  it('another org\u2019s dictionary is NOT_FOUND on every procedure, unlisted, and left untouched', async () => {
    const mine = await alice.caller.dicts.create({ name: 'alice only', entries: [entry('fox', 'wolf')] });
    await expect(bob.caller.dicts.get({ id: mine.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(bob.caller.dicts.update({ id: mine.id, name: 'stolen', entries: [] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(bob.caller.dicts.delete({ id: mine.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await bob.caller.dicts.list()).map((d) => d.id)).not.toContain(mine.id);
    expect(await alice.caller.dicts.get({ id: mine.id })).toEqual(mine);
  });

  it('asking to act for an org the user is not a member of does not reach its dictionaries', async () => {
    const mine = await alice.caller.dicts.create({ name: 'alice again', entries: [] });
    const bobAsAlice = h.callerFor(bob.user, alice.orgId);
    await expect(bobAsAlice.dicts.get({ id: mine.id })).rejects.toMatchObject({ code: expect.stringMatching(/^(NOT_FOUND|FORBIDDEN)$/) });
    const listed = await bobAsAlice.dicts.list().catch(() => []);
    expect(listed.map((d) => d.id)).not.toContain(mine.id);
  });
});
