import type { Database } from '../../db/database.ts';
import { isServiceError } from '../errors.ts';
import { acceptPendingInvitations } from '../orgs/invitations.ts';
import { createAccount } from './create-account.ts';
import { normalizeEmail } from './normalize-email.ts';

export interface OAuthIdentity {
  /** The email the provider reports for the account (GitHub: the primary one). */
  email: string | null | undefined;
  /** Whether the provider says that email is verified. */
  emailVerified: boolean;
  name?: string | null | undefined;
}

export type OAuthSignInResult =
  | { ok: true; user: { id: string; email: string; name: string | null }; created: boolean }
  | { ok: false; reason: 'email_missing' | 'email_unverified' | 'password_account_unverified' };

/**
 * Resolves an OAuth sign-in to an account. The email is the identity (there is no table of
 * provider accounts), so it must be one the provider has verified. A new email gets a new
 * account exactly as email sign-up makes one (personal org, first user of the instance is
 * platform admin), with the email verified and so its pending invitations applied.
 *
 * An existing account is signed into only when its own email is proven too. A password
 * account that never verified its address is refused (`password_account_unverified`):
 * anyone can type any address into the sign-up form, so that account may belong to someone
 * who does not own the address, and attaching the address's real owner to it would hand
 * them (and everything invited to the address) to the other. Its owner signs in with the
 * password and verifies the address first; an operator resolves a squatted address.
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

  const existing = await db.prisma.user.findUnique({
    where: { email },
    select: { id: true, email: true, name: true, passwordHash: true, emailVerifiedAt: true },
  });
  if (existing) {
    if (!existing.emailVerifiedAt) {
      if (existing.passwordHash) return { ok: false, reason: 'password_account_unverified' };
      // No password: only an OAuth provider could have made it (the migration marks those verified).
      await db.prisma.user.update({ where: { id: existing.id }, data: { emailVerifiedAt: new Date() } });
    }
    await acceptPendingInvitations(db.prisma, { userId: existing.id });
    return { ok: true, user: { id: existing.id, email: existing.email, name: existing.name }, created: false };
  }
  const name = identity.name?.trim().slice(0, 100) || null;
  try {
    const account = await createAccount(db, { email, name, passwordHash: null, emailVerified: true });
    return { ok: true, user: { id: account.userId, email: account.email, name: account.name }, created: true };
  } catch (e) {
    // The same person finishing two sign-ins at once: the other one created the account.
    if (isServiceError(e) && e.code === 'conflict') {
      const raced = await db.prisma.user.findUnique({ where: { email }, select: { id: true, email: true, name: true, passwordHash: true } });
      // Raced by a password sign-up instead: that account's email is not proven.
      if (raced?.passwordHash) return { ok: false, reason: 'password_account_unverified' };
      if (raced) return { ok: true, user: { id: raced.id, email: raced.email, name: raced.name }, created: false };
    }
    throw e;
  }
}
