// What a metered request consumed, as the tests read it: the usage debits of the ledger
// (kind usage; usage is stored on the debit's row), with the cost as a positive amount.
import type { Prisma } from '../../server/db/database.ts';

export interface UsageRow {
  id: string;
  orgId: string;
  apiKeyId: string | null;
  requestId: string | null;
  modelId: string | null;
  modality: string | null;
  route: string | null;
  inputTokens: number;
  outputTokens: number;
  characters: number;
  audioMillis: number;
  /** -amountMicros of the debit. */
  costMicros: bigint;
  createdAt: Date;
}

/** Usage rows matching `where`, oldest first. */
export async function usageRows(prisma: Prisma, where: { orgId?: string; requestId?: string }): Promise<UsageRow[]> {
  const rows = await prisma.ledgerEntry.findMany({ where: { ...where, kind: 'usage' }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  return rows.map((r) => ({
    id: r.id,
    orgId: r.orgId,
    apiKeyId: r.apiKeyId,
    requestId: r.requestId,
    modelId: r.modelId,
    modality: r.modality,
    route: r.route,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    characters: r.characters,
    audioMillis: r.audioMillis,
    costMicros: -r.amountMicros,
    createdAt: r.createdAt,
  }));
}
