import pg from 'pg';
import { allowedModelsOf, type SpendWindow } from '../services/keys/key-budget.ts';
import { sqlTimestamp } from './dialect.ts';
import type { HotStore, KeyAuthRecord, LedgerChange } from './hot-store.ts';
import { holdOwnerId, newTimeOrderedId } from './ids.ts';

export function createPostgresHotStore(connectionString: string, ownerId = holdOwnerId()): HotStore {
  const pool = new pg.Pool({ connectionString, max: 10, connectionTimeoutMillis: 5_000 });
  // An idle client that loses its connection must not crash the process; the next query fails instead.
  pool.on('error', () => {});
  const ts = (d: Date) => sqlTimestamp('postgresql', d);
  let holdTtlMs = 60_000;
  /** Releases that failed (the database was away), retried by maintainHolds. */
  const unreleased = new Map<string, bigint>();
  /** Releases that failed for keys with a spend limit, by org and key. */
  const unreleasedKeys = new Map<string, { orgId: string; keyId: string; amount: bigint }>();
  const releaseNow = (orgId: string, amountMicros: bigint, keyId?: string) =>
    keyId
      ? pool.query({
          name: 'svc_release_key',
          // As svc_release, and the key's reservation beside it (its row locked after the org's, as everywhere).
          text: `WITH org AS (SELECT id FROM "Org" WHERE id = $1 FOR UPDATE),
                      cur AS (SELECT LEAST("amountMicros", $2::bigint) AS taken FROM "CreditHold"
                               WHERE "ownerId" = $3 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
                      k AS (SELECT id FROM "ApiKey" WHERE id = $4 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
                      kcur AS (SELECT LEAST("amountMicros", $2::bigint) AS taken FROM "KeyHold"
                                WHERE "ownerId" = $3 AND "apiKeyId" = (SELECT id FROM k) FOR UPDATE),
                      h AS (UPDATE "CreditHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM cur) WHERE "ownerId" = $3 AND "orgId" = $1),
                      kh AS (UPDATE "KeyHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM kcur) WHERE "ownerId" = $3 AND "apiKeyId" = $4),
                      ku AS (UPDATE "ApiKey" SET "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM kcur), 0) WHERE id = (SELECT id FROM k))
                 UPDATE "Org" SET "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM cur), 0) WHERE id = $1`,
          values: [orgId, amountMicros.toString(), ownerId, keyId],
        })
      : pool.query({
          name: 'svc_release',
          // Only what this process's row still holds is given back: a row that expired and was
          // released by another gateway (this one could not renew it) is not released twice.
          // The org's row is locked before the reservation's, in the order a reservation takes
          // them (the other order deadlocked a reservation against a release of the same org).
          text: `WITH org AS (SELECT id FROM "Org" WHERE id = $1 FOR UPDATE),
                      cur AS (SELECT LEAST("amountMicros", $2::bigint) AS taken FROM "CreditHold"
                               WHERE "ownerId" = $3 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
                      h AS (UPDATE "CreditHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM cur) WHERE "ownerId" = $3 AND "orgId" = $1)
                 UPDATE "Org" SET "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM cur), 0) WHERE id = $1`,
          values: [orgId, amountMicros.toString(), ownerId],
        });

  /**
   * A reservation for a key with a spend limit: the org's balance and the key's budget are both
   * checked on their rows, locked org first (the order every statement here takes them), and
   * both reserved, or neither. The conditions sit in the locking reads themselves, so a row
   * another replica changed meanwhile is re-checked at its latest version.
   */
  async function reserveWithKey(orgId: string, amountMicros: bigint, keyId: string, limitMicros: bigint, windowStart: number) {
    const { rows } = await pool.query<{ org_ok: number; key_ok: number }>({
      name: 'svc_reserve_key',
      text: `WITH org AS (SELECT id FROM "Org" WHERE id = $1 AND "balanceMicros" - "heldMicros" >= $2::bigint FOR UPDATE),
                  k AS (SELECT id FROM "ApiKey"
                         WHERE id = $5 AND "orgId" = (SELECT id FROM org)
                           AND $6::bigint - (CASE WHEN "windowStartedAt" >= $7::timestamp THEN "windowSpentMicros" ELSE 0 END) - "heldMicros" >= $2::bigint
                         FOR UPDATE),
                  o AS (UPDATE "Org" SET "heldMicros" = "heldMicros" + $2::bigint WHERE id = $1 AND EXISTS (SELECT 1 FROM k)),
                  ku AS (UPDATE "ApiKey" SET "heldMicros" = "heldMicros" + $2::bigint WHERE id = (SELECT id FROM k)),
                  oh AS (INSERT INTO "CreditHold" ("ownerId", "orgId", "amountMicros", "expiresAt")
                         SELECT $3, $1, $2::bigint, (now() AT TIME ZONE 'UTC') + $4::int * interval '1 millisecond' FROM k
                         ON CONFLICT ("ownerId", "orgId") DO UPDATE
                           SET "amountMicros" = "CreditHold"."amountMicros" + EXCLUDED."amountMicros", "expiresAt" = EXCLUDED."expiresAt"),
                  kh AS (INSERT INTO "KeyHold" ("ownerId", "apiKeyId", "amountMicros", "expiresAt")
                         SELECT $3, id, $2::bigint, (now() AT TIME ZONE 'UTC') + $4::int * interval '1 millisecond' FROM k
                         ON CONFLICT ("ownerId", "apiKeyId") DO UPDATE
                           SET "amountMicros" = "KeyHold"."amountMicros" + EXCLUDED."amountMicros", "expiresAt" = EXCLUDED."expiresAt")
             SELECT (SELECT count(*) FROM org)::int AS org_ok, (SELECT count(*) FROM k)::int AS key_ok`,
      values: [orgId, amountMicros.toString(), ownerId, holdTtlMs, keyId, limitMicros.toString(), ts(new Date(windowStart))],
    });
    const r = rows[0]!;
    return r.org_ok === 0 ? 'org_short' : r.key_ok === 0 ? 'key_short' : 'reserved';
  }

  /** $1..$17 of svc_ledger and svc_ledger_key: the change, its ledger row and usage, the reservation it releases. */
  function ledgerValues(c: LedgerChange, now: string): unknown[] {
    const u = c.usage;
    return [
      c.orgId,
      c.amountMicros.toString(),
      newTimeOrderedId('led'),
      c.kind,
      c.description,
      c.apiKeyId ?? null,
      c.requestId ?? null,
      now,
      u?.modelId ?? null,
      u?.modality ?? null,
      u?.route ?? null,
      u?.inputTokens ?? 0,
      u?.outputTokens ?? 0,
      u?.characters ?? 0,
      u?.audioMillis ?? 0,
      (c.releaseMicros ?? 0n).toString(),
      ownerId,
    ];
  }

  /**
   * A ledger change by a key with a spend limit (`apiKeyId`): as svc_ledger, and in the same
   * statement the key's window spend counts the debit (a window before `windowStart` is
   * started over) and its reservation is released beside the org's. The org's update waits for
   * `k` (its always-true count): the org's row and then the key's are locked before the org's
   * row changes. Evaluated only when first used, `org` would otherwise meet a row this very
   * statement had updated, which a lock skips, and the key would be left out.
   */
  async function applyKeyLedgerChange(c: LedgerChange, windowStart: number): Promise<bigint | null> {
    const now = ts(new Date());
    const { rows } = await pool.query<{ b: string }>({
      name: 'svc_ledger_key',
      text: `WITH org AS (SELECT id FROM "Org" WHERE id = $1 FOR UPDATE),
             cur AS (
               SELECT LEAST("amountMicros", $16::bigint) AS taken FROM "CreditHold"
                WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
             k AS (SELECT id FROM "ApiKey" WHERE id = $6 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
             kcur AS (
               SELECT LEAST("amountMicros", $16::bigint) AS taken FROM "KeyHold"
                WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "apiKeyId" = (SELECT id FROM k) FOR UPDATE),
             o AS (
               UPDATE "Org" SET "balanceMicros" = "balanceMicros" + $2::bigint, "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM cur), 0),
                      "updatedAt" = $8::timestamp
                WHERE id = $1 AND (SELECT count(*) FROM k) >= 0 RETURNING "balanceMicros"),
             h AS (
               UPDATE "CreditHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM cur)
                WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "orgId" = $1),
             ku AS (
               UPDATE "ApiKey" SET "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM kcur), 0),
                      "windowSpentMicros" = CASE WHEN "windowStartedAt" >= $18::timestamp THEN "windowSpentMicros" - $2::bigint ELSE -$2::bigint END,
                      "windowStartedAt" = GREATEST("windowStartedAt", $18::timestamp)
                WHERE id = (SELECT id FROM k)),
             kh AS (
               UPDATE "KeyHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM kcur)
                WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "apiKeyId" = $6),
             l AS (
               INSERT INTO "LedgerEntry" (id, "orgId", kind, "amountMicros", "balanceAfterMicros", description, "apiKeyId", "requestId",
                                          "modelId", modality, route, "inputTokens", "outputTokens", characters, "audioMillis", "createdAt")
               SELECT $3, $1, $4::"LedgerKind", $2::bigint, o."balanceMicros", $5, $6, $7,
                      $9, $10::"Modality", $11, $12, $13, $14, $15, $8::timestamp FROM o)
             SELECT "balanceMicros"::text AS b FROM o`,
      values: [...ledgerValues(c, now), ts(new Date(windowStart))],
    });
    return rows[0] ? BigInt(rows[0].b) : null;
  }

  const store: HotStore = {
    async findKeyByHash(hash): Promise<KeyAuthRecord | null> {
      const { rows } = await pool.query<{
        keyId: string;
        orgId: string;
        status: 'active' | 'revoked';
        rateLimitRpm: number | null;
        isTrial: boolean;
        balanceMicros: string;
        heldMicros: string;
        expiresAt: string | null;
        allowedModels: unknown;
        spendLimitMicros: string | null;
        spendWindow: SpendWindow | null;
        windowStartedAt: string | null;
        windowSpentMicros: string;
        keyHeldMicros: string;
      }>({
        name: 'svc_find_key',
        // Timestamps as epoch milliseconds: the columns have no time zone, and pg would read them in the process's.
        text: `SELECT k.id AS "keyId", k."orgId", k.status::text AS status, k."rateLimitRpm", k."isTrial",
                      o."balanceMicros"::text AS "balanceMicros", o."heldMicros"::text AS "heldMicros",
                      (EXTRACT(EPOCH FROM k."expiresAt") * 1000)::bigint::text AS "expiresAt", k."allowedModels",
                      k."spendLimitMicros"::text AS "spendLimitMicros", k."spendWindow"::text AS "spendWindow",
                      (EXTRACT(EPOCH FROM k."windowStartedAt") * 1000)::bigint::text AS "windowStartedAt",
                      k."windowSpentMicros"::text AS "windowSpentMicros", k."heldMicros"::text AS "keyHeldMicros"
                 FROM "ApiKey" k JOIN "Org" o ON o.id = k."orgId" WHERE k.hash = $1`,
        values: [hash],
      });
      const row = rows[0];
      if (!row) return null;
      return {
        keyId: row.keyId,
        orgId: row.orgId,
        status: row.status,
        rateLimitRpm: row.rateLimitRpm,
        isTrial: row.isTrial,
        balanceMicros: BigInt(row.balanceMicros),
        heldMicros: BigInt(row.heldMicros),
        expiresAt: row.expiresAt === null ? null : Number(row.expiresAt),
        allowedModels: allowedModelsOf(row.allowedModels),
        budget:
          row.spendLimitMicros === null
            ? null
            : {
                limitMicros: BigInt(row.spendLimitMicros),
                window: row.spendWindow ?? 'month',
                windowStartedAt: row.windowStartedAt === null ? null : Number(row.windowStartedAt),
                spentMicros: BigInt(row.windowSpentMicros),
                heldMicros: BigInt(row.keyHeldMicros),
              },
      };
    },
    async getBalance(orgId) {
      const { rows } = await pool.query<{ b: string }>({
        name: 'svc_balance',
        text: `SELECT "balanceMicros"::text AS b FROM "Org" WHERE id = $1`,
        values: [orgId],
      });
      return rows[0] ? BigInt(rows[0].b) : null;
    },
    async applyLedgerChange(c) {
      // One statement, so one round trip and one implicit transaction: the row lock on the
      // org serialises concurrent debits without lost updates. Usage rides on the ledger row.
      // A debit that settles a reservation releases it in the same statement.
      if (c.budgetedKey) return applyKeyLedgerChange(c, c.budgetedKey.windowStart);
      const date = new Date();
      const now = ts(date);
      const { rows } = await pool.query<{ b: string }>({
        name: 'svc_ledger',
        // The org's row is locked before the reservation's, in the order a reservation takes them.
        text: `WITH org AS (SELECT id FROM "Org" WHERE id = $1 FOR UPDATE),
               cur AS (
                 SELECT LEAST("amountMicros", $16::bigint) AS taken FROM "CreditHold"
                  WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "orgId" = (SELECT id FROM org) FOR UPDATE),
               o AS (
                 UPDATE "Org" SET "balanceMicros" = "balanceMicros" + $2::bigint, "heldMicros" = "heldMicros" - COALESCE((SELECT taken FROM cur), 0),
                        "updatedAt" = $8::timestamp
                  WHERE id = $1 RETURNING "balanceMicros"),
               h AS (
                 UPDATE "CreditHold" SET "amountMicros" = "amountMicros" - (SELECT taken FROM cur)
                  WHERE $16::bigint <> 0 AND "ownerId" = $17 AND "orgId" = $1),
               l AS (
                 INSERT INTO "LedgerEntry" (id, "orgId", kind, "amountMicros", "balanceAfterMicros", description, "apiKeyId", "requestId",
                                            "modelId", modality, route, "inputTokens", "outputTokens", characters, "audioMillis", "createdAt")
                 SELECT $3, $1, $4::"LedgerKind", $2::bigint, o."balanceMicros", $5, $6, $7,
                        $9, $10::"Modality", $11, $12, $13, $14, $15, $8::timestamp FROM o)
               SELECT "balanceMicros"::text AS b FROM o`,
        values: ledgerValues(c, now),
      });
      return rows[0] ? BigInt(rows[0].b) : null;
    },
    // A round trip per debit either way: nothing to gain from answering before the commit,
    // and a debit that fails can still withhold its request's result.
    applyUsageDebit(change) {
      return store.applyLedgerChange(change);
    },
    async reserve(orgId, amountMicros, key) {
      if (key) return reserveWithKey(orgId, amountMicros, key.keyId, key.limitMicros, key.windowStart);
      // The org's row lock serialises reservations across replicas: exact.
      const { rows } = await pool.query({
        name: 'svc_reserve',
        text: `WITH o AS (
                 UPDATE "Org" SET "heldMicros" = "heldMicros" + $2::bigint
                  WHERE id = $1 AND "balanceMicros" - "heldMicros" >= $2::bigint RETURNING id)
               INSERT INTO "CreditHold" ("ownerId", "orgId", "amountMicros", "expiresAt")
               SELECT $3, id, $2::bigint, (now() AT TIME ZONE 'UTC') + $4::int * interval '1 millisecond' FROM o
               ON CONFLICT ("ownerId", "orgId") DO UPDATE
                 SET "amountMicros" = "CreditHold"."amountMicros" + EXCLUDED."amountMicros", "expiresAt" = EXCLUDED."expiresAt"
               RETURNING 1`,
        values: [orgId, amountMicros.toString(), ownerId, holdTtlMs],
      });
      return rows.length === 1 ? 'reserved' : 'org_short';
    },
    release(orgId, amountMicros, keyId) {
      if (amountMicros <= 0n) return;
      releaseNow(orgId, amountMicros, keyId).catch(() => {
        // Kept and retried by maintainHolds: a release must not be lost while this process lives.
        if (!keyId) unreleased.set(orgId, (unreleased.get(orgId) ?? 0n) + amountMicros);
        else {
          const id = `${orgId} ${keyId}`;
          const kept = unreleasedKeys.get(id);
          unreleasedKeys.set(id, { orgId, keyId, amount: (kept?.amount ?? 0n) + amountMicros });
        }
      });
    },
    async maintainHolds(ttlMs) {
      holdTtlMs = ttlMs;
      for (const [orgId, amount] of [...unreleased]) {
        unreleased.delete(orgId);
        store.release(orgId, amount);
      }
      for (const [id, r] of [...unreleasedKeys]) {
        unreleasedKeys.delete(id);
        store.release(r.orgId, r.amount, r.keyId);
      }
      // Expiry by the database's clock, which every replica shares.
      await pool.query(
        `WITH renewed AS (UPDATE "CreditHold" SET "expiresAt" = (now() AT TIME ZONE 'UTC') + $2::int * interval '1 millisecond'
                            WHERE "ownerId" = $1 AND "amountMicros" <> 0)
         DELETE FROM "CreditHold" WHERE "ownerId" = $1 AND "amountMicros" = 0`,
        [ownerId, ttlMs],
      );
      await pool.query(
        `WITH gone AS (DELETE FROM "CreditHold" WHERE "expiresAt" < (now() AT TIME ZONE 'UTC') RETURNING "orgId", "amountMicros"),
              s AS (SELECT "orgId", SUM("amountMicros") AS a FROM gone GROUP BY "orgId")
         UPDATE "Org" o SET "heldMicros" = o."heldMicros" - s.a FROM s WHERE o.id = s."orgId"`,
      );
      // The same for the reservations of keys with a spend limit.
      await pool.query(
        `WITH renewed AS (UPDATE "KeyHold" SET "expiresAt" = (now() AT TIME ZONE 'UTC') + $2::int * interval '1 millisecond'
                            WHERE "ownerId" = $1 AND "amountMicros" <> 0)
         DELETE FROM "KeyHold" WHERE "ownerId" = $1 AND "amountMicros" = 0`,
        [ownerId, ttlMs],
      );
      await pool.query(
        `WITH gone AS (DELETE FROM "KeyHold" WHERE "expiresAt" < (now() AT TIME ZONE 'UTC') RETURNING "apiKeyId", "amountMicros"),
              s AS (SELECT "apiKeyId", SUM("amountMicros") AS a FROM gone GROUP BY "apiKeyId")
         UPDATE "ApiKey" k SET "heldMicros" = k."heldMicros" - s.a FROM s WHERE k.id = s."apiKeyId"`,
      );
    },
    async keyStatuses(keyIds) {
      const { rows } = await pool.query<{ id: string; status: 'active' | 'revoked' }>(
        `SELECT id, status::text AS status FROM "ApiKey" WHERE id = ANY($1::text[])`,
        [keyIds],
      );
      return new Map(rows.map((r) => [r.id, r.status]));
    },
    debitsFailing() {
      return false;
    },
    async settle() {},
    async touchKeys(lastUsed) {
      if (lastUsed.size === 0) return;
      const ids = [...lastUsed.keys()];
      const times = [...lastUsed.values()].map(ts);
      await pool.query(`UPDATE "ApiKey" k SET "lastUsedAt" = v.t::timestamp FROM unnest($1::text[], $2::text[]) AS v(id, t) WHERE k.id = v.id`, [ids, times]);
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      // Nothing of ours runs any more: whatever is still reserved is released.
      await pool
        .query(
          `WITH gone AS (DELETE FROM "CreditHold" WHERE "ownerId" = $1 RETURNING "orgId", "amountMicros")
           UPDATE "Org" o SET "heldMicros" = o."heldMicros" - gone."amountMicros" FROM gone WHERE o.id = gone."orgId"`,
          [ownerId],
        )
        .catch(() => {});
      await pool
        .query(
          `WITH gone AS (DELETE FROM "KeyHold" WHERE "ownerId" = $1 RETURNING "apiKeyId", "amountMicros")
           UPDATE "ApiKey" k SET "heldMicros" = k."heldMicros" - gone."amountMicros" FROM gone WHERE k.id = gone."apiKeyId"`,
          [ownerId],
        )
        .catch(() => {});
      await pool.end();
    },
  };
  return store;
}
