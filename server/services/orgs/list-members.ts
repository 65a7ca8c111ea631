import type { Prisma } from '../../db/database.ts';

export interface OrgMember {
  userId: string;
  email: string;
  name: string | null;
  role: 'owner' | 'member';
  joinedAt: Date;
}

export interface PendingInvitation {
  id: string;
  email: string;
  role: 'owner' | 'member';
  createdAt: Date;
  expiresAt: Date;
}

/** The org's members (oldest first) and its invitations that have not expired (newest first). */
export async function listMembers(prisma: Prisma, input: { orgId: string; now?: Date }): Promise<{ members: OrgMember[]; invitations: PendingInvitation[] }> {
  const [memberships, invitations] = await Promise.all([
    prisma.membership.findMany({
      where: { orgId: input.orgId },
      orderBy: [{ createdAt: 'asc' }, { userId: 'asc' }],
      select: { role: true, createdAt: true, user: { select: { id: true, email: true, name: true } } },
    }),
    prisma.invitation.findMany({
      where: { orgId: input.orgId, expiresAt: { gt: input.now ?? new Date() } },
      orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
      select: { id: true, email: true, role: true, createdAt: true, expiresAt: true },
    }),
  ]);
  return {
    members: memberships.map((m) => ({ userId: m.user.id, email: m.user.email, name: m.user.name, role: m.role, joinedAt: m.createdAt })),
    invitations,
  };
}
