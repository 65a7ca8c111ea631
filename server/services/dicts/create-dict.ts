import type { Prisma } from '../../db/database.js';
import { newId } from '../../db/ids.js';
import type { CreateDictInput } from './dict-input.js';
import { DICT_TX_OPTIONS, checkDictCount, checkEntryCount } from './dict-limits.js';
import { entryRows } from './dict-entry-rows.js';
import { DICT_SELECT, toDictRecord, type DictRecord } from './dict-record.js';

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
