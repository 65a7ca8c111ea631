// Load generation for the benchmarks: open-loop at a fixed, evenly paced rate (latency is
// measured from when a request was due, so a stalled server cannot hide its queueing), and
// closed-loop maximum throughput with autocannon.
import autocannon from 'autocannon';
import { Pool } from 'undici';

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
  const latencies: number[] = [];
  let ok = 0;
  let errors = 0;
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    else if (i % 64 === 0) await new Promise((r) => setImmediate(r));
    // Latency counts from when the request was due (so a late send, i.e. queueing, counts),
    // or from when it was actually sent if that was early (timers cannot wait under 1 ms).
    const from = Math.min(due, performance.now());
    inFlight.push(
      pool
        .request({ path: spec.path, method: spec.method ?? 'GET', headers: spec.headers, body: spec.body })
        .then(async (res) => {
          await res.body.dump();
          const ms = performance.now() - from;
          if (i >= warmup) {
            latencies.push(ms);
            if (res.statusCode === 200) ok++;
            else errors++;
          }
        })
        .catch(() => {
          if (i >= warmup) errors++;
        }),
    );
  }
  await Promise.all(inFlight);
  await pool.close();
  latencies.sort((a, b) => a - b);
  return { sent: total - warmup, ok, errors, p50: percentile(latencies, 50), p99: percentile(latencies, 99), mean: latencies.reduce((s, x) => s + x, 0) / latencies.length };
}

export async function maxThroughput(origin: string, spec: RequestSpec, seconds: number, connections = 64): Promise<{ rps: number; errors: number; non2xx: number }> {
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
  return [
    `| ${cols.join(' | ')} |`,
    `|${cols.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${cols.map((c) => fmt(r[c]!)).join(' | ')} |`),
  ].join('\n');
}
