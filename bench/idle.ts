// What an idle gateway costs: the bundled gateway (bench/gateway-server.ts, as `svc gateway` runs,
// fresh SQLite fixture) left alone, each of its threads' CPU (utime + stime from
// /proc/<pid>/task/<tid>/stat) and voluntary wake-ups (/proc/<pid>/task/<tid>/status) over a window
// after it has settled. The main thread is the event loop; the others are V8's (GC, compiler),
// libuv's and the worker threads (request log, checkpointer).
//   npx tsx bench/idle.ts [--seconds 30] [--settle 5]
import { readFileSync, readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchFixture } from './lib/bench-fixture.ts';
import { table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';
import { sleep, threadCpuMs } from './lib/scale.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '30' }, settle: { type: 'string', default: '5' } } });
const seconds = Number(values.seconds);

interface ThreadSample {
  cpuMs: number;
  wakeups: number;
}

function threads(pid: number): Map<number, ThreadSample> {
  const out = new Map<number, ThreadSample>();
  for (const tid of readdirSync(`/proc/${pid}/task`).map(Number)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      const wakeups = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
      out.set(tid, { cpuMs: threadCpuMs(pid, tid), wakeups });
    } catch {
      // The thread ended while it was read.
    }
  }
  return out;
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent' });
try {
  const pid = gateway.child.pid!;
  await sleep(Number(values.settle) * 1000);
  const before = threads(pid);
  await sleep(seconds * 1000);
  const after = threads(pid);
  const rows: Record<string, string>[] = [];
  let total = 0;
  for (const [tid, a] of after) {
    const b = before.get(tid) ?? { cpuMs: 0, wakeups: 0 };
    total += a.cpuMs - b.cpuMs;
    if (a.cpuMs === b.cpuMs && a.wakeups - b.wakeups < seconds) continue; // asleep throughout
    rows.push({
      thread: tid === pid ? 'main' : String(tid),
      'CPU ms/s': ((a.cpuMs - b.cpuMs) / seconds).toFixed(2),
      'wake-ups/s': ((a.wakeups - b.wakeups) / seconds).toFixed(1),
    });
  }
  rows.push({ thread: 'all threads', 'CPU ms/s': (total / seconds).toFixed(2), 'wake-ups/s': '' });
  console.log(`idle gateway over ${seconds} s (CPU in 10 ms ticks: read the figures to ±${(10 / seconds).toFixed(2)} ms/s)\n`);
  console.log(table(rows));
} finally {
  for (const p of [gateway, upstream]) p.child.kill('SIGTERM');
}
