// Realtime client secrets (`ek_…`, OpenAI's ephemeral keys for a browser's WebRTC call): a
// short-lived credential that stands for one API key of one org and carries the session's
// settings. Stateless: the secret is its own record, `ek_<payload>.<mac>`, the payload base64url
// JSON and the mac an HMAC-SHA256 of it under a server secret (ServerSecret table, shared by every
// process), compared in constant time. The payload is signed, not encrypted: it names the org and
// the SHA-256 of the key (which can neither be reversed nor used as a key), the expiry and the
// session settings; nothing in it is a credential but the whole, signed.
//
// Cartesia's access tokens (`at_…`, POST /access-token: what a browser opens a TTS or STT socket
// with) are the same record under their own prefix, the session being their grants. The mac
// covers the prefix, so neither kind can be passed off as the other.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const CLIENT_SECRET_PREFIX = 'ek_';
export const ACCESS_TOKEN_PREFIX = 'at_';
export type SecretPrefix = typeof CLIENT_SECRET_PREFIX | typeof ACCESS_TOKEN_PREFIX;
export const SERVER_SECRET_NAME = 'realtime-client-secret';
/** OpenAI's bounds on `expires_after.seconds`, and its default. */
export const MIN_TTL_SECONDS = 10;
export const MAX_TTL_SECONDS = 7200;
export const DEFAULT_TTL_SECONDS = 600;
/** A secret travels in an Authorization header: the session it carries is bounded so it fits any proxy's header limit. */
export const MAX_SECRET_CHARS = 8 * 1024;

export interface ClientSecretClaims {
  orgId: string;
  /** The SHA-256 (hex) of the key the secret was minted with. */
  keyHash: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** The session settings (`session` of the mint request, checked by the gateway). */
  session: Record<string, unknown>;
}

interface Payload {
  v: 1;
  o: string;
  k: string;
  e: number;
  s: Record<string, unknown>;
  /** Two secrets minted in the same second with the same settings still differ. */
  n: string;
}

const mac = (serverSecret: Buffer, prefix: SecretPrefix, payload: string) => createHmac('sha256', serverSecret).update(prefix).update(payload).digest();

export function encodeClientSecret(serverSecret: Buffer, claims: ClientSecretClaims, prefix: SecretPrefix = CLIENT_SECRET_PREFIX): string {
  const payload: Payload = { v: 1, o: claims.orgId, k: claims.keyHash, e: claims.expiresAt, s: claims.session, n: randomBytes(9).toString('base64url') };
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${prefix}${body}.${mac(serverSecret, prefix, body).toString('base64url')}`;
}

/** The claims of a secret whose mac is right (constant-time), else null; the expiry is the caller's to check. */
export function decodeClientSecret(serverSecret: Buffer, secret: string, prefix: SecretPrefix = CLIENT_SECRET_PREFIX): ClientSecretClaims | null {
  if (!secret.startsWith(prefix) || secret.length > MAX_SECRET_CHARS) return null;
  const dot = secret.indexOf('.', prefix.length);
  if (dot < 0) return null;
  const body = secret.slice(prefix.length, dot);
  const given = Buffer.from(secret.slice(dot + 1), 'base64url');
  const expected = mac(serverSecret, prefix, body);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  let p: Partial<Payload>;
  try {
    p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<Payload>;
  } catch {
    return null;
  }
  if (p.v !== 1 || typeof p.o !== 'string' || typeof p.k !== 'string' || typeof p.e !== 'number' || typeof p.s !== 'object' || p.s === null) return null;
  return { orgId: p.o, keyHash: p.k, expiresAt: p.e, session: p.s };
}

/**
 * A client secret or an access token inside a text (its payload, base64url JSON, always starts
 * `eyJ`): texts kept for the org to read (the request log's content) hold `ek_[redacted]` or
 * `at_[redacted]` instead, since a minting route's answer is the credential itself.
 */
export const SIGNED_SECRET_IN_TEXT = /\b(ek_|at_)eyJ[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?/g;

export const isClientSecret = (credential: string): boolean => credential.startsWith(CLIENT_SECRET_PREFIX);
export const isAccessToken = (credential: string): boolean => credential.startsWith(ACCESS_TOKEN_PREFIX);
