// Following an invite link ({dashboard_url}/invite/<token>) signed in: whoever holds the link
// the owner shared joins with the invited role, whatever email their account has (holding the
// link is the proof). Single use; a newer link for the same email and org, a withdrawal or
// the 30 days end it.
import type { Database, Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { hashLinkToken, isLinkToken } from '../users/link-token.ts';
import { lockOrg } from './org-lock.ts';

export interface InvitationByLink {
  orgId: string;
  orgName: string;
  email: string;
  role: 'owner' | 'member';
  expiresAt: Date;
}

const invalidLink = () =>
  new ServiceError(
    'invalid_grant',
    'This invite link is not valid: it was already used, withdrawn, or replaced by a newer link. Ask the owner who invited you for a new one.',
    'token',
  );
const expiredLink = () => new ServiceError('expired_token', 'This invite link has expired. Ask the owner who invited you for a new one.', 'token');

async function findByLink(prisma: Prisma, token: string, now: Date) {
  if (!isLinkToken(token)) throw invalidLink();
  const invitation = await prisma.invitation.findUnique({
    where: { tokenHash: hashLinkToken(token) },
    select: { id: true, orgId: true, email: true, role: true, expiresAt: true, org: { select: { name: true } } },
  });
  if (!invitation) throw invalidLink();
  if (invitation.expiresAt <= now) throw expiredLink();
  return invitation;
}

/** What the link would do, for the page to show before the user accepts. */
export async function describeInvitation(prisma: Prisma, input: { token: string; now?: Date }): Promise<InvitationByLink> {
  const i = await findByLink(prisma, input.token, input.now ?? new Date());
  return { orgId: i.orgId, orgName: i.org.name, email: i.email, role: i.role, expiresAt: i.expiresAt };
}

export async function acceptInvitation(
  db: Database,
  input: { token: string; userId: string; now?: Date },
): Promise<InvitationByLink & { alreadyMember: boolean }> {
  const now = input.now ?? new Date();
  const found = await findByLink(db.prisma, input.token, now);
  return db.prisma.$transaction(async (tx) => {
    await lockOrg(tx, found.orgId);
    // Deleting by id and hash is the single use: of two acceptances at once, one deletes it.
    const { count } = await tx.invitation.deleteMany({ where: { id: found.id, tokenHash: hashLinkToken(input.token), expiresAt: { gt: now } } });
    if (count !== 1) throw invalidLink();
    const existing = await tx.membership.findUnique({ where: { userId_orgId: { userId: input.userId, orgId: found.orgId } }, select: { role: true } });
    if (!existing) await tx.membership.create({ data: { userId: input.userId, orgId: found.orgId, role: found.role, createdAt: now } });
    return { orgId: found.orgId, orgName: found.org.name, email: found.email, role: found.role, expiresAt: found.expiresAt, alreadyMember: Boolean(existing) };
  });
}
