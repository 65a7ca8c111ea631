// Phone tokens (docs/phone.md): what a carrier's stream URL carries in place of a key. Made and
// kept like API keys (server/services/keys/api-key-format.ts): random, shown once, stored only
// as a SHA-256 hash, looked up by that hash.
import { randomBytes } from 'node:crypto';
import { hashApiKey } from '../keys/api-key-format.ts';

export const PHONE_TOKEN_PREFIX = 'pt_svc_';
// 32 random bytes in base64url without padding: safe in a URL path as it is.
const TOKEN_PATTERN = /^pt_svc_[A-Za-z0-9_-]{43}$/;

export function generatePhoneToken(): string {
  return PHONE_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function isWellFormedPhoneToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

export const hashPhoneToken = (token: string): string => hashApiKey(token);

/** What a token list shows: "pt_svc_" plus the next 4 characters. */
export function phoneTokenPrefix(token: string): string {
  return token.slice(0, PHONE_TOKEN_PREFIX.length + 4);
}
