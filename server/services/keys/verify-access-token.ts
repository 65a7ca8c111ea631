import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { ACCESS_TOKEN_PREFIX, SERVER_SECRET_NAME, decodeClientSecret } from './client-secret-format.ts';
import type { AccessTokenGrants } from './create-access-token.ts';

/**
 * The key an access token stands for, when the token was minted here, has not expired by `now`
 * (ms) and carries `grant`: 401 invalid_api_key for a wrong, altered or expired token, 403
 * forbidden for one without the grant. The key itself is checked by the caller's admission, as
 * current as any key's (a revoked, expired or over-budget key refuses its tokens too).
 */
export async function verifyAccessToken(
  prisma: Prisma,
  token: string,
  grant: keyof AccessTokenGrants,
  now: number,
): Promise<{ orgId: string; keyHash: string }> {
  let serverSecret: Buffer;
  try {
    serverSecret = await getServerSecret(prisma, SERVER_SECRET_NAME);
  } catch {
    throw new ServiceError('verify_unavailable', 'Access token verification is temporarily unavailable; retry within a few seconds.');
  }
  const claims = decodeClientSecret(serverSecret, token, ACCESS_TOKEN_PREFIX);
  if (!claims) throw new ServiceError('invalid_api_key', 'Incorrect access token provided: it was not issued by this server, or it was altered.');
  if (claims.expiresAt * 1000 <= now) throw new ServiceError('invalid_api_key', 'This access token has expired; mint a new one (POST /access-token).');
  const grants = claims.session.grants as Partial<AccessTokenGrants> | undefined;
  if (grants?.[grant] !== true)
    throw new ServiceError('forbidden', `This access token has no ${grant} grant: mint one with {"grants": {"${grant}": true}} to use this route.`);
  return { orgId: claims.orgId, keyHash: claims.keyHash };
}
