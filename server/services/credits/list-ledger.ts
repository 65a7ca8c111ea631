import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

export interface LedgerRow {
  id: string;
  kind: 'grant' | 'usage' | 'refund' | 'transfer' | 'adjustment';
  amountMicros: bigint;
  balanceAfterMicros: bigint;
  description: string;
  apiKeyId: string | null;
  requestId: string | null;
  createdAt: Date;
}

export interface LedgerPage {
  entries: LedgerRow[];
  /** Pass back as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
  total: number;
}

/** An org's ledger, newest first, in pages; the cursor is the id of the last row seen. */
export async function listLedger(prisma: Prisma, input: { orgId: string; cursor?: string | null; limit: number }): Promise<LedgerPage> {
  const limit = Math.min(Math.max(Math.trunc(input.limit), 1), 200);
  if (input.cursor) {
    const anchor = await prisma.ledgerEntry.findFirst({ where: { id: input.cursor, orgId: input.orgId }, select: { id: true } });
    if (!anchor) throw new ServiceError('invalid_request', 'Unknown ledger cursor.', 'cursor');
  }
  const [rows, total] = await Promise.all([
    prisma.ledgerEntry.findMany({
      where: { orgId: input.orgId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: limit + 1,
      ...(input.cursor ? { cursor: { id: input.cursor }, skip: 1 } : {}),
      select: { id: true, kind: true, amountMicros: true, balanceAfterMicros: true, description: true, apiKeyId: true, requestId: true, createdAt: true },
    }),
    prisma.ledgerEntry.count({ where: { orgId: input.orgId } }),
  ]);
  const entries = rows.slice(0, limit);
  return { entries, nextCursor: rows.length > limit ? entries[entries.length - 1]!.id : null, total };
}
