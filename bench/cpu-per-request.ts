// The gateway's CPU per request at maximum throughput, thread by thread (/proc/<pid>/task):
// the main thread, V8's GC helpers, the request log's and the checkpointer's workers, with each
// thread's time spent waiting for a core. On a busy 2-core machine a throughput figure moves
// with whatever else runs; the CPU a request costs moves much less, so this is the figure to
// compare a hot-path change by (run it on both trees, a few times each).
//   npx tsx bench/cpu-per-request.ts [--seconds 5] [--runs 3]   (SVC_REQUEST_LOG=off: without the request log)
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, median, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, runs: { type: 'string', default: '3' } } });
const seconds = Number(values.seconds);

interface ThreadTimes {
  name: string;
  /** On a core, and waiting for one (ms): /proc/<pid>/task/<tid>/schedstat. */
  runMs: number;
  waitMs: number;
}

function threads(pid: number): Map<string, ThreadTimes> {
  const out = new Map<string, ThreadTimes>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
      out.set(tid, { name: tid === String(pid) ? 'main' : comm, runMs: run! / 1e6, waitMs: wait! / 1e6 });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent' });
const spec = chatSpec(fx.key);

try {
  await maxThroughput(gateway.url, spec, 2); // warm up (JIT)
  const runs: { rps: number; process: number; main: number; byThread: Map<string, { run: number; wait: number }> }[] = [];
  for (let i = 0; i < Number(values.runs); i++) {
    const before = threads(gateway.child.pid!);
    const started = performance.now();
    const load = await maxThroughput(gateway.url, spec, seconds);
    const requests = (load.rps * (performance.now() - started)) / 1000;
    const after = threads(gateway.child.pid!);
    const byThread = new Map<string, { run: number; wait: number }>();
    for (const [tid, t] of after) {
      const b = before.get(tid) ?? { runMs: 0, waitMs: 0 };
      const key = t.name === 'main' ? 'main' : `${t.name} (${tid})`;
      byThread.set(key, { run: ((t.runMs - b.runMs) * 1000) / requests, wait: ((t.waitMs - b.waitMs) * 1000) / requests });
    }
    const total = [...byThread.values()].reduce((s, t) => s + t.run, 0);
    runs.push({ rps: load.rps, process: total, main: byThread.get('main')!.run, byThread });
    console.log(`run ${i + 1}: ${load.rps.toFixed(0)} req/s, CPU per request ${total.toFixed(1)} µs (main thread ${byThread.get('main')!.run.toFixed(1)})`);
  }
  console.log(
    `\nmedians of ${runs.length}: CPU per request ${median(runs.map((r) => r.process)).toFixed(1)} µs, main thread ${median(runs.map((r) => r.main)).toFixed(1)} µs, ${median(runs.map((r) => r.rps)).toFixed(0)} req/s\n`,
  );
  const last = runs.at(-1)!;
  console.log(
    table(
      [...last.byThread]
        .filter(([, t]) => t.run >= 0.5)
        .map(([thread, t]) => ({ thread, 'CPU µs/request': t.run.toFixed(1), 'waiting for a core µs/request': t.wait.toFixed(1) })),
    ),
  );
} finally {
  gateway.child.kill();
  upstream.child.kill();
}
