import type { Database } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { newLinkToken } from '../users/link-token.ts';
import { normalizeEmail } from '../users/normalize-email.ts';
import { acceptPendingInvitations, invitationExpiry } from './invitations.ts';
import type { OrgMember, PendingInvitation } from './list-members.ts';
import { lockOrg } from './org-lock.ts';

export type AddMemberResult =
  | { status: 'added'; member: OrgMember }
  /** `token` is the invite link's secret: returned once, stored only as its hash. */
  | { status: 'invited'; invitation: PendingInvitation; token: string };

/**
 * Adds someone to an org by email. An account whose email is verified joins at once. Any
 * other email (no account, or an account that never proved the address: whoever typed it
 * into a sign-up form may not own it) gets a pending invitation with a fresh invite link,
 * replacing an earlier one for the same email and org and its link. The owner shares the
 * link; nothing is mailed.
 */
export async function addMember(
  db: Database,
  input: { orgId: string; email: string; role: 'owner' | 'member'; invitedByUserId: string | null; now?: Date },
): Promise<AddMemberResult> {
  const email = normalizeEmail(input.email);
  const now = input.now ?? new Date();
  const link = newLinkToken();
  const result = await db.prisma.$transaction(async (tx): Promise<AddMemberResult> => {
    await lockOrg(tx, input.orgId);
    const user = await tx.user.findUnique({ where: { email }, select: { id: true, email: true, name: true, emailVerifiedAt: true } });
    if (user) {
      const existing = await tx.membership.findUnique({ where: { userId_orgId: { userId: user.id, orgId: input.orgId } }, select: { role: true } });
      if (existing) throw new ServiceError('conflict', `${email} is already a member of this organization.`, 'email');
    }
    if (user?.emailVerifiedAt) {
      const membership = await tx.membership.create({ data: { userId: user.id, orgId: input.orgId, role: input.role }, select: { createdAt: true } });
      await tx.invitation.deleteMany({ where: { orgId: input.orgId, email } });
      return { status: 'added', member: { userId: user.id, email: user.email, name: user.name, role: input.role, joinedAt: membership.createdAt } };
    }
    // Lapsed invitations of this org are dropped here rather than by a sweeper: this is the
    // only place they are created.
    await tx.invitation.deleteMany({ where: { orgId: input.orgId, expiresAt: { lte: now } } });
    const fields = { role: input.role, invitedByUserId: input.invitedByUserId, tokenHash: link.hash, createdAt: now, expiresAt: invitationExpiry(now) };
    const invitation = await tx.invitation.upsert({
      where: { orgId_email: { orgId: input.orgId, email } },
      create: { id: newId('inv'), orgId: input.orgId, email, ...fields },
      update: fields,
      select: { id: true, email: true, role: true, createdAt: true, expiresAt: true },
    });
    return { status: 'invited', invitation, token: link.token };
  });
  if (result.status === 'invited') {
    // The account may have verified its email in the instant between the check above and
    // the invitation's commit, its own transaction not seeing the invitation: apply it now
    // (acceptPendingInvitations does nothing for an unverified email).
    const user = await db.prisma.user.findUnique({ where: { email }, select: { id: true } });
    if (user) await acceptPendingInvitations(db.prisma, { userId: user.id });
  }
  return result;
}
