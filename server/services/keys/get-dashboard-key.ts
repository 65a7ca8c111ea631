// The dashboard's own credential on the gateway: one ordinary API key per org, named
// "Dashboard (playground)", that the dashboard server uses to call the gateway as the org
// (playground synthesis and transcription, clone uploads, job polling). One credential type on
// the gateway: admission, rate limits, metering and revocation are exactly those of any key.
//
// Like every key it is stored as a hash and a prefix (ApiKey). So that the dashboard can use it
// again, the plaintext is also sealed (AES-256-GCM under a server secret generated once, bound
// to the org by the authenticated data) in the ServerSecret row `dashboard-key:<orgId>`. The
// key shows in the org's key list; revoking it there makes the next dashboard call make a new one.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Database, Prisma } from '../../db/database.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { hashApiKey, hashesEqual } from './api-key-format.ts';
import { createApiKey } from './create-api-key.ts';
import { revokeApiKey } from './revoke-api-key.ts';

export const DASHBOARD_KEY_NAME = 'Dashboard (playground)';
const SEALING_SECRET = 'dashboard-key-sealing';
export const dashboardKeySecretName = (orgId: string) => `dashboard-key:${orgId}`;

// Two racing processes can each make a key; the row is written compare-and-swap and the loser
// revokes its own key and reads the winner's. A few rounds settle any realistic race.
const MAX_ROUNDS = 4;

const inFlight = new WeakMap<Prisma, Map<string, Promise<string>>>();

/**
 * The org's dashboard key in plaintext, made on first use and again whenever the stored one
 * no longer works (revoked, deleted, or unreadable). Concurrent calls in one process share one
 * lookup. Throws org_not_found for an org that does not exist. Never log the result.
 */
export function getOrCreateDashboardKey(db: Pick<Database, 'prisma'>, orgId: string): Promise<string> {
  let byOrg = inFlight.get(db.prisma);
  if (!byOrg) inFlight.set(db.prisma, (byOrg = new Map()));
  let pending = byOrg.get(orgId);
  if (!pending) {
    pending = resolveKey(db.prisma, orgId).finally(() => byOrg.delete(orgId));
    byOrg.set(orgId, pending);
  }
  return pending;
}

async function resolveKey(prisma: Prisma, orgId: string): Promise<string> {
  const name = dashboardKeySecretName(orgId);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const row = await prisma.serverSecret.findUnique({ where: { name } });
    if (row) {
      const stored = await openStored(prisma, orgId, row.value);
      if (stored && (await isActiveKeyOf(prisma, orgId, stored))) return stored.key;
      // Unreadable (the sealing secret was replaced): the old key can never be used again.
      const unreadableId = stored ? null : storedKeyId(row.value);
      if (unreadableId) await revokeApiKey(prisma, { id: unreadableId, orgId }).catch(() => undefined);
    }
    const created = await createApiKey(prisma, { orgId, name: DASHBOARD_KEY_NAME });
    const value = await seal(prisma, orgId, created.id, created.key);
    const won = row
      ? (await prisma.serverSecret.updateMany({ where: { name, value: row.value }, data: { value } })).count === 1
      : await prisma.serverSecret.create({ data: { name, value } }).then(
          () => true,
          (e: unknown) => {
            if ((e as { code?: string }).code === 'P2002') return false;
            throw e;
          },
        );
    if (won) return created.key;
    // Another process stored its key first: ours was never handed out, so it goes.
    await revokeApiKey(prisma, { id: created.id, orgId });
  }
  throw new Error('could not settle the dashboard key after several concurrent replacements');
}

/** The id of the org's current dashboard key (the keys page explains it); null before the playground first needed one. */
export async function findDashboardKeyId(prisma: Prisma, orgId: string): Promise<string | null> {
  const row = await prisma.serverSecret.findUnique({ where: { name: dashboardKeySecretName(orgId) }, select: { value: true } });
  return row ? storedKeyId(row.value) : null;
}

async function isActiveKeyOf(prisma: Prisma, orgId: string, stored: { keyId: string; key: string }): Promise<boolean> {
  const row = await prisma.apiKey.findUnique({ where: { id: stored.keyId }, select: { orgId: true, status: true, hash: true } });
  return !!row && row.orgId === orgId && row.status === 'active' && hashesEqual(row.hash, hashApiKey(stored.key));
}

// Stored value: "v1.<keyId>.<base64url(iv | tag | ciphertext)>". The key id is in the clear
// (it is no secret) so that an unreadable value can still be revoked.
async function seal(prisma: Prisma, orgId: string, keyId: string, key: string): Promise<string> {
  const secret = await getServerSecret(prisma, SEALING_SECRET);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', secret, iv);
  cipher.setAAD(aad(orgId, keyId));
  const body = Buffer.concat([cipher.update(key, 'utf8'), cipher.final()]);
  return `v1.${keyId}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
}

async function openStored(prisma: Prisma, orgId: string, value: string): Promise<{ keyId: string; key: string } | null> {
  const [version, keyId, sealed] = value.split('.');
  if (version !== 'v1' || !keyId || !sealed) return null;
  try {
    const secret = await getServerSecret(prisma, SEALING_SECRET);
    const raw = Buffer.from(sealed, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', secret, raw.subarray(0, 12));
    decipher.setAAD(aad(orgId, keyId));
    decipher.setAuthTag(raw.subarray(12, 28));
    return { keyId, key: Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8') };
  } catch {
    // A tampered value or a replaced sealing secret fails authentication: treat as missing.
    return null;
  }
}

function storedKeyId(value: string): string | null {
  const [version, keyId] = value.split('.');
  return version === 'v1' && keyId ? keyId : null;
}

/** Binds a sealed key to its org and key id: a value moved to another org's row does not open. */
const aad = (orgId: string, keyId: string) => Buffer.from(`dashboard-key:${orgId}:${keyId}`);
