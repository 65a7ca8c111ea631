import pg from 'pg';
import { sqlTimestamp } from './dialect.js';
import type { HotStore, KeyAuthRecord } from './hot-store.js';
import { newTimeOrderedId } from './ids.js';

export function createPostgresHotStore(connectionString: string): HotStore {
  const pool = new pg.Pool({ connectionString, max: 10, connectionTimeoutMillis: 5_000 });
  // An idle client that loses its connection must not crash the process; the next query fails instead.
  pool.on('error', () => {});
  const ts = (d: Date) => sqlTimestamp('postgresql', d);

  const store: HotStore = {
    async findKeyByHash(hash): Promise<KeyAuthRecord | null> {
      const { rows } = await pool.query<{ keyId: string; orgId: string; status: 'active' | 'revoked'; rateLimitRpm: number | null; balanceMicros: string }>({
        name: 'svc_find_key',
        text: `SELECT k.id AS "keyId", k."orgId", k.status::text AS status, k."rateLimitRpm", o."balanceMicros"::text AS "balanceMicros"
                 FROM "ApiKey" k JOIN "Org" o ON o.id = k."orgId" WHERE k.hash = $1`,
        values: [hash],
      });
      const row = rows[0];
      return row ? { ...row, balanceMicros: BigInt(row.balanceMicros) } : null;
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
      const now = ts(new Date());
      const u = c.usage;
      const { rows } = await pool.query<{ b: string }>({
        name: 'svc_ledger',
        text: `WITH o AS (
                 UPDATE "Org" SET "balanceMicros" = "balanceMicros" + $2::bigint, "updatedAt" = $8::timestamp
                  WHERE id = $1 RETURNING "balanceMicros"),
               l AS (
                 INSERT INTO "LedgerEntry" (id, "orgId", kind, "amountMicros", "balanceAfterMicros", description, "apiKeyId", "requestId",
                                            "modelId", modality, route, "inputTokens", "outputTokens", characters, "audioMillis", "createdAt")
                 SELECT $3, $1, $4::"LedgerKind", $2::bigint, o."balanceMicros", $5, $6, $7,
                        $9, $10::"Modality", $11, $12, $13, $14, $15, $8::timestamp FROM o)
               SELECT "balanceMicros"::text AS b FROM o`,
        values: [
          c.orgId, c.amountMicros.toString(), newTimeOrderedId('led'), c.kind, c.description, c.apiKeyId ?? null, c.requestId ?? null, now,
          u?.modelId ?? null, u?.modality ?? null, u?.route ?? null, u?.inputTokens ?? 0, u?.outputTokens ?? 0, u?.characters ?? 0, u?.audioMillis ?? 0,
        ],
      });
      return rows[0] ? BigInt(rows[0].b) : null;
    },
    // A round trip per debit either way: nothing to gain from answering before the commit,
    // and a debit that fails can still withhold its request's result.
    applyUsageDebit(change) {
      return store.applyLedgerChange(change);
    },
    debitsFailing() {
      return false;
    },
    async settle() {},
    async touchKeys(lastUsed) {
      if (lastUsed.size === 0) return;
      const ids = [...lastUsed.keys()];
      const times = [...lastUsed.values()].map(ts);
      await pool.query(
        `UPDATE "ApiKey" k SET "lastUsedAt" = v.t::timestamp FROM unnest($1::text[], $2::text[]) AS v(id, t) WHERE k.id = v.id`,
        [ids, times],
      );
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      await pool.end();
    },
  };
  return store;
}
