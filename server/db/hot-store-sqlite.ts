import Database from 'better-sqlite3';
import { allowedModelsOf, budgetLeft, countSpend, type KeySpendState, type SpendWindow } from '../services/keys/key-budget.ts';
import { sqlTimestamp } from './dialect.ts';
import type { HotStore, KeyAuthRecord, LedgerChange } from './hot-store.ts';
import { holdOwnerId, newTimeOrderedId } from './ids.ts';
import { startCheckpointer } from './sqlite-checkpointer.ts';
import { watchCommits } from './sqlite-commit-watch.ts';

interface KeyRow {
  keyId: string;
  orgId: string;
  status: 'active' | 'revoked';
  rateLimitRpm: bigint | null;
  isTrial: bigint;
  balanceMicros: bigint;
  heldMicros: bigint;
  expiresAt: string | null;
  allowedModels: string | null;
  spendLimitMicros: bigint | null;
  spendWindow: SpendWindow | null;
  windowStartedAt: string | null;
  windowSpentMicros: bigint;
  keyHeldMicros: bigint;
}

/** A key's spend columns as read (timestamps as stored: ISO text). */
interface KeySpendRow {
  windowStartedAt: string | null;
  windowSpentMicros: bigint;
  heldMicros: bigint;
}

const spendStateOf = (row: KeySpendRow): KeySpendState => ({
  windowStartedAt: row.windowStartedAt === null ? null : Date.parse(row.windowStartedAt),
  spentMicros: row.windowSpentMicros,
  heldMicros: row.heldMicros,
});

/** How long a write waits for another connection's write lock before it fails (SQLITE_BUSY). */
export const SQLITE_LOCK_WAIT_MS = 10_000;

export function openSqlite(path: string): Database.Database {
  const db = new Database(path, { timeout: SQLITE_LOCK_WAIT_MS });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.defaultSafeIntegers(true);
  return db;
}

export function createSqliteHotStore(path: string, ownerId = holdOwnerId()): HotStore {
  const db = openSqlite(path);
  // Checkpoints run in a worker (sqlite-checkpointer.ts), not inside our commits.
  db.pragma('wal_autocheckpoint = 0');
  const checkpointer = startCheckpointer(path);
  const ts = (d: Date) => sqlTimestamp('sqlite', d);

  // SQLite waits for a write lock that another connection holds (the request log's writer,
  // the dashboard, another gateway) by sleeping the calling thread in its busy handler, for
  // 1, 2, 5, 10… ms at a time: on the gateway's thread, every request waits with it. So this
  // connection's writes are tried without waiting and, while the lock is taken, tried again
  // a few milliseconds later (the event loop serves requests meanwhile), failing as a busy
  // timeout would only after SQLITE_LOCK_WAIT_MS. Its reads never wait for a writer (WAL).
  // Plucked: SQLite re-prepares a PRAGMA at every run, and better-sqlite3 then compiles a new
  // row constructor (a `Function`) for a statement that returns rows; a plucked value needs none.
  const noWait = db.prepare('PRAGMA busy_timeout = 0').pluck();
  const wait = db.prepare(`PRAGMA busy_timeout = ${SQLITE_LOCK_WAIT_MS}`).pluck();
  const BUSY = Symbol('busy');
  const tryWrite = <T>(write: () => T): T | typeof BUSY => {
    noWait.get();
    try {
      return write();
    } catch (e) {
      if ((e as { code?: unknown }).code === 'SQLITE_BUSY') return BUSY;
      throw e;
    } finally {
      wait.get();
    }
  };
  const lockTimeout = () =>
    Object.assign(new Error(`database is locked (waited ${SQLITE_LOCK_WAIT_MS} ms for another connection's write)`), { code: 'SQLITE_BUSY' });
  /** A write done as soon as the lock is free, without blocking the thread while it is not. */
  const writeWhenFree = async <T>(write: () => T): Promise<T> => {
    const since = performance.now();
    for (;;) {
      const outcome = tryWrite(write);
      if (outcome !== BUSY) return outcome;
      if (performance.now() - since >= SQLITE_LOCK_WAIT_MS) throw lockTimeout();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  };

  const findKey = db.prepare<[string], KeyRow>(
    `SELECT k.id AS keyId, k.orgId AS orgId, k.status AS status, k.rateLimitRpm AS rateLimitRpm, k.isTrial AS isTrial,
            o.balanceMicros AS balanceMicros, o.heldMicros AS heldMicros,
            k.expiresAt AS expiresAt, k.allowedModels AS allowedModels, k.spendLimitMicros AS spendLimitMicros, k.spendWindow AS spendWindow,
            k.windowStartedAt AS windowStartedAt, k.windowSpentMicros AS windowSpentMicros, k.heldMicros AS keyHeldMicros
       FROM "ApiKey" k JOIN "Org" o ON o.id = k.orgId WHERE k.hash = ?`,
  );
  const keySpend = db.prepare<[string], KeySpendRow>(`SELECT windowStartedAt, windowSpentMicros, heldMicros FROM "ApiKey" WHERE id = ?`);
  const updateKeySpend = db.prepare<[string | null, bigint, bigint, string], KeySpendRow>(
    `UPDATE "ApiKey" SET windowStartedAt = ?, windowSpentMicros = ?, heldMicros = heldMicros + ? WHERE id = ?
     RETURNING windowStartedAt, windowSpentMicros, heldMicros`,
  );
  const ownKeyHold = db.prepare<[string, string], { a: bigint }>(`SELECT amountMicros AS a FROM "KeyHold" WHERE ownerId = ? AND apiKeyId = ?`);
  const upsertKeyHold = db.prepare<[string, string, bigint, string]>(
    `INSERT INTO "KeyHold" (ownerId, apiKeyId, amountMicros, expiresAt) VALUES (?, ?, ?, ?)
     ON CONFLICT (ownerId, apiKeyId) DO UPDATE SET amountMicros = amountMicros + excluded.amountMicros, expiresAt = excluded.expiresAt`,
  );
  const balance = db.prepare<[string], { b: bigint; h: bigint }>(`SELECT balanceMicros AS b, heldMicros AS h FROM "Org" WHERE id = ?`);
  const updateBalance = db.prepare<[bigint, bigint, string, string], { b: bigint; h: bigint }>(
    `UPDATE "Org" SET balanceMicros = balanceMicros + ?, heldMicros = heldMicros + ?, updatedAt = ? WHERE id = ?
     RETURNING balanceMicros AS b, heldMicros AS h`,
  );
  const ownHold = db.prepare<[string, string], { a: bigint }>(`SELECT amountMicros AS a FROM "CreditHold" WHERE ownerId = ? AND orgId = ?`);
  const upsertHold = db.prepare<[string, string, bigint, string]>(
    `INSERT INTO "CreditHold" (ownerId, orgId, amountMicros, expiresAt) VALUES (?, ?, ?, ?)
     ON CONFLICT (ownerId, orgId) DO UPDATE SET amountMicros = amountMicros + excluded.amountMicros, expiresAt = excluded.expiresAt`,
  );
  const keyStatus = db.prepare<[string], { id: string; status: 'active' | 'revoked' }>(
    `SELECT id, status FROM "ApiKey" WHERE id IN (SELECT value FROM json_each(?))`,
  );
  // Usage columns ride on the debit's ledger row: one row per metered request, inserted
  // several at a time (one statement step for up to INSERT_CHUNK rows).
  const LEDGER_COLUMNS = 16;
  const INSERT_CHUNK = 32;
  const insertLedgerRows = (rows: number) =>
    db.prepare(
      `INSERT INTO "LedgerEntry" (id, orgId, kind, amountMicros, balanceAfterMicros, description, apiKeyId, requestId,
                                  modelId, modality, route, inputTokens, outputTokens, characters, audioMillis, createdAt)
       VALUES ${Array.from({ length: rows }, () => `(${'?,'.repeat(LEDGER_COLUMNS - 1)}?)`).join(',')}`,
    );
  // One prepared statement per row count (1 to INSERT_CHUNK), made when first needed.
  const ledgerInserts: ReturnType<typeof insertLedgerRows>[] = [];
  const insertLedger = (rows: number) => (ledgerInserts[rows] ??= insertLedgerRows(rows));
  const touch = db.prepare(`UPDATE "ApiKey" SET lastUsedAt = ? WHERE id = ?`);

  // Key records and balances are cached between requests, but only while no other connection
  // (dashboard, CLI, another replica, this process's Prisma client) has committed: every
  // lookup asks (sqlite-commit-watch.ts), so a revocation or a grant made anywhere empties
  // the cache before the very next lookup. Our own debits go through this connection and
  // update the cached balance with the value they committed; every write transaction of ours
  // goes through `commits.ownWrite` (BEGIN IMMEDIATE), so that its commit is not taken for another's.
  const commits = watchCommits(db, path);
  type CachedKey = Omit<KeyAuthRecord, 'balanceMicros' | 'heldMicros' | 'budget'> & { limit: { limitMicros: bigint; window: SpendWindow } | null };
  const keys = new Map<string, CachedKey>();
  const balances = new Map<string, bigint>();
  /** Each cached org's reserved credit: the committed total (every process's) plus ours not yet committed. */
  const helds = new Map<string, bigint>();
  /** Each cached key with a spend limit: its window's spend and reservations, committed plus ours not yet committed. */
  const keyStates = new Map<string, KeySpendState>();
  const MAX_CACHED_KEYS = 50_000;
  const dropCacheIfChanged = () => {
    if (commits.otherCommitted() || keys.size > MAX_CACHED_KEYS) {
      keys.clear();
      balances.clear();
      helds.clear();
      keyStates.clear();
    }
  };
  const withBudget = (k: CachedKey, balanceMicros: bigint, heldMicros: bigint, state: KeySpendState | null): KeyAuthRecord => ({
    ...k,
    balanceMicros,
    heldMicros,
    budget: k.limit && state ? { ...k.limit, ...state } : null,
  });
  /** What a queued change does to its key's spend state (a key with a spend limit). */
  const moveKeyState = (state: KeySpendState, c: QueuedChange) => {
    state.heldMicros += c.heldDelta;
    if (c.ledger && c.budgetedKey) countSpend(state, c.budgetedKey.windowStart, -c.amountMicros);
  };
  /** A key's state as this process sees it: `committed` plus every change still queued for it. */
  const withQueued = (keyId: string, committed: KeySpendState): KeySpendState => {
    for (const p of pending) if (p.change.keyId === keyId) moveKeyState(committed, p.change);
    return committed;
  };
  const currentKeyState = (keyId: string): KeySpendState | null => {
    const cached = keyStates.get(keyId);
    if (cached) return cached;
    const row = keySpend.get(keyId);
    if (!row) return null;
    const state = withQueued(keyId, spendStateOf(row));
    keyStates.set(keyId, state);
    return state;
  };

  const ledgerValues = (c: LedgerChange, balanceAfter: bigint, now: string): unknown[] => {
    const u = c.usage;
    return [
      newTimeOrderedId('led'),
      c.orgId,
      c.kind,
      c.amountMicros,
      balanceAfter,
      c.description,
      c.apiKeyId ?? null,
      c.requestId ?? null,
      u?.modelId ?? null,
      u?.modality ?? null,
      u?.route ?? null,
      u?.inputTokens ?? 0,
      u?.outputTokens ?? 0,
      u?.characters ?? 0,
      u?.audioMillis ?? 0,
      now,
    ];
  };
  // BEGIN IMMEDIATE takes the write lock up front, so concurrent writers in other
  // processes wait (busy timeout) instead of failing on a read-to-write upgrade.
  // One UPDATE per org per batch (its total), and each ledger row gets its exact
  // balance-after by replaying the org's changes in order from the balance before them.
  // Reservations ride along: an entry may only move the org's reserved credit (`ledger`
  // false), and each org's moves are summed into its UPDATE and its CreditHold row.
  type Committed = { balances: (bigint | null)[]; held: Map<string, bigint>; keys: Map<string, KeySpendState> };
  const applyBatch = commits.ownWrite((changes: QueuedChange[]): Committed => {
    const date = new Date();
    const now = ts(date);
    const holdExpiry = ts(new Date(date.getTime() + holdTtlMs));
    const totals = new Map<string, { amount: bigint; held: bigint }>();
    for (const c of changes) {
      const t = totals.get(c.orgId) ?? { amount: 0n, held: 0n };
      t.amount += c.amountMicros;
      t.held += c.heldDelta;
      totals.set(c.orgId, t);
    }
    const committedKeys = applyKeyChanges(changes, holdExpiry);
    const running = new Map<string, bigint | null>();
    const held = new Map<string, bigint>();
    for (const [orgId, total] of totals) {
      // A release gives back only what this process's row still holds: a row that expired and
      // was released by another gateway (this one could not renew it) is not released twice.
      let heldMove = total.held;
      if (heldMove < 0n) {
        const own = ownHold.get(ownerId, orgId)?.a ?? 0n;
        heldMove = own < -heldMove ? -own : heldMove;
      }
      const row = updateBalance.get(total.amount, heldMove, now, orgId);
      running.set(orgId, row ? row.b - total.amount : null);
      if (row) held.set(orgId, row.h);
      if (row && heldMove !== 0n) upsertHold.run(ownerId, orgId, heldMove, holdExpiry);
    }
    const results: (bigint | null)[] = [];
    const values: unknown[] = [];
    let rows = 0;
    for (const c of changes) {
      if (!c.ledger) {
        results.push(null);
        continue;
      }
      const before = running.get(c.orgId)!;
      if (before === null) {
        results.push(null);
        continue;
      }
      const after = before + c.amountMicros;
      running.set(c.orgId, after);
      results.push(after);
      values.push(...ledgerValues(c, after, now));
      if (++rows === INSERT_CHUNK) {
        insertLedger(rows).run(values);
        values.length = 0;
        rows = 0;
      }
    }
    if (rows > 0) insertLedger(rows).run(values);
    return { balances: results, held, keys: committedKeys };
  });
  /**
   * The batch's changes for keys with a spend limit, per key: its reservations moved (a release
   * giving back only what this process's row still holds, as for orgs) and its debits counted
   * in their windows, in order. Returns each key's committed state.
   */
  function applyKeyChanges(changes: QueuedChange[], holdExpiry: string): Map<string, KeySpendState> {
    const byKey = new Map<string, QueuedChange[]>();
    for (const c of changes) {
      if (!c.keyId) continue;
      const list = byKey.get(c.keyId);
      if (list) list.push(c);
      else byKey.set(c.keyId, [c]);
    }
    const committed = new Map<string, KeySpendState>();
    for (const [keyId, list] of byKey) {
      const row = keySpend.get(keyId);
      if (!row) continue;
      const state = spendStateOf(row);
      let heldMove = 0n;
      for (const c of list) {
        heldMove += c.heldDelta;
        if (c.ledger && c.budgetedKey) countSpend(state, c.budgetedKey.windowStart, -c.amountMicros);
      }
      if (heldMove < 0n) {
        const own = ownKeyHold.get(ownerId, keyId)?.a ?? 0n;
        heldMove = own < -heldMove ? -own : heldMove;
      }
      const started = state.windowStartedAt === null ? null : ts(new Date(state.windowStartedAt));
      committed.set(keyId, spendStateOf(updateKeySpend.get(started, state.spentMicros, heldMove, keyId)!));
      if (heldMove !== 0n) upsertKeyHold.run(ownerId, keyId, heldMove, holdExpiry);
    }
    return committed;
  }

  // Group commit: the ledger changes requested during one turn of the event loop are written
  // in one transaction (each with its own exact balance-after, in order). Under load this
  // turns N commits into one; alone, a change waits only for the current turn to end.
  //
  // Usage debits (applyUsageDebit) do not wait for that commit: their promise resolves at
  // once with the balance as this process tracks it (the cached balance, kept exact below),
  // so the answer that carries it is written to its socket first, and the commit follows at
  // the end of the turn, or under load at most COALESCE_MS later (below). That takes the write off every
  // metered request's latency. The price, documented in docs/api-conventions.md, "Credits": a process killed
  // before the commit loses those debits. A commit that fails keeps its changes queued and
  // retries them in order; until they are written, `debitsFailing()` is true and the core
  // refuses metered requests (503).
  interface QueuedChange extends LedgerChange {
    /** How the org's reserved credit moves (+ reserve, − release); the key's too when `keyId` is set. */
    heldDelta: bigint;
    /** A key with a spend limit: its reservations move with the org's, and its debits count in its window. */
    keyId?: string;
    /** False for a reservation or release alone: no ledger row. */
    ledger: boolean;
  }
  interface Pending {
    change: QueuedChange;
    /** Absent for deferred usage debits (already answered). */
    resolve?: (b: bigint | null) => void;
    reject?: (e: unknown) => void;
  }
  let pending: Pending[] = [];
  /** Uncommitted deferred amounts per org: balance reads from the database add them. */
  const deferredByOrg = new Map<string, bigint>();
  /** Uncommitted reservation moves per org: reads of heldMicros add them. */
  const deferredHeldByOrg = new Map<string, bigint>();
  let holdTtlMs = 60_000;
  let failing: unknown = null;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryMs = 0;
  // Commits are spaced: alone, a change is committed at the end of its turn; under load each
  // commit carries what came in since the last one. Much of a commit's cost does not depend on
  // how much it holds (locks, a write per dirty page, and syscalls), so a commit waits
  // SPARSE_COALESCE_MS after the last, and only COALESCE_MS once BUSY_CHANGES wait (a few
  // inserts' worth), so that a busy gateway's commits stay short.
  // Answered debits do not wait for it, so the spacing costs no latency; it bounds what a
  // killed process loses (docs/api-conventions.md, "Credits").
  const COALESCE_MS = 25;
  const SPARSE_COALESCE_MS = 50;
  const BUSY_CHANGES = 4 * INSERT_CHUNK;
  let lastCommitAt = -Infinity;
  /** The next commit's timer while one is set (one of the two), and when it is due. */
  let flushTimeout: NodeJS.Timeout | undefined;
  let flushImmediate: NodeJS.Immediate | undefined;
  let flushAt = Infinity;
  /** Since when the queued changes wait for another connection's write lock; a retry is set while they do. */
  let busySince: number | undefined;
  let busyTimer: NodeJS.Timeout | undefined;
  let busyTries = 0;
  const cancelFlush = () => {
    clearTimeout(flushTimeout);
    clearImmediate(flushImmediate);
    flushTimeout = flushImmediate = undefined;
    flushAt = Infinity;
  };
  /** Sets the next commit, or brings it forward once enough changes wait for it, or one that a caller awaits (`awaited`). */
  const schedule = (awaited = false) => {
    if (retryTimer || busyTimer) return;
    const now = performance.now();
    const at = Math.max(now, lastCommitAt + (awaited || pending.length >= BUSY_CHANGES ? COALESCE_MS : SPARSE_COALESCE_MS));
    if (at >= flushAt) return;
    cancelFlush();
    flushAt = at;
    if (at - now >= 1) flushTimeout = setTimeout(flush, at - now);
    else flushImmediate = setImmediate(flush);
  };
  const addTo = (map: Map<string, bigint>, orgId: string, delta: bigint) => {
    const left = (map.get(orgId) ?? 0n) + delta;
    if (left === 0n) map.delete(orgId);
    else map.set(orgId, left);
  };
  const settleDeferred = (c: QueuedChange) => {
    addTo(deferredByOrg, c.orgId, -c.amountMicros);
    addTo(deferredHeldByOrg, c.orgId, -c.heldDelta);
  };
  /** Queues a change that is already answered (a debit, a reservation or a release) for the turn's commit. */
  const defer = (change: QueuedChange) => {
    if (change.amountMicros !== 0n) {
      addTo(deferredByOrg, change.orgId, change.amountMicros);
      const b = balances.get(change.orgId);
      if (b !== undefined) balances.set(change.orgId, b + change.amountMicros);
    }
    if (change.heldDelta !== 0n) {
      addTo(deferredHeldByOrg, change.orgId, change.heldDelta);
      const h = helds.get(change.orgId);
      if (h !== undefined) helds.set(change.orgId, h + change.heldDelta);
    }
    const keyState = change.keyId && keyStates.get(change.keyId);
    if (keyState) moveKeyState(keyState, change);
    pending.push({ change });
    schedule();
  };
  /** `waitForLock`: block until the lock is free (only when closing: nothing else is served then). */
  function flush(waitForLock = false): void {
    cancelFlush();
    busyTimer = undefined;
    const batch = pending;
    if (batch.length === 0) return;
    pending = [];
    let results: (bigint | null)[];
    let committedHeld: Map<string, bigint>;
    let committedKeys: Map<string, KeySpendState>;
    try {
      dropCacheIfChanged();
      const changes = batch.map((p) => p.change);
      const outcome = waitForLock ? applyBatch(changes) : tryWrite(() => applyBatch(changes));
      if (outcome === BUSY) {
        busySince ??= performance.now();
        if (performance.now() - busySince >= SQLITE_LOCK_WAIT_MS) throw lockTimeout();
        // Still queued, in order, and tried again after a wait that doubles up to 8 ms (each
        // try costs a few statements; the debits were answered already).
        pending = batch.concat(pending);
        busyTries++;
        busyTimer = setTimeout(flush, Math.min(2 ** busyTries, 8));
        return;
      }
      busySince = undefined;
      busyTries = 0;
      ({ balances: results, held: committedHeld, keys: committedKeys } = outcome);
    } catch (e) {
      busySince = undefined;
      busyTries = 0;
      // Callers still waiting get the error; deferred debits were answered already, so they
      // go back to the head of the queue (in order) and are retried with a growing delay.
      const kept = batch.filter((p) => !p.resolve);
      for (const p of batch) p.reject?.(e);
      pending = kept.concat(pending);
      if (kept.length > 0) {
        failing = e;
        store.onDeferredWriteError?.(e, kept.length);
        retryMs = Math.min(Math.max(retryMs * 2, 50), 2_000);
        retryTimer = setTimeout(() => {
          retryTimer = undefined;
          flush();
        }, retryMs);
        retryTimer.unref();
      }
      return;
    }
    failing = null;
    retryMs = 0;
    lastCommitAt = performance.now();
    batch.forEach((p, i) => {
      const balance = results[i]!;
      if (!p.resolve) settleDeferred(p.change);
      // The committed value is the truth for this org from here on (plus what is still queued).
      if (balance !== null && balances.has(p.change.orgId)) balances.set(p.change.orgId, balance + (deferredByOrg.get(p.change.orgId) ?? 0n));
      p.resolve?.(balance);
    });
    for (const [orgId, h] of committedHeld) if (helds.has(orgId)) helds.set(orgId, h + (deferredHeldByOrg.get(orgId) ?? 0n));
    for (const [keyId, state] of committedKeys) if (keyStates.has(keyId)) keyStates.set(keyId, withQueued(keyId, state));
    if (pending.length > 0) schedule();
  }
  /** The org's balance including this process's uncommitted debits, from the cache or the database. */
  const currentBalance = (orgId: string): bigint | null => {
    const cached = balances.get(orgId);
    if (cached !== undefined && helds.has(orgId)) return cached;
    const row = balance.get(orgId);
    if (!row) return null;
    const b = row.b + (deferredByOrg.get(orgId) ?? 0n);
    balances.set(orgId, b);
    helds.set(orgId, row.h + (deferredHeldByOrg.get(orgId) ?? 0n));
    return b;
  };
  // Renew ours; release the reservations of processes that stopped renewing theirs (dead).
  const renewHolds = db.prepare<[string, string]>(`UPDATE "CreditHold" SET expiresAt = ? WHERE ownerId = ? AND amountMicros <> 0`);
  const dropEmptyHolds = db.prepare<[string]>(`DELETE FROM "CreditHold" WHERE ownerId = ? AND amountMicros = 0`);
  const releaseExpiredHolds = db.prepare<{ now: string }>(
    `UPDATE "Org" SET heldMicros = heldMicros - (SELECT SUM(h.amountMicros) FROM "CreditHold" h WHERE h.orgId = "Org".id AND h.expiresAt < @now)
      WHERE id IN (SELECT orgId FROM "CreditHold" WHERE expiresAt < @now)`,
  );
  const deleteExpiredHolds = db.prepare<[string]>(`DELETE FROM "CreditHold" WHERE expiresAt < ?`);
  // The same for the reservations of keys with a spend limit.
  const renewKeyHolds = db.prepare<[string, string]>(`UPDATE "KeyHold" SET expiresAt = ? WHERE ownerId = ? AND amountMicros <> 0`);
  const dropEmptyKeyHolds = db.prepare<[string]>(`DELETE FROM "KeyHold" WHERE ownerId = ? AND amountMicros = 0`);
  const releaseExpiredKeyHolds = db.prepare<{ now: string }>(
    `UPDATE "ApiKey" SET heldMicros = heldMicros - (SELECT SUM(h.amountMicros) FROM "KeyHold" h WHERE h.apiKeyId = "ApiKey".id AND h.expiresAt < @now)
      WHERE id IN (SELECT apiKeyId FROM "KeyHold" WHERE expiresAt < @now)`,
  );
  const deleteExpiredKeyHolds = db.prepare<[string]>(`DELETE FROM "KeyHold" WHERE expiresAt < ?`);
  const maintain = commits.ownWrite((now: string, expiresAt: string) => {
    renewHolds.run(expiresAt, ownerId);
    dropEmptyHolds.run(ownerId);
    if (releaseExpiredHolds.run({ now }).changes > 0) deleteExpiredHolds.run(now);
    renewKeyHolds.run(expiresAt, ownerId);
    dropEmptyKeyHolds.run(ownerId);
    if (releaseExpiredKeyHolds.run({ now }).changes > 0) deleteExpiredKeyHolds.run(now);
  });
  const releaseOwnHolds = commits.ownWrite(() => {
    db.prepare(
      `UPDATE "Org" SET heldMicros = heldMicros - (SELECT h.amountMicros FROM "CreditHold" h WHERE h.orgId = "Org".id AND h.ownerId = @owner)
                 WHERE id IN (SELECT orgId FROM "CreditHold" WHERE ownerId = @owner)`,
    ).run({ owner: ownerId });
    db.prepare(`DELETE FROM "CreditHold" WHERE ownerId = ?`).run(ownerId);
    db.prepare(
      `UPDATE "ApiKey" SET heldMicros = heldMicros - (SELECT h.amountMicros FROM "KeyHold" h WHERE h.apiKeyId = "ApiKey".id AND h.ownerId = @owner)
                 WHERE id IN (SELECT apiKeyId FROM "KeyHold" WHERE ownerId = @owner)`,
    ).run({ owner: ownerId });
    db.prepare(`DELETE FROM "KeyHold" WHERE ownerId = ?`).run(ownerId);
  });
  const touchAll = commits.ownWrite((entries: [string, Date][]) => {
    for (const [id, at] of entries) touch.run(ts(at), id);
  });

  const store: HotStore = {
    async findKeyByHash(hash): Promise<KeyAuthRecord | null> {
      dropCacheIfChanged();
      const cached = keys.get(hash);
      const balance = cached && balances.get(cached.orgId);
      const cachedHeld = cached && helds.get(cached.orgId);
      if (cached && balance !== undefined && cachedHeld !== undefined) {
        const state = cached.limit && currentKeyState(cached.keyId);
        return withBudget(cached, balance, cachedHeld, state || null);
      }
      const row = findKey.get(hash);
      if (!row) return null;
      const record: CachedKey = {
        keyId: row.keyId,
        orgId: row.orgId,
        status: row.status,
        isTrial: row.isTrial !== 0n,
        rateLimitRpm: row.rateLimitRpm === null ? null : Number(row.rateLimitRpm),
        expiresAt: row.expiresAt === null ? null : Date.parse(row.expiresAt),
        allowedModels: allowedModelsOf(row.allowedModels),
        limit: row.spendLimitMicros === null ? null : { limitMicros: row.spendLimitMicros, window: row.spendWindow ?? 'month' },
      };
      const current = row.balanceMicros + (deferredByOrg.get(row.orgId) ?? 0n);
      const held = row.heldMicros + (deferredHeldByOrg.get(row.orgId) ?? 0n);
      keys.set(hash, record);
      balances.set(row.orgId, current);
      helds.set(row.orgId, held);
      let state: KeySpendState | null = null;
      if (record.limit) {
        state = withQueued(
          row.keyId,
          spendStateOf({ windowStartedAt: row.windowStartedAt, windowSpentMicros: row.windowSpentMicros, heldMicros: row.keyHeldMicros }),
        );
        keyStates.set(row.keyId, state);
      }
      return withBudget(record, current, held, state);
    },
    async getBalance(orgId) {
      const row = balance.get(orgId);
      return row ? row.b + (deferredByOrg.get(orgId) ?? 0n) : null;
    },
    applyLedgerChange(change) {
      return new Promise((resolve, reject) => {
        pending.push({ change: { ...change, heldDelta: 0n, keyId: change.budgetedKey?.keyId, ledger: true }, resolve, reject });
        schedule(true);
      });
    },
    async applyUsageDebit(change) {
      // Another connection's commit is looked for here only when the answer would be at or
      // below zero, the one answer that stops something (a streaming session ends on it):
      // the request's key check looked moments ago and every commit looks, so a balance
      // changed elsewhere is otherwise at most one debit stale in a header, and never in the
      // database (the UPDATE adds to the stored value). A look is a syscall, not free on a
      // loaded machine.
      let before = currentBalance(change.orgId);
      if (before !== null && before + change.amountMicros <= 0n) {
        dropCacheIfChanged();
        before = currentBalance(change.orgId);
      }
      if (before === null) return null;
      defer({ ...change, heldDelta: -(change.releaseMicros ?? 0n), keyId: change.budgetedKey?.keyId, ledger: true });
      return before + change.amountMicros;
    },
    async reserve(orgId, amountMicros, key) {
      // Another process's reservation or debit is seen once it is committed.
      dropCacheIfChanged();
      const b = currentBalance(orgId);
      if (b === null || b - helds.get(orgId)! < amountMicros) return 'org_short';
      if (key) {
        const state = currentKeyState(key.keyId);
        if (!state || budgetLeft(key.limitMicros, state, key.windowStart) < amountMicros) return 'key_short';
      }
      defer({ orgId, amountMicros: 0n, heldDelta: amountMicros, keyId: key?.keyId, ledger: false, kind: 'usage', description: '' });
      return 'reserved';
    },
    release(orgId, amountMicros, keyId) {
      if (amountMicros > 0n) defer({ orgId, amountMicros: 0n, heldDelta: -amountMicros, keyId, ledger: false, kind: 'usage', description: '' });
    },
    async maintainHolds(ttlMs) {
      holdTtlMs = ttlMs;
      const now = new Date();
      await writeWhenFree(() => maintain(ts(now), ts(new Date(now.getTime() + ttlMs))));
    },
    async keyStatuses(keyIds) {
      const statuses = new Map<string, 'active' | 'revoked'>();
      for (const row of keyStatus.all(JSON.stringify(keyIds))) statuses.set(row.id, row.status);
      return statuses;
    },
    debitsFailing() {
      return failing !== null;
    },
    async settle() {
      while (pending.length > 0) {
        if (failing !== null) throw failing;
        await new Promise((r) => setImmediate(r));
      }
    },
    async touchKeys(lastUsed) {
      if (lastUsed.size > 0) await writeWhenFree(() => touchAll([...lastUsed]));
    },
    async ping() {
      db.prepare('SELECT 1').get();
    },
    async close() {
      // Debits still queued are written before the connection goes (a failing database gets
      // a few more tries; what then remains is reported as lost).
      clearTimeout(retryTimer);
      retryTimer = undefined;
      clearTimeout(busyTimer);
      cancelFlush();
      for (let attempt = 0; pending.length > 0 && attempt < 5; attempt++) {
        if (attempt > 0) await new Promise((r) => setTimeout(r, 200));
        flush(true);
        clearTimeout(retryTimer);
        retryTimer = undefined;
      }
      if (pending.length > 0) store.onDeferredWriteError?.(failing ?? new Error('database closed'), pending.length);
      // Nothing of ours runs any more: whatever is still reserved (sessions cut at the very end) is released.
      else releaseOwnHolds();
      await checkpointer.close();
      db.close();
      commits.close(); // after the connection: see sqlite-commit-watch.ts
    },
  };
  return store;
}
