// Request counts, error rates and latency percentiles from the request logs: per model and per
// key for an org (the dashboard's Usage page), and per upstream over time for operators (the
// Models page). Latency is the time to the answer's first byte (the whole answer when nothing
// was streamed) of HTTP requests; sessions count as requests but have no latency.
//
// Percentiles come from a histogram the database fills (a count per latency bucket, the same
// query on both dialects), interpolated within the bucket, as Prometheus's histogram_quantile
// does: exact enough to read, and the query never sorts the rows.
import type { Database } from '../../db/database.ts';
import { sqlTimestamp } from '../../db/dialect.ts';

/** Bucket upper bounds in ms; a last, open bucket holds what is slower. */
export const LATENCY_BOUNDS_MS = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000];
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

export interface RequestStats {
  requests: number;
  errors: number;
  /** errors / requests; null without requests. */
  errorRate: number | null;
  /** null where no HTTP request was measured (never 0 for "nothing"). */
  p50Ms: number | null;
  p95Ms: number | null;
  p99Ms: number | null;
}

interface BucketRow {
  g: string;
  b: string;
  n: string;
  e: string;
}

const LATENCY = `COALESCE("ttfbMs", "totalMs")`;
const BUCKET = `CASE WHEN kind = 'session' THEN -1 ${LATENCY_BOUNDS_MS.map((ms, i) => `WHEN ${LATENCY} <= ${ms} THEN ${i}`).join(' ')} ELSE ${LATENCY_BOUNDS_MS.length} END`;

/** The q-quantile (0..1) of a histogram: counts per bucket index (LATENCY_BOUNDS_MS; the last is open). */
export function quantileOf(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i] ?? 0;
    if (n > 0 && seen + n >= rank) {
      const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      if (i >= LATENCY_BOUNDS_MS.length) return lower; // the open bucket: at least its lower bound
      const upper = LATENCY_BOUNDS_MS[i]!;
      return lower + ((upper - lower) * (rank - seen)) / n;
    }
    seen += n;
  }
  return LATENCY_BOUNDS_MS.at(-1)!;
}

class Accumulator {
  requests = 0;
  errors = 0;
  readonly buckets = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);

  add(row: BucketRow): void {
    const n = Number(row.n);
    this.requests += n;
    this.errors += Number(row.e);
    const b = Number(row.b);
    if (b >= 0) this.buckets[b]! += n;
  }

  stats(): RequestStats {
    return {
      requests: this.requests,
      errors: this.errors,
      errorRate: this.requests === 0 ? null : this.errors / this.requests,
      p50Ms: quantileOf(this.buckets, 0.5),
      p95Ms: quantileOf(this.buckets, 0.95),
      p99Ms: quantileOf(this.buckets, 0.99),
    };
  }
}

/** Counts, errors and the latency histogram grouped by `group` (a column expression), over `where`. */
async function grouped(db: Pick<Database, 'prisma' | 'dialect'>, group: string, where: string, params: unknown[]): Promise<Map<string, Accumulator>> {
  const sql = `SELECT ${group} AS g, CAST(${BUCKET} AS TEXT) AS b, CAST(count(*) AS TEXT) AS n, CAST(sum(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS TEXT) AS e
                 FROM "RequestLog" WHERE ${where} GROUP BY 1, 2`;
  const rows = await db.prisma.$queryRawUnsafe<BucketRow[]>(db.dialect === 'sqlite' ? sql : numbered(sql), ...params);
  const out = new Map<string, Accumulator>();
  for (const row of rows) {
    let acc = out.get(row.g);
    if (!acc) out.set(row.g, (acc = new Accumulator()));
    acc.add(row);
  }
  return out;
}

/** `?` placeholders as PostgreSQL's `$1, $2...`. */
function numbered(sql: string): string {
  let i = 0;
  return sql.replace(/\?/g, () => `$${++i}`);
}

const timeParam = (db: Pick<Database, 'dialect'>) => (db.dialect === 'sqlite' ? '?' : '?::timestamp');

export interface OrgRequestStats {
  byModel: (RequestStats & { modelId: string })[];
  byKey: (RequestStats & { keyId: string | null; name: string })[];
}

/** An org's requests over the last `days`, per model and per key (most requests first). */
export async function orgRequestStats(db: Pick<Database, 'prisma' | 'dialect'>, input: { orgId: string; days: number; now?: Date }): Promise<OrgRequestStats> {
  const since = new Date((input.now ?? new Date()).getTime() - input.days * DAY_MS);
  const where = `"orgId" = ? AND "createdAt" >= ${timeParam(db)}`;
  const params = [input.orgId, sqlTimestamp(db.dialect, since)];
  const [models, keys] = await Promise.all([grouped(db, `COALESCE("modelId", '')`, where, params), grouped(db, `COALESCE("apiKeyId", '')`, where, params)]);
  const keyIds = [...keys.keys()].filter(Boolean);
  const names = new Map(
    (await db.prisma.apiKey.findMany({ where: { id: { in: keyIds }, orgId: input.orgId }, select: { id: true, name: true } })).map((k) => [k.id, k.name]),
  );
  const byRequests = (a: RequestStats, b: RequestStats) => b.requests - a.requests;
  return {
    byModel: [...models].map(([modelId, acc]) => ({ modelId, ...acc.stats() })).sort(byRequests),
    byKey: [...keys]
      .map(([keyId, acc]) => ({ keyId: keyId || null, name: keyId ? (names.get(keyId) ?? '(deleted key)') : '(no key)', ...acc.stats() }))
      .sort(byRequests),
  };
}

export interface UpstreamHour extends RequestStats {
  /** The hour's start, ISO. */
  hour: string;
}

/**
 * Each upstream's last `hours` hours, oldest first, every hour present: calls and failures as
 * the gateways counted them (UpstreamStat, every org's traffic), latency from the request logs
 * of the requests it served (null where none was measured).
 */
export async function upstreamHistory(db: Pick<Database, 'prisma' | 'dialect'>, input: { hours: number; now?: Date }): Promise<Map<string, UpstreamHour[]>> {
  const now = input.now ?? new Date();
  const firstHour = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - (input.hours - 1) * HOUR_MS;
  const since = new Date(firstHour);
  const hourOf = db.dialect === 'sqlite' ? `substr("createdAt", 1, 13)` : `to_char("createdAt", 'YYYY-MM-DD"T"HH24')`;
  const [counts, latency] = await Promise.all([
    db.prisma.upstreamStat.findMany({ where: { minute: { gte: since } }, select: { upstreamId: true, minute: true, requests: true, errors: true } }),
    grouped(db, `"servedBy" || ' ' || ${hourOf}`, `"servedBy" IS NOT NULL AND "createdAt" >= ${timeParam(db)}`, [sqlTimestamp(db.dialect, since)]),
  ]);
  const out = new Map<string, UpstreamHour[]>();
  const hoursOf = (upstreamId: string) => {
    let list = out.get(upstreamId);
    if (!list) {
      list = Array.from({ length: input.hours }, (_, i) => ({
        hour: new Date(firstHour + i * HOUR_MS).toISOString(),
        requests: 0,
        errors: 0,
        errorRate: null,
        p50Ms: null,
        p95Ms: null,
        p99Ms: null,
      }));
      out.set(upstreamId, list);
    }
    return list;
  };
  for (const c of counts) {
    const slot = hoursOf(c.upstreamId)[Math.floor((c.minute.getTime() - firstHour) / HOUR_MS)];
    if (!slot) continue;
    slot.requests += c.requests;
    slot.errors += c.errors;
  }
  for (const [key, acc] of latency) {
    const [upstreamId, hour] = key.split(' ') as [string, string];
    const slot = hoursOf(upstreamId)[Math.floor((Date.parse(`${hour}:00:00Z`) - firstHour) / HOUR_MS)];
    if (!slot) continue;
    const s = acc.stats();
    slot.p50Ms = s.p50Ms;
    slot.p95Ms = s.p95Ms;
    slot.p99Ms = s.p99Ms;
  }
  for (const list of out.values()) for (const slot of list) slot.errorRate = slot.requests === 0 ? null : slot.errors / slot.requests;
  return out;
}
