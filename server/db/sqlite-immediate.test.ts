// A Prisma transaction on SQLite that reads, then writes, while another connection writes: it
// holds the write lock from its start, so the other connection waits (here, with no busy
// timeout, is refused) instead of the transaction failing at its first write.
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { createOrg } from '../services/orgs/create-org.ts';
import { sqlitePath } from './dialect.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase('sqlite');
});
afterAll(async () => {
  await t?.drop();
});

it('a transaction that reads then writes is not failed by another connection writing in between', async () => {
  const org = await createOrg(t.db, { name: 'before', creditsMicros: 0n });
  const other = new Database(sqlitePath(t.url), { timeout: 0 });
  let otherWrite: unknown = null;
  await t.db.prisma.$transaction(async (tx) => {
    await tx.org.findUniqueOrThrow({ where: { id: org.id } });
    try {
      other.prepare('UPDATE "Org" SET "name" = ? WHERE "id" = ?').run('other', org.id);
    } catch (e) {
      otherWrite = e;
    }
    await tx.org.update({ where: { id: org.id }, data: { name: 'mine' } });
  });
  other.close();
  expect((otherWrite as { code?: string } | null)?.code).toMatch(/^SQLITE_BUSY/);
  expect((await t.db.prisma.org.findUniqueOrThrow({ where: { id: org.id } })).name).toBe('mine');
});
