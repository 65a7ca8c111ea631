// Checks every upstream on an interval, marks it up or down in the registry at once, and
// records changes in the database so the dashboard, the CLI and other replicas see them.
import type { Prisma } from '../../server/db/database.ts';
import type { HealthCheck, HealthResult } from '../upstreams/contract.ts';
import type { ModelRegistry, UpstreamEntry } from './model-registry.ts';

/** Told every health observation (metrics): `fromCheck` false when a request found the upstream unreachable. */
export type HealthObserver = (upstream: UpstreamEntry, ok: boolean, fromCheck: boolean) => void;

export class HealthChecker {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly registry: ModelRegistry,
    private readonly prisma: Prisma,
    private readonly checks: (protocol: string) => HealthCheck | undefined,
    private readonly observe: HealthObserver = () => {},
    private readonly timeoutMs = 5_000,
  ) {}

  /** One round of checks over the upstreams registered now. */
  async checkAll(): Promise<void> {
    await Promise.all(this.registry.upstreams().map((u) => this.checkOne(u)));
  }

  /** The periodic round: skipped while the previous one is still running (slow upstreams). */
  private tick(): void {
    if (this.inFlight) return;
    this.inFlight = this.checkAll()
      .catch(() => {})
      .finally(() => {
        this.inFlight = null;
      });
  }

  private async checkOne(upstream: UpstreamEntry): Promise<void> {
    const check = this.checks(upstream.protocol);
    const result: HealthResult = check
      ? await check(upstream, AbortSignal.timeout(this.timeoutMs))
      : { ok: false, latencyMs: 0, error: `unknown protocol '${upstream.protocol}'` };
    this.registry.setHealth(upstream.id, result.ok ? 'up' : 'down', result.error);
    // The engine answers its check again: its circuit closes (docs/failover.md, "Circuits").
    if (result.ok) this.registry.circuits.healthy(upstream.id);
    this.observe(upstream, result.ok, true);
    await this.prisma.upstream
      .update({
        where: { id: upstream.id },
        data: { health: result.ok ? 'up' : 'down', lastCheckedAt: new Date(), latencyMs: result.latencyMs, lastError: result.error ?? null },
      })
      .catch(() => {
        // The upstream may have been removed since the snapshot; the next refresh drops it.
      });
  }

  /**
   * An observation outside the checks: a request found the upstream unreachable (it is out until
   * the next good check), or found it working (as a good check: up, and its circuit closed).
   */
  record(upstream: UpstreamEntry, result: Pick<HealthResult, 'ok' | 'error'>): void {
    this.registry.setHealth(upstream.id, result.ok ? 'up' : 'down', result.error);
    if (result.ok) this.registry.circuits.healthy(upstream.id);
    this.observe(upstream, result.ok, false);
  }

  start(intervalMs: number): void {
    this.tick();
    this.timer = setInterval(() => this.tick(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
