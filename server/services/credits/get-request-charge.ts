import type { Prisma } from '../../db/database.ts';

/** What one request cost the org, from its usage debits in the ledger (several for a session or a failover, one usually). */
export interface RequestCharge {
  costMicros: bigint;
  inputTokens: number;
  outputTokens: number;
  characters: number;
  audioMillis: number;
  /** The balance after the request's last debit. */
  balanceAfterMicros: bigint;
}

/**
 * How far back a request's debits are looked for. The ledger has no index on request ids (one
 * more index entry on every debit is hot-path write work); its (orgId, createdAt) index bounds
 * the read to the org's debits of these last minutes; without it, each of the playground's polls
 * read the whole ledger (PostgreSQL chose a sequential scan of every org's rows).
 */
export const REQUEST_CHARGE_WINDOW_MS = 10 * 60_000;

/**
 * The charge of a request of the last REQUEST_CHARGE_WINDOW_MS before `now` (ms), summed from the
 * org's usage debits carrying its request id (the `x-request-id` of its answer); null while none
 * is written (a streamed answer is debited just after its last event), for an older request, or
 * when the id is another org's.
 */
export async function getRequestCharge(prisma: Prisma, input: { orgId: string; requestId: string; now: number }): Promise<RequestCharge | null> {
  const debits = await prisma.ledgerEntry.findMany({
    where: { orgId: input.orgId, createdAt: { gte: new Date(input.now - REQUEST_CHARGE_WINDOW_MS) }, requestId: input.requestId, kind: 'usage' },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
    select: { amountMicros: true, balanceAfterMicros: true, inputTokens: true, outputTokens: true, characters: true, audioMillis: true },
  });
  if (debits.length === 0) return null;
  return {
    costMicros: debits.reduce((sum, d) => sum - d.amountMicros, 0n),
    inputTokens: debits.reduce((sum, d) => sum + d.inputTokens, 0),
    outputTokens: debits.reduce((sum, d) => sum + d.outputTokens, 0),
    characters: debits.reduce((sum, d) => sum + d.characters, 0),
    audioMillis: debits.reduce((sum, d) => sum + d.audioMillis, 0),
    balanceAfterMicros: debits.at(-1)!.balanceAfterMicros,
  };
}
