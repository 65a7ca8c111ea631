// Proving an email address (only when the server sends mail, SVC_SMTP_URL): sign-up mails a
// link {dashboard_url}/verify-email/<token>; following it while signed in as that account
// sets User.emailVerifiedAt and applies the invitations waiting for the address. The link
// needs the account's session too: a link that reached the real owner of an address someone
// else signed up with must not verify that other person's account.
import type { Database } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { acceptInvitations } from '../orgs/invitations.ts';
import { hashLinkToken, isLinkToken, newLinkToken } from './link-token.ts';
import type { Mailer } from './mailer.ts';

export const VERIFY_EMAIL_PURPOSE = 'verify_email';
/** A day: long enough for a mail that arrives late, short enough that an old mailbox leak is stale. */
export const EMAIL_VERIFICATION_TTL_MS = 24 * 60 * 60 * 1000;

export interface VerificationMailDeps {
  db: Database;
  mailer: Mailer;
  /** `{dashboard_url}`: the link's base. */
  dashboardUrl: string;
  now?: Date;
}

export function verificationLink(dashboardUrl: string, token: string): string {
  return `${dashboardUrl}/verify-email/${token}`;
}

/** Mails a fresh single-use link to the account's address. Throws mail_unavailable when the SMTP server does not take it. */
export async function sendVerificationEmail(deps: VerificationMailDeps, input: { userId: string }): Promise<{ email: string; expiresAt: Date }> {
  const now = deps.now ?? new Date();
  const user = await deps.db.prisma.user.findUnique({ where: { id: input.userId }, select: { email: true, emailVerifiedAt: true } });
  if (!user) throw new ServiceError('not_found', 'No such account.');
  if (user.emailVerifiedAt) throw new ServiceError('conflict', 'Your email address is already verified.', 'email');
  const { token, hash } = newLinkToken();
  const expiresAt = new Date(now.getTime() + EMAIL_VERIFICATION_TTL_MS);
  const row = await deps.db.prisma.emailToken.create({
    data: { id: newId('emt'), userId: input.userId, tokenHash: hash, purpose: VERIFY_EMAIL_PURPOSE, email: user.email, createdAt: now, expiresAt },
    select: { id: true },
  });
  try {
    await deps.mailer.send({
      to: user.email,
      subject: 'Verify your email address',
      text: [
        'Someone (hopefully you) created an account with this email address.',
        '',
        'To verify the address, open this link while signed in to that account:',
        verificationLink(deps.dashboardUrl, token),
        '',
        'The link works once, for 24 hours. If you did not sign up, ignore this message: nothing is granted to that account on the strength of your address until it is verified.',
        '',
      ].join('\n'),
    });
  } catch (e) {
    // Nobody received this token; do not leave a live one behind.
    await deps.db.prisma.emailToken.deleteMany({ where: { id: row.id } });
    const error = new ServiceError('mail_unavailable', 'The verification email could not be sent. Try again in a few minutes.', 'email');
    throw Object.assign(error, { cause: e });
  }
  return { email: user.email, expiresAt };
}

const invalidLink = () => new ServiceError('invalid_grant', 'This verification link is not valid: it was already used, or it is not one we sent.', 'token');

/**
 * Follows a verification link as the signed-in `userId`: single use, 24 hours, for the
 * address the account still has. Returns the orgs joined through waiting invitations.
 */
export async function verifyEmail(db: Database, input: { token: string; userId: string; now?: Date }): Promise<{ email: string; joinedOrgIds: string[] }> {
  const now = input.now ?? new Date();
  if (!isLinkToken(input.token)) throw invalidLink();
  const tokenHash = hashLinkToken(input.token);
  const row = await db.prisma.emailToken.findUnique({
    where: { tokenHash },
    select: { id: true, userId: true, purpose: true, email: true, expiresAt: true, usedAt: true },
  });
  if (!row || row.purpose !== VERIFY_EMAIL_PURPOSE || row.usedAt) throw invalidLink();
  if (row.userId !== input.userId) {
    throw new ServiceError(
      'forbidden',
      'This link verifies the email of another account. Sign out, then sign in with the account that signed up with this address and open the link again.',
      'token',
    );
  }
  if (row.expiresAt <= now) throw new ServiceError('expired_token', 'This verification link has expired. Send a new one from the dashboard.', 'token');
  return db.prisma.$transaction(async (tx) => {
    // Marking it used first is the single use: of two clicks at once, one updates the row.
    const used = await tx.emailToken.updateMany({ where: { id: row.id, usedAt: null }, data: { usedAt: now } });
    if (used.count !== 1) throw invalidLink();
    const user = await tx.user.findUniqueOrThrow({ where: { id: input.userId }, select: { email: true } });
    // The address the link was sent to must still be the account's.
    if (user.email !== row.email) throw invalidLink();
    await tx.user.update({ where: { id: input.userId }, data: { emailVerifiedAt: now } });
    const joinedOrgIds = await acceptInvitations(tx, { userId: input.userId, email: user.email, now });
    return { email: user.email, joinedOrgIds };
  });
}
