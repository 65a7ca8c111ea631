import type { Prisma } from '../../db/database.ts';
import { MAX_DICTS_PER_ORG } from './dict-input.ts';
import type { DictSummaryRecord } from './dict-record.ts';

/**
 * The org's live dictionaries without their entries, newest first (ties by id, so the order
 * is stable). Not paginated: an org has at most MAX_DICTS_PER_ORG of them.
 */
export async function listDicts(prisma: Prisma, input: { orgId: string }): Promise<DictSummaryRecord[]> {
  const rows = await prisma.pronunciationDict.findMany({
    where: { orgId: input.orgId, deletedAt: null },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: MAX_DICTS_PER_ORG,
    select: { id: true, name: true, createdAt: true, updatedAt: true, _count: { select: { entries: true } } },
  });
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    entry_count: r._count.entries,
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  }));
}
