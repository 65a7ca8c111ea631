import type { HotStore, UsageRecord } from '../../db/hot-store.js';

/**
 * Debits a metered request after its cost is known. Requests are admitted while the balance
 * is positive and debited when they finish, so a balance can go below zero by at most the
 * cost of the requests that were already in flight when it crossed zero (README, "Credits").
 * The debit itself is one atomic statement/transaction: concurrent debits never lose or
 * double an amount. On SQLite the returned balance comes before the commit, which follows
 * within about 10 ms (HotStore.applyUsageDebit).
 */
export function chargeUsage(
  store: HotStore,
  input: { orgId: string; apiKeyId: string; requestId: string; costMicros: bigint; usage: UsageRecord },
): Promise<bigint> {
  return store.applyUsageDebit({
    orgId: input.orgId,
    amountMicros: -input.costMicros,
    kind: 'usage',
    description: `${input.usage.modality} ${input.usage.modelId}`,
    apiKeyId: input.apiKeyId,
    requestId: input.requestId,
    usage: input.usage,
  }).then(zeroIfGone);
}

// The org existed when the key was verified; it can only be gone if deleted meanwhile.
const zeroIfGone = (balance: bigint | null): bigint => balance ?? 0n;
