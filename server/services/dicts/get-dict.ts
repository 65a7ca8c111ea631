import type { Prisma } from '../../db/database.ts';
import { DICT_SELECT, dictNotFound, toDictRecord, type DictRecord } from './dict-record.ts';

/** One of the org's live dictionaries with its entries in order; 404 dict_not_found otherwise. */
export async function getDict(prisma: Prisma, input: { orgId: string; dictId: string }): Promise<DictRecord> {
  const row = await prisma.pronunciationDict.findFirst({ where: { id: input.dictId, orgId: input.orgId, deletedAt: null }, select: DICT_SELECT });
  if (!row) throw dictNotFound(input.dictId);
  return toDictRecord(row);
}
