import type { Prisma } from '../../db/database.ts';
import type { UpdateDictInput } from './dict-input.ts';
import { DICT_TX_OPTIONS, checkEntryCount } from './dict-limits.ts';
import { entryRows } from './dict-entry-rows.ts';
import { DICT_SELECT, dictNotFound, toDictRecord, type DictRecord } from './dict-record.ts';

/**
 * Renames a dictionary and/or replaces all of its entries, in one transaction: a synthesis
 * that reads the dictionary meanwhile sees the old entries or the new ones, never a mix.
 */
export async function updateDict(prisma: Prisma, input: { orgId: string; dictId: string; update: UpdateDictInput }): Promise<DictRecord> {
  const { name, entries } = input.update;
  const row = await prisma.$transaction(async (tx) => {
    // The update doubles as the existence and ownership check, and bumps updatedAt even when
    // only the entries change.
    const { count } = await tx.pronunciationDict.updateMany({
      where: { id: input.dictId, orgId: input.orgId, deletedAt: null },
      data: { ...(name !== undefined ? { name } : {}), updatedAt: new Date() },
    });
    if (count === 0) throw dictNotFound(input.dictId);
    if (entries !== undefined) {
      await checkEntryCount(tx, { orgId: input.orgId, adding: entries.length, exceptDictId: input.dictId });
      await tx.pronunciationEntry.deleteMany({ where: { dictId: input.dictId } });
      if (entries.length > 0) await tx.pronunciationEntry.createMany({ data: entryRows(input.dictId, entries) });
    }
    return tx.pronunciationDict.findUniqueOrThrow({ where: { id: input.dictId }, select: DICT_SELECT });
  }, DICT_TX_OPTIONS);
  return toDictRecord(row);
}
