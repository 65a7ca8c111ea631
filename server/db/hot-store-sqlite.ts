import Database from 'better-sqlite3';
import { sqlTimestamp } from './dialect.js';
import type { HotStore, KeyAuthRecord, LedgerChange } from './hot-store.js';
import { newId } from './ids.js';
import { startCheckpointer } from './sqlite-checkpointer.js';

interface KeyRow {
  keyId: string;
  orgId: string;
  status: 'active' | 'revoked';
  rateLimitRpm: bigint | null;
  balanceMicros: bigint;
}

export function openSqlite(path: string): Database.Database {
  const db = new Database(path, { timeout: 10_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.defaultSafeIntegers(true);
  return db;
}

export function createSqliteHotStore(path: string): HotStore {
  const db = openSqlite(path);
  // Checkpoints run in a worker (sqlite-checkpointer.ts), not inside our commits.
  db.pragma('wal_autocheckpoint = 0');
  const checkpointer = startCheckpointer(path);
  const ts = (d: Date) => sqlTimestamp('sqlite', d);

  const findKey = db.prepare<[string], KeyRow>(
    `SELECT k.id AS keyId, k.orgId AS orgId, k.status AS status, k.rateLimitRpm AS rateLimitRpm,
            o.balanceMicros AS balanceMicros
       FROM "ApiKey" k JOIN "Org" o ON o.id = k.orgId WHERE k.hash = ?`,
  );
  const balance = db.prepare<[string], { b: bigint }>(`SELECT balanceMicros AS b FROM "Org" WHERE id = ?`);
  const updateBalance = db.prepare<[bigint, string, string], { b: bigint }>(
    `UPDATE "Org" SET balanceMicros = balanceMicros + ?, updatedAt = ? WHERE id = ? RETURNING balanceMicros AS b`,
  );
  // Usage columns ride on the debit's ledger row: one INSERT per metered request.
  const insertLedger = db.prepare(
    `INSERT INTO "LedgerEntry" (id, orgId, kind, amountMicros, balanceAfterMicros, description, apiKeyId, requestId,
                                modelId, modality, route, inputTokens, outputTokens, characters, audioMillis, createdAt)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const touch = db.prepare(`UPDATE "ApiKey" SET lastUsedAt = ? WHERE id = ?`);

  // Key records and balances are cached between requests, but only while nothing else has
  // written to the database: `PRAGMA data_version` changes whenever ANY other connection
  // (dashboard, CLI, another replica, this process's Prisma client) commits, so a revocation
  // or a grant made anywhere empties the cache before the very next lookup. Our own debits go
  // through this connection and update the cached balance with the value they committed.
  const dataVersion = db.prepare<[], bigint>('PRAGMA data_version').pluck();
  let seenVersion = dataVersion.get();
  const keys = new Map<string, Omit<KeyAuthRecord, 'balanceMicros'>>();
  const balances = new Map<string, bigint>();
  const MAX_CACHED_KEYS = 50_000;
  const dropCacheIfChanged = () => {
    const v = dataVersion.get();
    if (v !== seenVersion || keys.size > MAX_CACHED_KEYS) {
      seenVersion = v;
      keys.clear();
      balances.clear();
    }
  };

  const applyOne = (c: LedgerChange, now: string): bigint | null => {
    const row = updateBalance.get(c.amountMicros, now, c.orgId);
    if (!row) return null;
    const u = c.usage;
    insertLedger.run(newId('led'), c.orgId, c.kind, c.amountMicros, row.b, c.description, c.apiKeyId ?? null, c.requestId ?? null,
      u?.modelId ?? null, u?.modality ?? null, u?.route ?? null, u?.inputTokens ?? 0, u?.outputTokens ?? 0, u?.characters ?? 0, u?.audioMillis ?? 0, now);
    return row.b;
  };
  // BEGIN IMMEDIATE takes the write lock up front, so concurrent writers in other
  // processes wait (busy timeout) instead of failing on a read-to-write upgrade.
  const applyBatch = db.transaction((changes: LedgerChange[]): (bigint | null)[] => {
    const now = ts(new Date());
    return changes.map((c) => applyOne(c, now));
  });

  // Group commit: the ledger changes requested during one turn of the event loop are written
  // in one transaction (each with its own exact balance-after, in order). Under load this
  // turns N commits into one; alone, a change waits only for the current turn to end.
  let pending: { change: LedgerChange; resolve: (b: bigint | null) => void; reject: (e: unknown) => void }[] = [];
  const flush = () => {
    const batch = pending;
    pending = [];
    let results: (bigint | null)[];
    try {
      dropCacheIfChanged();
      results = applyBatch.immediate(batch.map((p) => p.change));
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    batch.forEach((p, i) => {
      const balance = results[i]!;
      if (balance !== null && balances.has(p.change.orgId)) balances.set(p.change.orgId, balance);
      p.resolve(balance);
    });
  };
  const touchAll = db.transaction((entries: [string, Date][]) => {
    for (const [id, at] of entries) touch.run(ts(at), id);
  });

  return {
    async findKeyByHash(hash): Promise<KeyAuthRecord | null> {
      dropCacheIfChanged();
      const cached = keys.get(hash);
      const balance = cached && balances.get(cached.orgId);
      if (cached && balance !== undefined) return { ...cached, balanceMicros: balance };
      const row = findKey.get(hash);
      if (!row) return null;
      const record = { keyId: row.keyId, orgId: row.orgId, status: row.status, rateLimitRpm: row.rateLimitRpm === null ? null : Number(row.rateLimitRpm) };
      keys.set(hash, record);
      balances.set(row.orgId, row.balanceMicros);
      return { ...record, balanceMicros: row.balanceMicros };
    },
    async getBalance(orgId) {
      return balance.get(orgId)?.b ?? null;
    },
    applyLedgerChange(change) {
      return new Promise((resolve, reject) => {
        if (pending.push({ change, resolve, reject }) === 1) setImmediate(flush);
      });
    },
    async touchKeys(lastUsed) {
      if (lastUsed.size > 0) touchAll.immediate([...lastUsed]);
    },
    async ping() {
      db.prepare('SELECT 1').get();
    },
    async close() {
      await checkpointer.close();
      db.close();
    },
  };
}
