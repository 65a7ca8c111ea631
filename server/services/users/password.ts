import bcrypt from 'bcryptjs';

// Cost 11: ~0.3 s per hash with bcryptjs on this machine class (2 cores). Slow enough to make
// offline guessing expensive (OWASP asks for >= 10), fast enough for an interactive sign-in.
const COST = 11;

export const MIN_PASSWORD_LENGTH = 8;
// bcrypt reads only the first 72 bytes; longer passwords would silently share a hash.
export const MAX_PASSWORD_BYTES = 72;

export function hashPassword(password: string): Promise<string> {
  return bcrypt.hash(password, COST);
}

export function verifyPassword(password: string, hash: string): Promise<boolean> {
  return bcrypt.compare(password, hash);
}

let dummyHash: Promise<string> | undefined;
/**
 * A real hash of a random string, compared against when the email is unknown so that
 * "no such user" takes as long as "wrong password". Made on first use, not at import.
 */
export function dummyPasswordHash(): Promise<string> {
  return (dummyHash ??= bcrypt.hash(`no-such-user-${crypto.randomUUID()}`, COST));
}
