// What an org spent over the last N days: per UTC day and model (the chart), per model (with
// units) and per key. Every read of usage rows for the dashboard is in this one file, so that
// moving where usage is recorded changes one place. Usage lives on the usage debits of the
// ledger (kind usage); a request's cost is minus its amount.
//
// Aggregation runs in the database. Prisma's groupBy cannot bucket timestamps by day, so the
// per-day query is SQL per dialect (timestamps are stored as UTC text on SQLite and as UTC
// wall-clock `timestamp` on PostgreSQL, see db/dialect.ts); the rest is portable groupBy.
import type { Database } from '../../db/database.ts';
import { sqlTimestamp } from '../../db/dialect.ts';

export const MAX_USAGE_DAYS = 90;
export const DEFAULT_USAGE_DAYS = 30;
const DAY_MS = 86_400_000;

export interface UsageDay {
  /** UTC date, YYYY-MM-DD. */
  day: string;
  requests: number;
  costMicros: bigint;
  byModel: { modelId: string; requests: number; costMicros: bigint }[];
}

export interface UsageByModel {
  modelId: string;
  modality: 'llm' | 'tts' | 'stt';
  requests: number;
  costMicros: bigint;
  inputTokens: number;
  outputTokens: number;
  characters: number;
  audioMillis: number;
}

export interface UsageByKey {
  /** null: usage not made with a key. */
  keyId: string | null;
  name: string;
  prefix: string | null;
  status: 'active' | 'revoked' | null;
  requests: number;
  costMicros: bigint;
}

export interface UsageSummary {
  /** Start of the first day (UTC midnight) and the moment the summary was taken. */
  from: Date;
  to: Date;
  totalRequests: number;
  totalCostMicros: bigint;
  /** Every day of the window, oldest first, zero-filled. */
  days: UsageDay[];
  /** Most spent first. */
  models: UsageByModel[];
  /** Most spent first. */
  keys: UsageByKey[];
}

interface DayRow {
  day: string;
  modelId: string;
  requests: string;
  cost: string;
}

export async function usageSummary(db: Pick<Database, 'prisma' | 'dialect'>, input: { orgId: string; days?: number; now?: Date }): Promise<UsageSummary> {
  const days = Math.min(Math.max(Math.trunc(input.days ?? DEFAULT_USAGE_DAYS), 1), MAX_USAGE_DAYS);
  const now = input.now ?? new Date();
  const from = new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS - (days - 1) * DAY_MS);
  const where = { orgId: input.orgId, createdAt: { gte: from }, kind: 'usage' as const, modelId: { not: null } };
  const { prisma } = db;

  // Counts and sums leave the database as text: SQLite's sum is an integer and PostgreSQL's a
  // numeric, and neither should pass through a float on the way to a bigint.
  const dayRows =
    db.dialect === 'sqlite'
      ? await prisma.$queryRawUnsafe<DayRow[]>(
          `SELECT substr("createdAt", 1, 10) AS day, "modelId" AS "modelId", CAST(count(*) AS TEXT) AS requests, CAST(-sum("amountMicros") AS TEXT) AS cost
             FROM "LedgerEntry" WHERE "orgId" = ? AND "createdAt" >= ? AND kind = 'usage' AND "modelId" IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2`,
          input.orgId,
          sqlTimestamp('sqlite', from),
        )
      : await prisma.$queryRawUnsafe<DayRow[]>(
          `SELECT to_char("createdAt", 'YYYY-MM-DD') AS day, "modelId" AS "modelId", count(*)::text AS requests, (-sum("amountMicros"))::text AS cost
             FROM "LedgerEntry" WHERE "orgId" = $1 AND "createdAt" >= $2::timestamp AND kind = 'usage' AND "modelId" IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2`,
          input.orgId,
          sqlTimestamp('postgresql', from),
        );

  const [modelGroups, keyGroups] = await Promise.all([
    prisma.ledgerEntry.groupBy({
      by: ['modelId', 'modality'],
      where,
      _count: { _all: true },
      _sum: { amountMicros: true, inputTokens: true, outputTokens: true, characters: true, audioMillis: true },
    }),
    prisma.ledgerEntry.groupBy({ by: ['apiKeyId'], where, _count: { _all: true }, _sum: { amountMicros: true } }),
  ]);

  const byDay = new Map<string, UsageDay>();
  for (let i = 0; i < days; i++) {
    const day = new Date(from.getTime() + i * DAY_MS).toISOString().slice(0, 10);
    byDay.set(day, { day, requests: 0, costMicros: 0n, byModel: [] });
  }
  for (const row of dayRows) {
    const bucket = byDay.get(row.day);
    if (!bucket) continue; // a row stamped in the future by a skewed clock
    const requests = Number(row.requests);
    const costMicros = BigInt(row.cost ?? '0');
    bucket.requests += requests;
    bucket.costMicros += costMicros;
    bucket.byModel.push({ modelId: row.modelId, requests, costMicros });
  }

  const models: UsageByModel[] = modelGroups
    .map((g) => ({
      // Never null here: the query takes usage rows only.
      modelId: g.modelId!,
      modality: g.modality!,
      requests: g._count._all,
      costMicros: -(g._sum.amountMicros ?? 0n),
      inputTokens: g._sum.inputTokens ?? 0,
      outputTokens: g._sum.outputTokens ?? 0,
      characters: g._sum.characters ?? 0,
      audioMillis: g._sum.audioMillis ?? 0,
    }))
    .sort(byCostThen((m) => m.modelId));

  const keyIds = keyGroups.map((g) => g.apiKeyId).filter((id): id is string => id !== null);
  const keyRows = keyIds.length
    ? await prisma.apiKey.findMany({ where: { id: { in: keyIds }, orgId: input.orgId }, select: { id: true, name: true, prefix: true, status: true } })
    : [];
  const keyInfo = new Map(keyRows.map((k) => [k.id, k]));
  const keys: UsageByKey[] = keyGroups
    .map((g) => {
      const info = g.apiKeyId ? keyInfo.get(g.apiKeyId) : undefined;
      return {
        keyId: g.apiKeyId,
        name: info?.name ?? (g.apiKeyId ? '(deleted key)' : '(no key)'),
        prefix: info?.prefix ?? null,
        status: info?.status ?? null,
        requests: g._count._all,
        costMicros: -(g._sum.amountMicros ?? 0n),
      };
    })
    .sort(byCostThen((k) => k.keyId ?? ''));

  return {
    from,
    to: now,
    totalRequests: models.reduce((n, m) => n + m.requests, 0),
    totalCostMicros: models.reduce((n, m) => n + m.costMicros, 0n),
    days: [...byDay.values()],
    models,
    keys,
  };
}

const byCostThen =
  <T extends { costMicros: bigint }>(tieBreak: (x: T) => string) =>
  (a: T, b: T) =>
    a.costMicros === b.costMicros ? tieBreak(a).localeCompare(tieBreak(b)) : a.costMicros > b.costMicros ? -1 : 1;
