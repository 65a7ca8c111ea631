// Load generation for the benchmarks: open-loop at a fixed, evenly paced rate (latency is
// measured from when a request was due, so a stalled server cannot hide its queueing), and
// closed-loop maximum throughput with autocannon.
import autocannon from 'autocannon';
import { Pool, type Dispatcher } from 'undici';

export interface RequestSpec {
  path: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface LatencyResult {
  sent: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
  mean: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function openLoop(origin: string, spec: RequestSpec, ratePerSecond: number, seconds: number, warmupSeconds = 1): Promise<LatencyResult> {
  const pool = new Pool(origin, { connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
  const total = Math.round(ratePerSecond * (seconds + warmupSeconds));
  const warmup = Math.round(ratePerSecond * warmupSeconds);
  const intervalMs = 1000 / ratePerSecond;
  const latencies = new Float64Array(total - warmup);
  const tally = { measured: 0, ok: 0, errors: 0, pending: 0 };
  let sentAll = false;
  let allAnswered: () => void = () => {};
  const answered = new Promise<void>((resolve) => (allAnswered = resolve));
  const onAnswer = (index: number, ms: number, status: number) => {
    if (index >= warmup) {
      if (status === 200) {
        tally.ok++;
        latencies[tally.measured++] = ms;
      } else tally.errors++;
    }
    if (--tally.pending === 0 && sentAll) allAnswered();
  };
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const due = start + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    else if (i % 64 === 0) await new Promise((r) => setImmediate(r));
    // Latency counts from when the request was due (so a late send, i.e. queueing, counts),
    // or from when it was actually sent if that was early (timers cannot wait under 1 ms).
    const from = Math.min(due, performance.now());
    tally.pending++;
    pool.dispatch({ path: spec.path, method: spec.method ?? 'GET', headers: spec.headers, body: spec.body ?? null }, new TimedRequest(i, from, onAnswer));
  }
  sentAll = true;
  if (tally.pending > 0) await answered;
  await pool.close();
  const measured = Array.from(latencies.subarray(0, tally.measured)).sort((a, b) => a - b);
  return {
    sent: total - warmup,
    ok: tally.ok,
    errors: tally.errors,
    p50: percentile(measured, 50),
    p99: percentile(measured, 99),
    mean: measured.reduce((s, x) => s + x, 0) / measured.length,
  };
}

/**
 * One open-loop request, timed to the end of its response. undici's low-level dispatch with a
 * handler object rather than `request()`: the load generator's own GC pauses count in every
 * latency it measures, and `request()`'s per-response stream and promises (kept in the old
 * generation after a burst) made its scavenges take 5-9 ms (bench/gc-under-load.ts shows the
 * same in the bare proxy, which uses `request()`).
 */
class TimedRequest implements Dispatcher.DispatchHandler {
  private status = 0;

  constructor(
    private readonly index: number,
    private readonly from: number,
    private readonly onAnswer: (index: number, ms: number, status: number) => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(): void {}

  onResponseEnd(): void {
    this.onAnswer(this.index, performance.now() - this.from, this.status);
  }

  onResponseError(): void {
    this.onAnswer(this.index, NaN, 0);
  }
}

export async function maxThroughput(
  origin: string,
  spec: RequestSpec,
  seconds: number,
  connections = 64,
): Promise<{ rps: number; errors: number; non2xx: number }> {
  const result = await autocannon({
    url: origin + spec.path,
    method: spec.method ?? 'GET',
    headers: spec.headers,
    body: spec.body,
    connections,
    duration: seconds,
  });
  return { rps: result.requests.average, errors: result.errors, non2xx: result.non2xx };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function table(rows: Record<string, string | number>[]): string {
  const cols = Object.keys(rows[0] ?? {});
  const fmt = (v: string | number) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : v);
  return [`| ${cols.join(' | ')} |`, `|${cols.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${cols.map((c) => fmt(r[c]!)).join(' | ')} |`)].join('\n');
}
