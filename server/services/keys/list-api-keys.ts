import type { Prisma } from '../../db/database.ts';

export interface ApiKeySummary {
  id: string;
  name: string;
  /** "sk_svc_" plus the next 4 characters; the full key is never stored. */
  prefix: string;
  status: 'active' | 'revoked';
  isTrial: boolean;
  /** Requests per minute for this key; null means the gateway default (SVC_DEFAULT_RPM). */
  rateLimitRpm: number | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

// A dashboard list, not an export: an org with more keys than this has a different problem.
const MAX_KEYS = 500;

/** An org's keys, newest first. Never returns the hash. */
export async function listApiKeys(prisma: Prisma, input: { orgId: string }): Promise<ApiKeySummary[]> {
  return prisma.apiKey.findMany({
    where: { orgId: input.orgId },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: MAX_KEYS,
    select: { id: true, name: true, prefix: true, status: true, isTrial: true, rateLimitRpm: true, createdAt: true, lastUsedAt: true, revokedAt: true },
  });
}
