import type { Prisma } from '../../db/database.ts';

export interface PhoneTokenSummary {
  id: string;
  name: string;
  /** "pt_svc_" plus the next 4 characters; the full token is never stored. */
  prefix: string;
  profile: string;
  apiKeyId: string;
  /** The key's own name and prefix, to recognise it by. */
  apiKeyName: string;
  apiKeyPrefix: string;
  /** revoked: the token was revoked, or the key it stands for was. */
  status: 'active' | 'revoked';
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

// A dashboard list, not an export (as list-api-keys.ts).
const MAX_TOKENS = 500;

/** An org's phone tokens, newest first. Never returns the hash. */
export async function listPhoneTokens(prisma: Prisma, input: { orgId: string }): Promise<PhoneTokenSummary[]> {
  const rows = await prisma.phoneToken.findMany({
    where: { orgId: input.orgId },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: MAX_TOKENS,
    select: {
      id: true,
      name: true,
      prefix: true,
      profile: true,
      apiKeyId: true,
      createdAt: true,
      lastUsedAt: true,
      revokedAt: true,
      apiKey: { select: { name: true, prefix: true, status: true } },
    },
  });
  return rows.map(({ apiKey, ...t }) => ({
    ...t,
    apiKeyName: apiKey.name,
    apiKeyPrefix: apiKey.prefix,
    status: t.revokedAt === null && apiKey.status === 'active' ? 'active' : 'revoked',
  }));
}
