// The secrets of agent registration and how each is kept:
// - claim token: 32 random bytes, stored only as SHA-256 (like API keys);
// - user code: 6 digits, stored as HMAC-SHA256 under a server secret (a plain hash of a 6-digit
//   code would be reversed by trying all million), compared in constant time;
// - identity assertion: a JWT signed HS256 with a server secret (only this server verifies it);
// - keys that must be delivered again for a while (the trial key for a repeated jwt-bearer
//   exchange, the claimed key for 10 minutes after delivery): AES-256-GCM under a server secret,
//   bound to the registration and purpose, erased when the window ends.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, randomInt } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import type { Prisma } from '../../db/database.ts';
import { hashesEqual } from '../keys/api-key-format.ts';
import { getServerSecret } from '../secrets/get-server-secret.ts';

const SIGNING_SECRET = 'agent-auth:assertion-signing-key';
const CODE_SECRET = 'agent-auth:user-code-hmac-key';
const SEALING_SECRET = 'agent-auth:key-sealing-key';

export const CLAIM_TOKEN_PREFIX = 'claim_';

export function generateClaimToken(): string {
  return CLAIM_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashClaimToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Six digits, uniformly random (leading zeros kept). */
export function generateUserCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0');
}

export async function hashUserCode(prisma: Prisma, code: string): Promise<string> {
  const key = await getServerSecret(prisma, CODE_SECRET);
  return createHmac('sha256', key).update(code).digest('hex');
}

/** Constant-time comparison of two code hashes (hex). */
export const userCodeHashesEqual = hashesEqual;

export type SealPurpose = 'trial-key' | 'issued-key';

/** AES-256-GCM; the registration id and purpose are authenticated, so a sealed value cannot be moved to another row or field. */
export async function sealKey(prisma: Prisma, registrationId: string, purpose: SealPurpose, plaintext: string): Promise<string> {
  const key = await getServerSecret(prisma, SEALING_SECRET);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(`${purpose}:${registrationId}`));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
}

export async function unsealKey(prisma: Prisma, registrationId: string, purpose: SealPurpose, sealed: string): Promise<string> {
  const key = await getServerSecret(prisma, SEALING_SECRET);
  if (!sealed.startsWith('v1.')) throw new Error('unknown sealed key format');
  const raw = Buffer.from(sealed.slice(3), 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(`${purpose}:${registrationId}`));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

export interface AssertionClaims {
  registrationId: string;
  issuer: string;
  issuedAt: Date;
  expiresAt: Date;
}

export async function signIdentityAssertion(prisma: Prisma, claims: AssertionClaims): Promise<string> {
  const key = await getServerSecret(prisma, SIGNING_SECRET);
  return new SignJWT({ registration_type: 'anonymous' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(claims.issuer)
    .setAudience(claims.issuer)
    .setSubject(claims.registrationId)
    .setJti(claims.registrationId)
    .setIssuedAt(Math.floor(claims.issuedAt.getTime() / 1000))
    .setExpirationTime(Math.floor(claims.expiresAt.getTime() / 1000))
    .sign(key);
}

/**
 * The registration id of a valid, unexpired assertion issued by this server; null otherwise.
 * Only HS256 under this server's own secret is accepted (no `none`, no other algorithm, no
 * key taken from the token), and the claims this server always sets must all be there: a
 * token without `exp` would otherwise never expire.
 */
export async function verifyIdentityAssertion(prisma: Prisma, assertion: string, issuer: string, now: Date): Promise<string | null> {
  const key = await getServerSecret(prisma, SIGNING_SECRET);
  try {
    const { payload } = await jwtVerify(assertion, key, {
      issuer,
      audience: issuer,
      algorithms: ['HS256'],
      typ: 'JWT',
      requiredClaims: ['exp', 'iat', 'sub', 'jti'],
      currentDate: now,
      clockTolerance: 0,
    });
    return typeof payload.sub === 'string' && payload.registration_type === 'anonymous' ? payload.sub : null;
  } catch {
    return null;
  }
}
