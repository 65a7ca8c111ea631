import type { Database } from '../../db/database.js';
import { isServiceError } from '../errors.js';
import { acceptPendingInvitations } from '../orgs/invitations.js';
import { createAccount } from './create-account.js';
import { normalizeEmail } from './normalize-email.js';

export interface OAuthIdentity {
  /** The email the provider reports for the account (GitHub: the primary one). */
  email: string | null | undefined;
  /** Whether the provider says that email is verified. */
  emailVerified: boolean;
  name?: string | null | undefined;
}

export type OAuthSignInResult =
  | { ok: true; user: { id: string; email: string; name: string | null }; created: boolean }
  | { ok: false; reason: 'email_missing' | 'email_unverified' };

/**
 * Resolves an OAuth sign-in to an account. The email is the identity (there is no table of
 * provider accounts), so it must be one the provider has verified: an account with that email
 * (made by password sign-up or another provider) is signed into, and a new email gets a new
 * account exactly as email sign-up makes one (personal org, pending invitations, first user
 * of the instance is platform admin). An unverified email is refused for new accounts too:
 * otherwise anyone could take an address they do not own, and the invitations waiting for it.
 */
export async function signInWithOAuth(db: Database, identity: OAuthIdentity): Promise<OAuthSignInResult> {
  let email: string;
  try {
    email = normalizeEmail(identity.email ?? '');
  } catch (e) {
    if (isServiceError(e)) return { ok: false, reason: 'email_missing' };
    throw e;
  }
  if (!identity.emailVerified) return { ok: false, reason: 'email_unverified' };

  const existing = await db.prisma.user.findUnique({ where: { email }, select: { id: true, email: true, name: true } });
  if (existing) {
    await acceptPendingInvitations(db.prisma, { userId: existing.id, email });
    return { ok: true, user: existing, created: false };
  }
  const name = identity.name?.trim().slice(0, 100) || null;
  try {
    const account = await createAccount(db, { email, name, passwordHash: null });
    return { ok: true, user: { id: account.userId, email: account.email, name: account.name }, created: true };
  } catch (e) {
    // The same person finishing two sign-ins at once: the other one created the account.
    if (isServiceError(e) && e.code === 'conflict') {
      const raced = await db.prisma.user.findUnique({ where: { email }, select: { id: true, email: true, name: true } });
      if (raced) return { ok: true, user: raced, created: false };
    }
    throw e;
  }
}
