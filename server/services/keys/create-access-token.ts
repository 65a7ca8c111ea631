import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { ACCESS_TOKEN_PREFIX, SERVER_SECRET_NAME, encodeClientSecret } from './client-secret-format.ts';

/** What an access token opens: Cartesia's grants (docs.cartesia.ai, "Authenticate your client applications"). */
export interface AccessTokenGrants {
  /** /tts/bytes, /tts/sse, /tts/websocket. */
  tts: boolean;
  /** /stt/websocket, /stt/turns/websocket. */
  stt: boolean;
}

/** Cartesia's bound on `expires_in` (one hour); its default is not documented, ours is the client secrets' 10 minutes. */
export const ACCESS_TOKEN_MAX_SECONDS = 3600;
export const ACCESS_TOKEN_DEFAULT_SECONDS = 600;

export interface CreateAccessTokenInput {
  orgId: string;
  /** The SHA-256 of the key that mints it: the token is that key's, revoked, limited and scoped with it. */
  keyHash: string;
  grants: AccessTokenGrants;
  /** 1 to 3600; default 600. */
  expiresInSeconds?: number;
  /** Milliseconds since the epoch (the gateway's clock). */
  now: number;
}

/**
 * Mints a Cartesia access token (`at_…`, client-secret-format.ts): what a backend hands a browser
 * so that it opens a speech socket without ever holding the key.
 */
export async function createAccessToken(prisma: Prisma, input: CreateAccessTokenInput): Promise<{ token: string; expiresAt: number }> {
  const ttl = input.expiresInSeconds ?? ACCESS_TOKEN_DEFAULT_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > ACCESS_TOKEN_MAX_SECONDS)
    throw new ServiceError('invalid_request', `expires_in: must be a whole number of seconds from 1 to ${ACCESS_TOKEN_MAX_SECONDS}.`, 'expires_in');
  if (!input.grants.tts && !input.grants.stt)
    throw new ServiceError('invalid_request', 'grants: grant at least one of tts and stt (a token without a grant opens nothing).', 'grants');
  const expiresAt = Math.floor(input.now / 1000) + ttl;
  const token = encodeClientSecret(
    await getServerSecret(prisma, SERVER_SECRET_NAME),
    { orgId: input.orgId, keyHash: input.keyHash, expiresAt, session: { grants: { tts: input.grants.tts, stt: input.grants.stt } } },
    ACCESS_TOKEN_PREFIX,
  );
  return { token, expiresAt };
}
