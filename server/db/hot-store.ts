// The per-request paths (key verification, balance checks, debits) in raw SQL, one
// implementation per dialect, because they run on every request and an ORM round adds
// more than the whole gateway core's latency budget. Everything else goes through Prisma.
import type { KeyBudget } from '../services/keys/key-budget.ts';
import type { Modality } from './generated/sqlite/enums.ts';

export interface KeyAuthRecord {
  keyId: string;
  orgId: string;
  status: 'active' | 'revoked';
  rateLimitRpm: number | null;
  /** An anonymous agent's trial key: tighter admission caps. */
  isTrial: boolean;
  balanceMicros: bigint;
  /** Credit reserved by running requests of the org (every process's): not spendable. */
  heldMicros: bigint;
  /** When the key stops working (ms since the epoch); null: never. */
  expiresAt: number | null;
  /** The models the key may use; null: every model. */
  allowedModels: ReadonlySet<string> | null;
  /** The key's spend limit and where it stands (its window's spend, its reservations); null: none. */
  budget: KeyBudget | null;
}

/**
 * A key with a spend limit in a reservation, a release or a debit: the store keeps its
 * reservations and its window's spend beside the org's (server/services/keys/key-budget.ts).
 */
export interface BudgetedKey {
  keyId: string;
  limitMicros: bigint;
  /** The start of the window the gateway's clock is in (ms since the epoch). */
  windowStart: number;
}

/** A reservation made, or who could not cover it: the org's balance or the key's budget. */
export type ReserveOutcome = 'reserved' | 'org_short' | 'key_short';

export interface UsageRecord {
  modelId: string;
  modality: Modality;
  route: string;
  inputTokens?: number;
  outputTokens?: number;
  characters?: number;
  audioMillis?: number;
}

export interface LedgerChange {
  orgId: string;
  /** Signed: negative for debits, positive for grants. */
  amountMicros: bigint;
  kind: 'grant' | 'usage' | 'refund' | 'transfer' | 'adjustment';
  description: string;
  apiKeyId?: string | null;
  requestId?: string | null;
  /** What a usage debit paid for: stored on the same ledger row. */
  usage?: UsageRecord;
  /** Credit this process reserved for the request that the debit settles: released with it. */
  releaseMicros?: bigint;
  /** The debiting key has a spend limit (`apiKeyId` is that key): the debit counts in its window and the release is its too. */
  budgetedKey?: BudgetedKey;
}

export interface HotStore {
  /** The key with its org's balance, in one indexed lookup. */
  findKeyByHash(hash: string): Promise<KeyAuthRecord | null>;
  getBalance(orgId: string): Promise<bigint | null>;
  /**
   * Atomically moves an org's balance and appends the ledger row (with its usage) in one
   * transaction. Returns the balance after the change, or null when the org does not exist.
   */
  applyLedgerChange(change: LedgerChange): Promise<bigint | null>;
  /**
   * A usage debit, with the same atomicity as applyLedgerChange. PostgreSQL: exactly that.
   * SQLite: resolves at once with the balance after the debit as this process tracks it;
   * the row is committed later in the same event-loop turn (docs/api-conventions.md, "Credits").
   */
  applyUsageDebit(change: LedgerChange): Promise<bigint | null>;
  /**
   * Reserves credit for a running request when the org's balance minus what is already
   * reserved (by every process) covers `amountMicros` and, for a key with a spend limit, so
   * does its limit less its window's spend and reservations: both are then reserved together,
   * or neither. PostgreSQL: one conditional statement, exact across replicas. SQLite: decided
   * from this process's tracked balances and reservations, and committed with the debits of the
   * turn (other processes on the same file see it within ~10 ms; docs/api-conventions.md, "Credits").
   */
  reserve(orgId: string, amountMicros: bigint, key?: BudgetedKey): Promise<ReserveOutcome>;
  /** Gives back reserved credit that no debit settles (the request failed or ended); `keyId`: the key's too (it has a spend limit). */
  release(orgId: string, amountMicros: bigint, keyId?: string): void;
  /**
   * Renews this process's reservations and releases those of processes that stopped renewing
   * theirs (they died): called every few seconds by each gateway.
   */
  maintainHolds(ttlMs: number): Promise<void>;
  /** The current status of each key that still exists (revocation of open sessions). */
  keyStatuses(keyIds: readonly string[]): Promise<Map<string, 'active' | 'revoked'>>;
  /** Resolves once every debit applied so far is committed; rejects while they cannot be. */
  settle(): Promise<void>;
  /** True while debits already answered could not be written yet (SQLite; retried in order). */
  debitsFailing(): boolean;
  /** Told when answered debits fail to be written (they stay queued and are retried). */
  onDeferredWriteError?: (err: unknown, queued: number) => void;
  /** Batched last-used stamps: one write per flush, not per request. */
  touchKeys(lastUsed: ReadonlyMap<string, Date>): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
