// The per-org blob quota over real HTTP, under concurrency: uploads reserve their size in the
// database before writing (Org.blobBytes), so however many race, the org's live blobs never
// pass 250 MB, the 201s are exactly the uploads that fit, and the counter equals the live
// blobs after uploads and deletes. Run on SQLite and on PostgreSQL (TEST_DB=postgresql).
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import { MAX_ORG_BLOB_BYTES } from '../../server/services/blobs/blob-store.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { call, otherOrg, uploadBlob } from '../../test/support/voice-routes.ts';
import { encodeWav } from '../audio/wav.ts';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startGateway({ creditsMicros: 100_000_000n });
});

afterAll(async () => {
  await h?.close();
});

async function quota(orgId: string): Promise<{ counted: number; live: number }> {
  const org = await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  const sum = await h.testDb.db.prisma.blob.aggregate({ where: { orgId, deletedAt: null }, _sum: { sizeBytes: true } });
  return { counted: Number(org.blobBytes), live: sum._sum.sizeBytes ?? 0 };
}

describe('POST /blobs under concurrency', () => {
  it('40 racing uploads with room for 10: exactly 10 are stored, the rest 413, never over the quota', async () => {
    const org = await otherOrg(h);
    // ~1 MB of 16 kHz audio.
    const wav = encodeWav(
      Float32Array.from({ length: 500_000 }, (_, i) => 0.3 * Math.sin(i / 9)),
      16000,
      'pcm_s16le',
    );
    const size = wav.length;
    const fits = 10;
    // A live blob taking all but room for 10 uploads and a bit (not 11).
    const used = MAX_ORG_BLOB_BYTES - fits * size - (size - 1);
    await h.testDb.db.prisma.blob.create({
      data: { id: newId('blob'), orgId: org.orgId, contentType: 'audio/wav', sizeBytes: used, sha256: 'x', storageKey: 'none' },
    });
    await h.testDb.db.prisma.org.update({ where: { id: org.orgId }, data: { blobBytes: used } });

    const results = await Promise.all(Array.from({ length: 40 }, () => uploadBlob(h, wav, org.headers)));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(fits);
    for (const r of results.filter((r) => r.status !== 201)) {
      expect(r.status).toBe(413);
      expect(r.body.error).toMatchObject({ code: 'storage_quota_exceeded', param: 'file', type: 'invalid_request_error' });
    }
    const after = await quota(org.orgId);
    expect(after.live).toBe(used + created.reduce((n, r) => n + r.body.size_bytes, 0));
    expect(after.live).toBeLessThanOrEqual(MAX_ORG_BLOB_BYTES);
    expect(after.counted).toBe(after.live);
    // Refused uploads wrote nothing.
    expect(readdirSync(join(h.testDb.dataDir, 'blobs', org.orgId)).sort()).toEqual(created.map((r) => r.body.id).sort());

    // Each stored blob deleted twice at once: one delete each releases it, the other is a 404.
    const deletes = await Promise.all(created.flatMap((r) => [r, r]).map((r) => call(h, 'DELETE', `/blobs/${r.body.id}`, undefined, org.headers)));
    expect(deletes.filter((d) => d.status === 200)).toHaveLength(fits);
    for (const d of deletes.filter((d) => d.status !== 200)) expect(d.body.error).toMatchObject({ code: 'blob_not_found' });
    expect(await quota(org.orgId)).toEqual({ counted: used, live: used });
    expect(readdirSync(join(h.testDb.dataDir, 'blobs', org.orgId))).toEqual([]);
    // Room again: the next upload fits.
    expect((await uploadBlob(h, wav, org.headers)).status).toBe(201);
    // The first org's quota was never touched.
    expect(await quota(h.orgId)).toEqual({ counted: 0, live: 0 });
  });
});
