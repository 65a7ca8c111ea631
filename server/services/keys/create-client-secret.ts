import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';
import { DEFAULT_TTL_SECONDS, MAX_SECRET_CHARS, MAX_TTL_SECONDS, MIN_TTL_SECONDS, SERVER_SECRET_NAME, encodeClientSecret } from './client-secret-format.ts';

export interface CreateClientSecretInput {
  orgId: string;
  /** The SHA-256 of the key that mints it: the secret is that key's, revoked with it. */
  keyHash: string;
  /** The session settings, already checked by the caller. */
  session: Record<string, unknown>;
  /** `expires_after.seconds` (10 to 7200; default 600). */
  ttlSeconds?: number;
  /** Milliseconds since the epoch (the gateway's clock). */
  now: number;
}

/**
 * Mints a realtime client secret (client-secret-format.ts): what a backend hands a browser so
 * that it opens a WebRTC call without ever holding the key.
 */
export async function createClientSecret(prisma: Prisma, input: CreateClientSecretInput): Promise<{ value: string; expiresAt: number }> {
  const ttl = input.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < MIN_TTL_SECONDS || ttl > MAX_TTL_SECONDS)
    throw new ServiceError(
      'invalid_request',
      `expires_after.seconds must be an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS}.`,
      'expires_after.seconds',
    );
  const expiresAt = Math.floor(input.now / 1000) + ttl;
  const value = encodeClientSecret(await getServerSecret(prisma, SERVER_SECRET_NAME), {
    orgId: input.orgId,
    keyHash: input.keyHash,
    expiresAt,
    session: input.session,
  });
  if (value.length > MAX_SECRET_CHARS)
    throw new ServiceError(
      'invalid_request',
      `session: the settings make a client secret of ${value.length} characters, more than ${MAX_SECRET_CHARS} (it travels in a header); send long instructions or tools with session.update once the call is open.`,
      'session',
    );
  return { value, expiresAt };
}
