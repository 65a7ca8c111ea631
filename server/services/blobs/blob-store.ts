// Blobs: uploaded audio (clone clips) and voice previews, stored as files under the data
// directory (`<dataDir>/blobs/<org>/<blob>`; a platform voice's preview, which belongs to no org,
// under `<dataDir>/blobs/_platform/`) with their record in the database. Several gateway
// hosts must share that directory (see docs/operations.md, "Processes"). Caps: 25 MB per blob, 250 MB per
// org (live blobs); over either is 413 with a message saying which.
//
// The org quota is a counter, Org.blobBytes = the sizes of the org's live blobs. An upload
// reserves its size with one conditional UPDATE before anything is written, so concurrent
// uploads (from any number of gateways) can never pass the cap together; the reservation is
// released if the upload fails and when the blob is deleted.
import { webcrypto } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';

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

/** Where the blobs of an org (null: of no org) are kept, relative to `<dataDir>/blobs`. */
const blobDir = (orgId: string | null) => orgId ?? '_platform';

/** Bytes of the org's live blobs, as counted for its quota. */
export async function orgBlobBytes(prisma: Prisma, orgId: string): Promise<number> {
  const org = await prisma.org.findUnique({ where: { id: orgId }, select: { blobBytes: true } });
  return Number(org?.blobBytes ?? 0n);
}

/**
 * Reserves `bytes` of the org's quota; false when they do not fit. Prisma sends this as one
 * `UPDATE "Org" SET "blobBytes" = "blobBytes" + n WHERE id = ? AND "blobBytes" <= cap - n`: on
 * PostgreSQL a racing update waits for the row lock and re-checks the condition, and SQLite
 * runs one writer at a time, so the sum of granted reservations never passes the cap.
 */
async function reserveQuota(prisma: Prisma, orgId: string, bytes: number): Promise<boolean> {
  const r = await prisma.org.updateMany({
    where: { id: orgId, blobBytes: { lte: BigInt(MAX_ORG_BLOB_BYTES - bytes) } },
    data: { blobBytes: { increment: BigInt(bytes) } },
  });
  return r.count === 1;
}

async function releaseQuota(prisma: Prisma, orgId: string, bytes: number): Promise<void> {
  await prisma.org.updateMany({ where: { id: orgId }, data: { blobBytes: { decrement: BigInt(bytes) } } });
}

/**
 * Stores bytes as a new blob of the org, within its quota (exactly, under any concurrency).
 * `orgId` null: a blob of no org (a platform voice's preview), in no quota and reachable by no
 * org's /blobs routes.
 */
export async function storeBlob(
  prisma: Prisma,
  dataDir: string,
  input: { orgId: string | null; contentType: string; bytes: Buffer; durationMs: number | null },
): Promise<BlobRecord> {
  const size = input.bytes.length;
  const { orgId } = input;
  if (size > MAX_BLOB_BYTES) throw blobTooLarge();
  if (size === 0) throw new ServiceError('invalid_request', 'The upload is empty.', 'file');
  if (orgId !== null && !(await reserveQuota(prisma, orgId, size))) {
    const used = await orgBlobBytes(prisma, orgId);
    throw new ServiceError(
      'storage_quota_exceeded',
      `This organization's blobs would take ${((used + size) / 1024 / 1024).toFixed(1)} MB, over its ${MAX_ORG_BLOB_BYTES / 1024 / 1024} MB storage quota; delete blobs or voices you no longer need.`,
      'file',
    );
  }
  const id = newId('blob');
  const storageKey = join(blobDir(orgId), id);
  const path = join(dataDir, 'blobs', storageKey);
  try {
    await mkdir(join(dataDir, 'blobs', blobDir(orgId)), { recursive: true });
    // Write then rename: a crash never leaves a record pointing at half a file.
    await writeFile(`${path}.part`, input.bytes);
    await rename(`${path}.part`, path);
    const row = await prisma.blob.create({
      data: {
        id,
        orgId,
        contentType: input.contentType,
        sizeBytes: size,
        sha256: await sha256Hex(input.bytes),
        storageKey,
        durationMs: input.durationMs,
      },
    });
    return presentBlob(row);
  } catch (err) {
    await Promise.all([rm(`${path}.part`, { force: true }), rm(path, { force: true })]).catch(() => undefined);
    if (orgId !== null) await releaseQuota(prisma, orgId, size).catch(() => undefined);
    throw err;
  }
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
  if (!(await dropBlob(prisma, dataDir, blob))) throw new ServiceError('blob_not_found', `No blob with id '${blobId}' in this organization.`, 'blob_id');
  return { id: blob.id, deleted: true };
}

/**
 * Deletes a blob of any org, or of none (a preview the worker replaces): the record (soft), its
 * bytes from its org's quota, the file. False when it was deleted already. Only the delete that
 * moves the row out of live releases its bytes: two racing deletes of one blob release them
 * once. Both statements commit together.
 */
export async function dropBlob(prisma: Prisma, dataDir: string, blob: Pick<BlobRow, 'id' | 'orgId' | 'sizeBytes' | 'storageKey'>): Promise<boolean> {
  const released = await prisma.$transaction(async (tx) => {
    const r = await tx.blob.updateMany({ where: { id: blob.id, deletedAt: null }, data: { deletedAt: new Date() } });
    if (r.count === 1 && blob.orgId !== null) {
      await tx.org.updateMany({ where: { id: blob.orgId }, data: { blobBytes: { decrement: BigInt(blob.sizeBytes) } } });
    }
    return r.count === 1;
  });
  if (released) await rm(join(dataDir, 'blobs', blob.storageKey), { force: true });
  return released;
}

/** SHA-256 off the event loop (Web Crypto digests on libuv's thread pool): a 25 MB upload is too long to hash on it. */
async function sha256Hex(bytes: Buffer): Promise<string> {
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', bytes)).toString('hex');
}
