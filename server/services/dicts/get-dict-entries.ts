import type { Prisma } from '../../db/database.js';
import { ServiceError } from '../errors.js';
import type { PronunciationEntry } from './apply-pronunciation.js';

/** The entries of one of the org's dictionaries, in order; 404 dict_not_found otherwise. */
export async function getDictEntries(prisma: Prisma, input: { orgId: string; dictId: string }): Promise<PronunciationEntry[]> {
  const dict = await prisma.pronunciationDict.findFirst({
    where: { id: input.dictId, orgId: input.orgId, deletedAt: null },
    select: { entries: { orderBy: { position: 'asc' }, select: { grapheme: true, alias: true, phoneme: true, caseSensitive: true } } },
  });
  if (!dict) throw new ServiceError('dict_not_found', `No pronunciation dictionary with id '${input.dictId}' in this organization.`, 'pronunciation_dict_id');
  return dict.entries;
}
