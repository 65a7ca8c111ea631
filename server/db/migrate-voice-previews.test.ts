// Migration 0013 makes voices' greeting samples previews (VoicePreview): the old sample blobs
// leave their org's storage (soft-deleted, bytes given back) before Voice.sampleBlobId goes, and
// existing profiles and blobs read as before. Runs on the database TEST_DB picks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseBefore, type DatabaseBefore } from '../../test/support/database-before.ts';
import { TEST_DIALECT } from '../../test/support/test-database.ts';
import { openDatabase, type Database } from './database.ts';
import { migrate } from './migrate.ts';

const MIGRATION = '0013_voice_previews';

let before: DatabaseBefore;
let db: Database | undefined;

beforeAll(async () => {
  before = await databaseBefore(MIGRATION);
});
afterAll(async () => {
  await db?.close();
  await before?.drop();
});

describe('migration 0013: voice previews', () => {
  it("drops the greeting samples from their orgs' storage and keeps everything else", async () => {
    const now = TEST_DIALECT === 'sqlite' ? "'2026-01-01T00:00:00.000+00:00'" : "'2026-01-01 00:00:00'";
    await before.exec(`
      INSERT INTO "Org" (id, name, "blobBytes", "updatedAt") VALUES ('org_a', 'a', 1300, ${now}), ('org_b', 'b', 50, ${now});
      INSERT INTO "Blob" (id, "orgId", "contentType", "sizeBytes", sha256, "storageKey") VALUES
        ('blob_clip', 'org_a', 'audio/wav', 1000, 'x', 'org_a/blob_clip'),
        ('blob_greeting', 'org_a', 'audio/wav', 300, 'y', 'org_a/blob_greeting'),
        ('blob_other', 'org_b', 'audio/wav', 50, 'z', 'org_b/blob_other');
      INSERT INTO "Voice" (id, "orgId", name, tags, kind, "sourceAudioBlobId", "sampleBlobId", "updatedAt") VALUES
        ('voice_a', 'org_a', 'A', '[]', 'instant_clone', 'blob_clip', 'blob_greeting', ${now});
      INSERT INTO "Model" (id, modality, "updatedAt") VALUES ('m', 'tts', ${now});
      INSERT INTO "VoiceProfile" (id, "voiceId", "modelId", "upstreamId") VALUES ('vpr_a', 'voice_a', 'm', 'engine-a');
    `);
    expect(await migrate(before.url)).toContain(MIGRATION);
    db = openDatabase(before.url);
    const { prisma } = db;
    expect((await prisma.org.findMany({ orderBy: { id: 'asc' } })).map((o) => [o.id, o.blobBytes])).toEqual([
      ['org_a', 1000n],
      ['org_b', 50n],
    ]);
    const blobs = await prisma.blob.findMany({ orderBy: { id: 'asc' } });
    expect(blobs.map((b) => [b.id, b.orgId, b.deletedAt !== null])).toEqual([
      ['blob_clip', 'org_a', false],
      ['blob_greeting', 'org_a', true],
      ['blob_other', 'org_b', false],
    ]);
    // The profile reads with its new updatedAt; the voice has no previews until a worker makes them.
    const voice = await prisma.voice.findUniqueOrThrow({ where: { id: 'voice_a' }, include: { profiles: true, previews: true } });
    expect(voice.sourceAudioBlobId).toBe('blob_clip');
    expect(voice.profiles).toEqual([expect.objectContaining({ id: 'vpr_a', upstreamId: 'engine-a', updatedAt: expect.any(Date) })]);
    expect(voice.previews).toEqual([]);
    expect(await migrate(before.url)).toEqual([]);
  });
});
