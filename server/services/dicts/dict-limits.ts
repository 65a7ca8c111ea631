// The org-wide caps of dict-input.ts, checked inside the transaction that writes. Without a
// lock, two requests racing can each pass and overshoot by one request's worth; these are
// bounds against abuse, not money, so that is accepted rather than serialising every write
// of an org.
import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { MAX_DICTS_PER_ORG, MAX_ENTRIES_PER_ORG } from './dict-input.ts';

type Tx = Parameters<Parameters<Prisma['$transaction']>[0]>[0];

export async function checkDictCount(tx: Tx, orgId: string): Promise<void> {
  const live = await tx.pronunciationDict.count({ where: { orgId, deletedAt: null } });
  if (live >= MAX_DICTS_PER_ORG) {
    throw new ServiceError('invalid_request', `This organization already has ${MAX_DICTS_PER_ORG} pronunciation dictionaries, the maximum; delete one first.`);
  }
}

/** `adding` entries would join those of the org's other live dictionaries (not `exceptDictId`). */
export async function checkEntryCount(tx: Tx, input: { orgId: string; adding: number; exceptDictId?: string }): Promise<void> {
  if (input.adding === 0) return;
  const existing = await tx.pronunciationEntry.count({
    where: { dict: { orgId: input.orgId, deletedAt: null, ...(input.exceptDictId ? { id: { not: input.exceptDictId } } : {}) } },
  });
  if (existing + input.adding > MAX_ENTRIES_PER_ORG) {
    throw new ServiceError(
      'invalid_request',
      `entries: this organization's dictionaries may hold ${MAX_ENTRIES_PER_ORG.toLocaleString('en')} entries in all; ${existing.toLocaleString('en')} are used by its other dictionaries, so at most ${Math.max(0, MAX_ENTRIES_PER_ORG - existing).toLocaleString('en')} fit here.`,
      'entries',
    );
  }
}

/** Transactions here write up to a full dictionary; give them more than Prisma's 5 s default. */
export const DICT_TX_OPTIONS = { maxWait: 10_000, timeout: 30_000 } as const;
