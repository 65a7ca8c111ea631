// Small server-side secrets (signing and sealing keys) generated on first use and kept in the
// ServerSecret table, so every gateway and dashboard process of an instance shares them and
// they survive restarts. Never logged, never returned by any API.
import { randomBytes } from 'node:crypto';
import type { Prisma } from '../../db/database.ts';

const cache = new WeakMap<Prisma, Map<string, Promise<Buffer>>>();

/**
 * The 32-byte secret called `name`, created at random the first time any process asks. Two
 * processes asking at once both try to insert; the primary key keeps exactly one value and
 * the loser reads it back.
 */
export function getServerSecret(prisma: Prisma, name: string): Promise<Buffer> {
  let byName = cache.get(prisma);
  if (!byName) cache.set(prisma, (byName = new Map()));
  let secret = byName.get(name);
  if (!secret) {
    secret = loadOrCreate(prisma, name);
    byName.set(name, secret);
    // A failed read (database down) is not remembered: the next call tries again.
    secret.catch(() => byName.delete(name));
  }
  return secret;
}

async function loadOrCreate(prisma: Prisma, name: string): Promise<Buffer> {
  const existing = await prisma.serverSecret.findUnique({ where: { name } });
  if (existing) return Buffer.from(existing.value, 'base64url');
  try {
    const created = await prisma.serverSecret.create({ data: { name, value: randomBytes(32).toString('base64url') } });
    return Buffer.from(created.value, 'base64url');
  } catch (e) {
    if ((e as { code?: string }).code !== 'P2002') throw e;
    const winner = await prisma.serverSecret.findUniqueOrThrow({ where: { name } });
    return Buffer.from(winner.value, 'base64url');
  }
}
