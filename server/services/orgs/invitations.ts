// Pending invitations: an owner added an email that had no account yet. They become
// memberships when an account with that email exists (created, or signing in), never
// after they expire. Stored one per org and email (adding the email again replaces it).
import type { Prisma } from '../../db/database.js';

export type Tx = Parameters<Parameters<Prisma['$transaction']>[0]>[0];

/** How long an invitation waits for its email to sign up before it lapses. */
export const INVITATION_TTL_DAYS = 30;

export function invitationExpiry(now: Date): Date {
  return new Date(now.getTime() + INVITATION_TTL_DAYS * 24 * 60 * 60 * 1000);
}

/**
 * Turns the live invitations for `email` into memberships of `userId` and deletes them (and
 * any expired ones for the email). `joinedAt` is the memberships' createdAt. Memberships the
 * user already has are left as they are. Returns the org ids joined.
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
 * For an existing account (signing in): applies invitations that were added while the account
 * was being created, which the account's own transaction could not see. One cheap query when
 * there are none, which is nearly always.
 */
export async function acceptPendingInvitations(prisma: Prisma, input: { userId: string; email: string }): Promise<string[]> {
  if ((await prisma.invitation.count({ where: { email: input.email } })) === 0) return [];
  try {
    return await prisma.$transaction((tx) => acceptInvitations(tx, { ...input, now: new Date() }));
  } catch (e) {
    // Two sign-ins of the same account at once: the other one made the membership first.
    if ((e as { code?: string }).code === 'P2002') return [];
    throw e;
  }
}
