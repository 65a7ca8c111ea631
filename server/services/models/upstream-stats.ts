// Per-upstream call and failure counts. Each gateway counts in memory and adds its counts to
// the per-minute rows every few seconds (an upsert that increments, so replicas add up); the
// dashboard reads the error rate over a recent window. Rows older than a week are dropped.
import type { Prisma } from '../../db/database.ts';

const MINUTE = 60_000;
export const STATS_RETENTION_MS = 7 * 24 * 60 * MINUTE;

export interface UpstreamCounts {
  requests: number;
  errors: number;
}

export class UpstreamStatsRecorder {
  private pending = new Map<string, UpstreamCounts & { upstreamId: string; minute: number }>();
  /** Each upstream's entry in `pending` for the latest minute it was counted in. */
  private readonly latest = new Map<string, UpstreamCounts & { upstreamId: string; minute: number }>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly prisma: Prisma,
    private readonly now: () => number = Date.now,
  ) {}

  /** One call to the upstream, answered (ok) or failed. */
  record(upstreamId: string, ok: boolean): void {
    const entry = this.entry(upstreamId);
    entry.requests++;
    if (!ok) entry.errors++;
  }

  /** A call already counted as answered turned out to be an engine error (its HTTP status). */
  failedAfterAnswer(upstreamId: string): void {
    this.entry(upstreamId).errors++;
  }

  private entry(upstreamId: string) {
    const minute = Math.floor(this.now() / MINUTE) * MINUTE;
    // On every request: the upstream's entry of the current minute, without building a key.
    let entry = this.latest.get(upstreamId);
    if (entry?.minute === minute) return entry;
    const key = `${upstreamId} ${minute}`;
    entry = this.pending.get(key);
    if (!entry) this.pending.set(key, (entry = { upstreamId, minute, requests: 0, errors: 0 }));
    this.latest.set(upstreamId, entry);
    return entry;
  }

  start(intervalMs: number, onError: (err: unknown) => void): void {
    this.timer = setInterval(() => void this.flush().catch(onError), intervalMs);
    this.timer.unref();
  }

  /** Adds what was counted since the last flush; counts of a failed flush are kept for the next. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = [...this.pending.values()];
      this.pending.clear();
      this.latest.clear();
      for (const [i, e] of batch.entries()) {
        const where = { upstreamId_minute: { upstreamId: e.upstreamId, minute: new Date(e.minute) } };
        try {
          await this.prisma.upstreamStat.upsert({
            where,
            create: { upstreamId: e.upstreamId, minute: new Date(e.minute), requests: e.requests, errors: e.errors },
            update: { requests: { increment: e.requests }, errors: { increment: e.errors } },
          });
        } catch (err) {
          // An upstream removed meanwhile (foreign key) loses its counts; the rest wait for the next flush.
          if ((err as { code?: string }).code === 'P2003') continue;
          for (const rest of batch.slice(i)) this.merge(rest);
          throw err;
        }
      }
      await this.prisma.upstreamStat.deleteMany({ where: { minute: { lt: new Date(this.now() - STATS_RETENTION_MS) } } });
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => {});
  }

  private merge(e: UpstreamCounts & { upstreamId: string; minute: number }): void {
    const key = `${e.upstreamId} ${e.minute}`;
    const current = this.pending.get(key);
    if (current) {
      current.requests += e.requests;
      current.errors += e.errors;
    } else this.pending.set(key, { ...e });
  }
}

/** Calls and failures per upstream over the last `windowMs` (all replicas). */
export async function recentUpstreamCounts(prisma: Prisma, windowMs = 15 * MINUTE, now = Date.now()): Promise<Map<string, UpstreamCounts>> {
  const rows = await prisma.upstreamStat.groupBy({
    by: ['upstreamId'],
    where: { minute: { gte: new Date(Math.floor((now - windowMs) / MINUTE) * MINUTE) } },
    _sum: { requests: true, errors: true },
  });
  return new Map(rows.map((r) => [r.upstreamId, { requests: r._sum.requests ?? 0, errors: r._sum.errors ?? 0 }]));
}
