// Pending invitations: an owner added an email that has no account with a proven address.
// Each carries an invite link (only the token's SHA-256 is stored) that the owner shares:
// following it signed in accepts it for that account (accept-invitation.ts). Without the
// link, an invitation becomes a membership only for an account whose email is verified
// (users/verify-email.ts, or an OAuth provider that vouches for it), never for an address
// that was merely typed into a sign-up form. Never applied after it expires. Stored one per
// org and email (adding the email again replaces it, and its link).
import type { Prisma } from '../../db/database.ts';

export type Tx = Parameters<Parameters<Prisma['$transaction']>[0]>[0];

/** How long an invitation waits for its email to sign up before it lapses. */
export const INVITATION_TTL_DAYS = 30;

export function invitationExpiry(now: Date): Date {
  return new Date(now.getTime() + INVITATION_TTL_DAYS * 24 * 60 * 60 * 1000);
}

/**
 * Turns the live invitations for `email` into memberships of `userId` and deletes them (and
 * any expired ones for the email). Only for an account that has PROVEN it owns `email`.
 * `joinedAt` is the memberships' createdAt. Memberships the user already has are left as
 * they are. Returns the org ids joined.
 */
export async function acceptInvitations(tx: Tx, input: { userId: string; email: string; now: Date; joinedAt?: Date }): Promise<string[]> {
  const pending = await tx.invitation.findMany({ where: { email: input.email }, select: { id: true, orgId: true, role: true, expiresAt: true } });
  if (pending.length === 0) return [];
  const joined: string[] = [];
  for (const invitation of pending) {
    if (invitation.expiresAt <= input.now) continue;
    const existing = await tx.membership.findUnique({ where: { userId_orgId: { userId: input.userId, orgId: invitation.orgId } }, select: { role: true } });
    if (existing) continue;
    await tx.membership.create({ data: { userId: input.userId, orgId: invitation.orgId, role: invitation.role, createdAt: input.joinedAt ?? input.now } });
    joined.push(invitation.orgId);
  }
  await tx.invitation.deleteMany({ where: { id: { in: pending.map((i) => i.id) } } });
  return joined;
}

/**
 * For an existing account (signing in, or just verified): applies the invitations for its
 * email when that email is verified; nothing otherwise. One cheap query when there are none,
 * which is nearly always.
 */
export async function acceptPendingInvitations(prisma: Prisma, input: { userId: string }): Promise<string[]> {
  const user = await prisma.user.findUnique({ where: { id: input.userId }, select: { email: true, emailVerifiedAt: true } });
  if (!user?.emailVerifiedAt) return [];
  if ((await prisma.invitation.count({ where: { email: user.email } })) === 0) return [];
  try {
    return await prisma.$transaction((tx) => acceptInvitations(tx, { userId: input.userId, email: user.email, now: new Date() }));
  } catch (e) {
    // Two sign-ins of the same account at once: the other one made the membership first.
    if ((e as { code?: string }).code === 'P2002') return [];
    throw e;
  }
}
