// One-time links that prove possession: an invite link (the owner shares it) and an email
// verification link (it reaches only the mailbox). The token is 256 random bits; only its
// SHA-256 is stored. Rows are found by that hash through a unique index: a guess's hash says
// nothing about a stored one, so the lookup leaks nothing a constant-time compare would hide.
import { createHash, randomBytes } from 'node:crypto';

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export function newLinkToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, hash: hashLinkToken(token) };
}

export function hashLinkToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Whether `token` has the shape of one we issue (anything else cannot be one). */
export function isLinkToken(token: string): boolean {
  return TOKEN.test(token);
}
