import type { Database } from '../../db/database.ts';
import { ServiceError, isServiceError } from '../errors.ts';
import { createAccount } from './create-account.ts';
import { normalizeEmail } from './normalize-email.ts';
import { MAX_PASSWORD_BYTES, MIN_PASSWORD_LENGTH, hashPassword } from './password.ts';
import { sendVerificationEmail, type VerificationMailDeps } from './verify-email.ts';

export { FIRST_ADMIN_MARKER } from './create-account.ts';

export interface SignUpInput {
  email: string;
  password: string;
  name?: string | null;
}

export interface SignedUpUser {
  userId: string;
  email: string;
  orgId: string;
  isPlatformAdmin: boolean;
  /** Orgs joined through pending invitations: none, as the email is not proven yet. */
  joinedOrgIds: string[];
  /** off: the server sends no mail; sent / failed: the verification link's fate. */
  verificationEmail: 'off' | 'sent' | 'failed';
}

/**
 * Email and password sign-up: checks the password, then creates the account (user, personal
 * org, owner membership; see createAccount). The email is only claimed, not proven: pending
 * invitations for it are not applied. With `mail` (SVC_SMTP_URL set) a verification link is
 * mailed; an SMTP failure does not undo the account (the link can be sent again).
 */
export async function signUp(db: Database, input: SignUpInput, options: { mail?: Omit<VerificationMailDeps, 'db'> | null } = {}): Promise<SignedUpUser> {
  const email = normalizeEmail(input.email);
  if (input.password.length < MIN_PASSWORD_LENGTH) {
    throw new ServiceError('invalid_request', `Password must be at least ${MIN_PASSWORD_LENGTH} characters.`, 'password');
  }
  if (Buffer.byteLength(input.password) > MAX_PASSWORD_BYTES) {
    throw new ServiceError('invalid_request', `Password must be at most ${MAX_PASSWORD_BYTES} bytes.`, 'password');
  }
  const name = input.name?.trim() || null;
  if (name && name.length > 100) throw new ServiceError('invalid_request', 'Name must be at most 100 characters.', 'name');

  if (await db.prisma.user.findUnique({ where: { email }, select: { id: true } })) {
    throw new ServiceError('conflict', 'An account with this email already exists. Sign in instead.', 'email');
  }
  // Hash outside the transaction: it takes ~0.3 s and must not hold a database lock.
  const passwordHash = await hashPassword(input.password);
  const account = await createAccount(db, { email, name, passwordHash, emailVerified: false });
  let verificationEmail: SignedUpUser['verificationEmail'] = 'off';
  if (options.mail) {
    try {
      await sendVerificationEmail({ db, ...options.mail }, { userId: account.userId });
      verificationEmail = 'sent';
    } catch (e) {
      if (!isServiceError(e) || e.code !== 'mail_unavailable') throw e;
      verificationEmail = 'failed';
    }
  }
  return {
    userId: account.userId,
    email: account.email,
    orgId: account.orgId,
    isPlatformAdmin: account.isPlatformAdmin,
    joinedOrgIds: account.joinedOrgIds,
    verificationEmail,
  };
}
