import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { hashPhoneToken, isWellFormedPhoneToken } from './phone-token-format.ts';

export interface PhoneTokenGrant {
  tokenId: string;
  orgId: string;
  apiKeyId: string;
  /** The hash of the key the token stands for: the gateway admits the call as that key. */
  keyHash: string;
  /** The realtime profile (or LLM) the call talks to. */
  profile: string;
}

const wrongToken = () =>
  new ServiceError(
    'invalid_api_key',
    "Incorrect phone token. The stream URL must end in a token, or the stream's svc_token parameter carry one, made with `svc phone token create` or the dashboard.",
  );

/**
 * The grant of a presented phone token, as the database has it now: 401 invalid_api_key for a
 * malformed or unknown token, 401 api_key_disabled for a revoked one. Looked up by its SHA-256,
 * so the timing says nothing about stored tokens; the key's own state is the admission's to
 * check (as for any key). Stamps the token's last use.
 */
export async function verifyPhoneToken(prisma: Prisma, presented: string | undefined): Promise<PhoneTokenGrant> {
  if (!presented || !isWellFormedPhoneToken(presented)) throw wrongToken();
  let row;
  try {
    row = await prisma.phoneToken.findUnique({
      where: { hash: hashPhoneToken(presented) },
      select: { id: true, orgId: true, apiKeyId: true, profile: true, revokedAt: true, apiKey: { select: { hash: true } } },
    });
  } catch {
    throw new ServiceError('verify_unavailable', 'Phone token verification is temporarily unavailable; retry within a few seconds.');
  }
  if (!row) throw wrongToken();
  if (row.revokedAt) throw new ServiceError('api_key_disabled', 'This phone token has been revoked.');
  await prisma.phoneToken.update({ where: { id: row.id }, data: { lastUsedAt: new Date() } }).catch(() => {});
  return { tokenId: row.id, orgId: row.orgId, apiKeyId: row.apiKeyId, keyHash: row.apiKey.hash, profile: row.profile };
}

/** Which of these tokens are still usable: absent from the answer means deleted (with its org or key), which ends its calls too. */
export async function phoneTokenStatuses(prisma: Prisma, ids: string[]): Promise<Map<string, 'active' | 'revoked'>> {
  const rows = await prisma.phoneToken.findMany({ where: { id: { in: ids } }, select: { id: true, revokedAt: true } });
  return new Map(rows.map((r) => [r.id, r.revokedAt ? 'revoked' : 'active']));
}
