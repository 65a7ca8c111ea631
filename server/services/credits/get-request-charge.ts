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
 * The request's charge, summed from the org's usage debits carrying its request id (the
 * `x-request-id` of its answer); null while none is written (a streamed answer is debited just
 * after its last event) or when the id is another org's.
 */
export async function getRequestCharge(prisma: Prisma, input: { orgId: string; requestId: string }): Promise<RequestCharge | null> {
  const debits = await prisma.ledgerEntry.findMany({
    where: { orgId: input.orgId, requestId: input.requestId, kind: 'usage' },
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
