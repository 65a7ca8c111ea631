import type { Prisma } from '../../db/database.ts';

export interface ActiveMembership {
  role: 'owner' | 'member';
  org: { id: string; name: string; balanceMicros: bigint };
}

/**
 * The org a signed-in user acts for: the requested one when the user is a member of it,
 * otherwise the user's oldest membership (the personal org made at sign-up). Null when the
 * user belongs to no org (or no longer exists).
 */
export async function getActiveMembership(prisma: Prisma, input: { userId: string; orgId?: string | null }): Promise<ActiveMembership | null> {
  const select = { role: true, org: { select: { id: true, name: true, balanceMicros: true } } } as const;
  if (input.orgId) {
    const requested = await prisma.membership.findUnique({ where: { userId_orgId: { userId: input.userId, orgId: input.orgId } }, select });
    if (requested) return requested;
  }
  return prisma.membership.findFirst({ where: { userId: input.userId }, orderBy: [{ createdAt: 'asc' }, { orgId: 'asc' }], select });
}
