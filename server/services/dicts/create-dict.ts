import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import type { CreateDictInput } from './dict-input.ts';
import { DICT_TX_OPTIONS, checkDictCount, checkEntryCount } from './dict-limits.ts';
import { entryRows } from './dict-entry-rows.ts';
import { DICT_SELECT, toDictRecord, type DictRecord } from './dict-record.ts';

/** Creates a dictionary for the org from validated input (parseCreateDict / CreateDictSchema). */
export async function createDict(prisma: Prisma, input: { orgId: string; dict: CreateDictInput }): Promise<DictRecord> {
  const id = newId('pdict');
  const row = await prisma.$transaction(async (tx) => {
    await checkDictCount(tx, input.orgId);
    await checkEntryCount(tx, { orgId: input.orgId, adding: input.dict.entries.length });
    await tx.pronunciationDict.create({ data: { id, orgId: input.orgId, name: input.dict.name } });
    if (input.dict.entries.length > 0) await tx.pronunciationEntry.createMany({ data: entryRows(id, input.dict.entries) });
    return tx.pronunciationDict.findUniqueOrThrow({ where: { id }, select: DICT_SELECT });
  }, DICT_TX_OPTIONS);
  return toDictRecord(row);
}
