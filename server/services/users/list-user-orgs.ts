import type { Prisma } from '../../db/database.ts';

export interface UserOrg {
  id: string;
  name: string;
  role: 'owner' | 'member';
  joinedAt: Date;
}

/** Every org the user belongs to, oldest membership first (the personal org leads). */
export async function listUserOrgs(prisma: Prisma, input: { userId: string }): Promise<UserOrg[]> {
  const rows = await prisma.membership.findMany({
    where: { userId: input.userId },
    orderBy: [{ createdAt: 'asc' }, { orgId: 'asc' }],
    select: { role: true, createdAt: true, org: { select: { id: true, name: true } } },
  });
  return rows.map((m) => ({ id: m.org.id, name: m.org.name, role: m.role, joinedAt: m.createdAt }));
}
