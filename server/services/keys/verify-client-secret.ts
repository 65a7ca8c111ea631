import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { SERVER_SECRET_NAME, decodeClientSecret, type ClientSecretClaims } from './client-secret-format.ts';

/**
 * The claims of a realtime client secret: 401 invalid_api_key when it was not minted here (a
 * wrong or altered secret) or has expired by `now` (ms). The key it stands for is checked by
 * the caller's admission, as current as any key's (a revoked key's secrets are refused).
 */
export async function verifyClientSecret(prisma: Prisma, secret: string, now: number): Promise<ClientSecretClaims> {
  let serverSecret: Buffer;
  try {
    serverSecret = await getServerSecret(prisma, SERVER_SECRET_NAME);
  } catch {
    throw new ServiceError('verify_unavailable', 'Client secret verification is temporarily unavailable; retry within a few seconds.');
  }
  const claims = decodeClientSecret(serverSecret, secret);
  if (!claims) throw new ServiceError('invalid_api_key', 'Incorrect client secret provided: it was not issued by this server, or it was altered.');
  if (claims.expiresAt * 1000 <= now)
    throw new ServiceError('invalid_api_key', 'This client secret has expired; mint a new one (POST /v1/realtime/client_secrets).');
  return claims;
}
