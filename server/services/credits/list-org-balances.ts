import type { Prisma } from '../../db/database.ts';

export interface OrgBalance {
  id: string;
  name: string;
  balanceMicros: bigint;
  isTrial: boolean;
}

/** Orgs and their balances for operators choosing where to grant credit; optional search by name or exact id. */
export async function listOrgBalances(prisma: Prisma, input: { query?: string | null; limit: number }): Promise<OrgBalance[]> {
  const q = input.query?.trim();
  return prisma.org.findMany({
    where: q ? { OR: [{ id: q }, { name: { contains: q } }] } : {},
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: Math.min(Math.max(Math.trunc(input.limit), 1), 100),
    select: { id: true, name: true, balanceMicros: true, isTrial: true },
  });
}
