// Blobs: uploaded audio (clone clips) and generated samples, stored as files under the data
// directory (`<dataDir>/blobs/<org>/<blob>`) with their record in the database. Several gateway
// hosts must share that directory (see README, "Deployment"). Caps: 25 MB per blob, 250 MB per
// org (live blobs); over either is 413 with a message saying which.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Prisma } from '../../db/database.js';
import { newId } from '../../db/ids.js';
import { ServiceError } from '../errors.js';

export const MAX_BLOB_BYTES = 25 * 1024 * 1024;
export const MAX_ORG_BLOB_BYTES = 250 * 1024 * 1024;

export interface BlobRecord {
  id: string;
  object: 'blob';
  content_type: string;
  size_bytes: number;
  sha256: string;
  duration_seconds: number | null;
  created_at: string;
}

type BlobRow = NonNullable<Awaited<ReturnType<Prisma['blob']['findFirst']>>>;

export function presentBlob(b: BlobRow): BlobRecord {
  return {
    id: b.id,
    object: 'blob',
    content_type: b.contentType,
    size_bytes: b.sizeBytes,
    sha256: b.sha256,
    duration_seconds: b.durationMs === null ? null : b.durationMs / 1000,
    created_at: b.createdAt.toISOString(),
  };
}

export const blobTooLarge = () => new ServiceError('body_too_large', `A blob is at most ${MAX_BLOB_BYTES / 1024 / 1024} MB.`);

const blobPath = (dataDir: string, orgId: string, blobId: string) => join(dataDir, 'blobs', orgId, blobId);

export async function orgBlobBytes(prisma: Prisma, orgId: string): Promise<number> {
  const sum = await prisma.blob.aggregate({ where: { orgId, deletedAt: null }, _sum: { sizeBytes: true } });
  return sum._sum.sizeBytes ?? 0;
}

/**
 * Stores bytes as a new blob of the org. The org quota is checked before writing; two uploads
 * racing past it can exceed it by at most one blob (25 MB), which is the documented bound.
 */
export async function storeBlob(
  prisma: Prisma,
  dataDir: string,
  input: { orgId: string; contentType: string; bytes: Buffer; durationMs: number | null },
): Promise<BlobRecord> {
  if (input.bytes.length > MAX_BLOB_BYTES) throw blobTooLarge();
  if (input.bytes.length === 0) throw new ServiceError('invalid_request', 'The upload is empty.', 'file');
  const used = await orgBlobBytes(prisma, input.orgId);
  if (used + input.bytes.length > MAX_ORG_BLOB_BYTES) {
    throw new ServiceError(
      'storage_quota_exceeded',
      `This organization's blobs would take ${((used + input.bytes.length) / 1024 / 1024).toFixed(1)} MB, over its ${MAX_ORG_BLOB_BYTES / 1024 / 1024} MB storage quota; delete blobs or voices you no longer need.`,
      'file',
    );
  }
  const id = newId('blob');
  const path = blobPath(dataDir, input.orgId, id);
  await mkdir(join(dataDir, 'blobs', input.orgId), { recursive: true });
  // Write then rename: a crash never leaves a record pointing at half a file.
  await writeFile(`${path}.part`, input.bytes);
  await rename(`${path}.part`, path);
  const row = await prisma.blob.create({
    data: {
      id,
      orgId: input.orgId,
      contentType: input.contentType,
      sizeBytes: input.bytes.length,
      sha256: createHash('sha256').update(input.bytes).digest('hex'),
      storageKey: join(input.orgId, id),
      durationMs: input.durationMs,
    },
  });
  return presentBlob(row);
}

export async function getBlobOrThrow(prisma: Prisma, orgId: string, blobId: string): Promise<BlobRow> {
  const blob = await prisma.blob.findFirst({ where: { id: blobId, orgId, deletedAt: null } });
  if (!blob) throw new ServiceError('blob_not_found', `No blob with id '${blobId}' in this organization.`, 'blob_id');
  return blob;
}

export async function readBlobBytes(dataDir: string, blob: BlobRow): Promise<Buffer> {
  return readFile(join(dataDir, 'blobs', blob.storageKey));
}

/** Deletes the record (soft) and the file; a voice that referenced it keeps its profiles. */
export async function deleteBlob(prisma: Prisma, dataDir: string, orgId: string, blobId: string): Promise<{ id: string; deleted: true }> {
  const blob = await getBlobOrThrow(prisma, orgId, blobId);
  await prisma.blob.update({ where: { id: blob.id }, data: { deletedAt: new Date() } });
  await rm(join(dataDir, 'blobs', blob.storageKey), { force: true });
  return { id: blob.id, deleted: true };
}
