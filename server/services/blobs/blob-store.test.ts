// The org blob quota as a counter (Org.blobBytes) on a real database (SQLite; PostgreSQL with
// TEST_DB=postgresql): a failed upload gives its reservation back, racing deletes of one blob
// give its bytes back once, and the counter always equals the org's live blobs.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test/support/test-database.ts';
import { createOrg } from '../orgs/create-org.ts';
import { deleteBlob, MAX_ORG_BLOB_BYTES, storeBlob } from './blob-store.ts';

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});

afterAll(async () => {
  await t?.drop();
});

async function counted(orgId: string): Promise<number> {
  return Number((await t.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } })).blobBytes);
}

async function live(orgId: string): Promise<number> {
  return (await t.db.prisma.blob.aggregate({ where: { orgId, deletedAt: null }, _sum: { sizeBytes: true } }))._sum.sizeBytes ?? 0;
}

const upload = (orgId: string, bytes: Buffer) => storeBlob(t.db.prisma, t.dataDir, { orgId, contentType: 'audio/wav', bytes, durationMs: 1000 });

describe('blob quota counter', () => {
  it('gives the reservation back when the file cannot be written, so the quota is not lost', async () => {
    const org = await createOrg(t.db, { name: 'write fails' });
    const size = 1024 * 1024;
    // Everything but one upload's worth is used.
    await t.db.prisma.org.update({ where: { id: org.id }, data: { blobBytes: MAX_ORG_BLOB_BYTES - size } });
    // The org's blob directory is a file: mkdir fails after the quota was reserved.
    mkdirSync(join(t.dataDir, 'blobs'), { recursive: true });
    writeFileSync(join(t.dataDir, 'blobs', org.id), 'not a directory');
    await expect(upload(org.id, Buffer.alloc(size, 1))).rejects.toMatchObject({ code: 'EEXIST' });
    expect(await counted(org.id)).toBe(MAX_ORG_BLOB_BYTES - size);
    expect(await t.db.prisma.blob.count({ where: { orgId: org.id } })).toBe(0);
    rmSync(join(t.dataDir, 'blobs', org.id));
    const blob = await upload(org.id, Buffer.alloc(size, 1));
    expect(await counted(org.id)).toBe(MAX_ORG_BLOB_BYTES);
    await expect(upload(org.id, Buffer.alloc(1))).rejects.toMatchObject({ code: 'storage_quota_exceeded', param: 'file' });
    expect(readdirSync(join(t.dataDir, 'blobs', org.id))).toEqual([blob.id]);
  });

  it('releases a blob once however many deletes race for it, and counts only live blobs', async () => {
    const org = await createOrg(t.db, { name: 'racing deletes' });
    const blobs = await Promise.all([1000, 2000, 3000].map((n) => upload(org.id, Buffer.alloc(n, 2))));
    expect(await counted(org.id)).toBe(6000);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => deleteBlob(t.db.prisma, t.dataDir, org.id, blobs[1]!.id)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'blob_not_found' });
    expect(await counted(org.id)).toBe(4000);
    expect(await live(org.id)).toBe(4000);
    // Another org's delete of this org's blob is a miss and changes nothing.
    const other = await createOrg(t.db, { name: 'other' });
    await expect(deleteBlob(t.db.prisma, t.dataDir, other.id, blobs[0]!.id)).rejects.toMatchObject({ code: 'blob_not_found' });
    expect(await counted(org.id)).toBe(4000);
    expect(await counted(other.id)).toBe(0);
  });
});
