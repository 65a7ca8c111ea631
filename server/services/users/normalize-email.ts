import { ServiceError } from '../errors.ts';

// Deliberately loose: the address only has to look like one; it is never mailed to here.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
// Control characters (NUL makes PostgreSQL refuse the whole statement) are never part of one.
const CONTROL = /\p{Cc}/u;

/** Emails are stored trimmed and lower-case, so sign-up and sign-in agree on identity. */
export function normalizeEmail(email: string): string {
  const normalized = email.trim().toLowerCase();
  if (normalized.length > 254 || !EMAIL.test(normalized) || CONTROL.test(normalized)) {
    throw new ServiceError('invalid_request', 'Enter a valid email address.', 'email');
  }
  return normalized;
}
