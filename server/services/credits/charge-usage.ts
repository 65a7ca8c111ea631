import type { BudgetedKey, HotStore, UsageRecord } from '../../db/hot-store.ts';

/**
 * Debits a metered request after its cost is known, releasing the credit it had reserved
 * (`releaseMicros`) in the same write: requests reserve their cost before running, so the
 * balance stays at or above zero but for what a reservation could not bound (docs/api-conventions.md, "Credits").
 * The debit itself is one atomic statement/transaction: concurrent debits never lose or
 * double an amount. On SQLite the returned balance comes before the commit, which follows
 * within about 10 ms (HotStore.applyUsageDebit).
 */
export function chargeUsage(
  store: HotStore,
  input: { orgId: string; apiKeyId: string; requestId: string; costMicros: bigint; usage: UsageRecord; releaseMicros?: bigint; budgetedKey?: BudgetedKey },
): Promise<bigint> {
  return store
    .applyUsageDebit({
      orgId: input.orgId,
      amountMicros: -input.costMicros,
      kind: 'usage',
      description: `${input.usage.modality} ${input.usage.modelId}`,
      apiKeyId: input.apiKeyId,
      requestId: input.requestId,
      usage: input.usage,
      releaseMicros: input.releaseMicros,
      // A key with a spend limit: the debit counts in its window, and releases its reservation too.
      budgetedKey: input.budgetedKey,
    })
    .then(zeroIfGone);
}

// The org existed when the key was verified; it can only be gone if deleted meanwhile.
const zeroIfGone = (balance: bigint | null): bigint => balance ?? 0n;
