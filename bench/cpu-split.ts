// Where the CPU of a request goes, by kind of code, for the gateway next to the bare proxy
// (bench/bare-proxy.ts) on the non-streaming chat route at maximum throughput: Linux `perf`
// samples every thread of each process on the CPU clock (what a thread actually ran, kernel
// included), and each symbol is put in a bucket — the kernel (system calls and loopback TCP),
// V8's garbage collector, its compilers, its runtime, its builtins (inline-cache misses and
// calls from baseline code), JavaScript by tier (optimized, baseline), libc (malloc and
// memcpy), SQLite, Node's and libuv's C++. Shown in microseconds of CPU per request.
// The V8 profiler (bench/profile-gateway.ts) names our functions but samples on the wall
// clock and sees little of native code: a thread descheduled in a system call is charged to
// that call, and a long native call can go unsampled. Use it for which function, this for how
// much of what kind.
// Needs `perf` (Debian: linux-perf) and the right to use it (root, or
// kernel.perf_event_paranoid <= 1). JavaScript frames are named from the map files that
// --perf-basic-prof-only-functions makes V8 write to /tmp (perf-<pid>.map; removed at the end).
//   npx tsx bench/cpu-split.ts [--seconds 6] [--top 25]
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { fixed as f } from './lib/scale.ts';
import { maxThroughput, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '6' }, top: { type: 'string', default: '25' } } });
const seconds = Number(values.seconds);
const FREQUENCY = 1999;
const PERF_FLAG = '--perf-basic-prof-only-functions';

if (spawnSync('perf', ['--version']).status !== 0) throw new Error('bench/cpu-split.ts needs Linux perf (Debian: apt-get install linux-perf)');

/** The bucket of one `perf report` symbol (its DSO and name). */
function bucketOf(dso: string, symbol: string): string {
  if (dso.includes('kernel')) return 'kernel';
  if (symbol.startsWith('JS:*')) return 'JavaScript, optimized';
  if (symbol.startsWith('JS:^')) return 'JavaScript, baseline';
  if (symbol.startsWith('JS:') || dso.startsWith('[JIT]')) return 'JavaScript, other';
  if (
    /Scaveng|Marking|MarkCompact|Sweep|Heap::|GlobalHandles|SizeFromMap|BodyDescriptor|FreeList|Evacuat|SemiSpace|ArrayBufferSweeper|MemoryChunk|PagedSpace|Worklist|RememberedSet|SlotSet|Compactor|MinorMark/.test(
      symbol,
    )
  )
    return 'V8 garbage collector';
  if (/compiler::|turboshaft|maglev|Maglev/.test(symbol)) return 'V8 compilers';
  if (/^Builtins_(LoadIC|StoreIC|KeyedLoadIC|KeyedStoreIC|LoadGlobalIC|DefineNamedOwnIC|DefineKeyedOwnIC)/.test(symbol))
    return 'V8 builtins: inline-cache misses';
  if (/^Builtins_.*(Handler|Baseline)/.test(symbol)) return 'V8 builtins: interpreter and baseline';
  if (symbol.startsWith('Builtins_')) return 'V8 builtins: other';
  if (symbol.startsWith('v8::')) return 'V8 runtime';
  if (symbol.startsWith('sqlite3')) return 'SQLite';
  if (dso.startsWith('libc')) return 'libc (malloc, memcpy)';
  if (/^(node::|uv_|uv__|llhttp)/.test(symbol)) return 'Node and libuv C++';
  return 'other';
}

interface Split {
  name: string;
  rps: number;
  /** CPU microseconds per request, by bucket. */
  buckets: Map<string, number>;
  /** CPU microseconds per request, by DSO and symbol ("dso|symbol"). */
  symbols: Map<string, number>;
}

async function measure(name: string, proc: { child: { pid?: number }; url: string }, spec: Parameters<typeof maxThroughput>[1]): Promise<Split> {
  await maxThroughput(proc.url, spec, 3); // warm up (JIT)
  const pid = proc.child.pid!;
  const data = `/tmp/svc-bench-cpu-split-${name.replaceAll(' ', '-')}-${process.pid}.data`;
  const load = maxThroughput(proc.url, spec, seconds + 2);
  await new Promise((r) => setTimeout(r, 1000));
  const perf = spawn('perf', ['record', '-e', 'cpu-clock', '-F', String(FREQUENCY), '-o', data, '-p', String(pid), '--', 'sleep', String(seconds)], {
    stdio: 'ignore',
  });
  await new Promise((r) => perf.once('exit', r));
  const { rps } = await load;
  const report = spawnSync('perf', ['report', '-i', data, '--no-children', '-F', 'sample,dso,sym', '--stdio', '-g', 'none', '-t', '|'], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  rmSync(data, { force: true });
  const usPerSample = 1e6 / FREQUENCY;
  const requests = rps * seconds;
  const buckets = new Map<string, number>();
  const symbols = new Map<string, number>();
  for (const line of report.stdout.split('\n')) {
    const m = /^\s*(\d+)\s*\|([^|]*)\|\[.\] (.*)$/.exec(line);
    if (!m) continue;
    const us = (Number(m[1]) * usPerSample) / requests;
    const [dso, symbol] = [m[2]!.trim(), m[3]!.trim()];
    const bucket = bucketOf(dso, symbol);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + us);
    symbols.set(`${dso}|${symbol}`, (symbols.get(`${dso}|${symbol}`) ?? 0) + us);
  }
  return { name, rps, buckets, symbols };
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', {
  SVC_DATA_DIR: fx.dataDir,
  DATABASE_URL: fx.databaseUrl,
  SVC_MODELS_FILE: '/nonexistent',
  NODE_OPTIONS: PERF_FLAG,
});
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url, NODE_OPTIONS: PERF_FLAG }, 'node');
const spec = chatSpec(fx.key);

try {
  const g = await measure('gateway', gateway, spec);
  const b = await measure('bare proxy', bare, spec);
  const total = (s: Split) => [...s.buckets.values()].reduce((a, v) => a + v, 0);
  const names = [...new Set([...g.buckets.keys(), ...b.buckets.keys()])].sort((x, y) => (g.buckets.get(y) ?? 0) - (g.buckets.get(x) ?? 0));
  console.log(
    `\nCPU per request, all threads, at maximum throughput (${seconds} s of perf samples each): the gateway ${Math.round(g.rps)} req/s, the bare proxy ${Math.round(b.rps)} req/s\n`,
  );
  console.log(
    table([
      ...names.map((name) => ({ 'kind of code': name, 'gateway µs/req': f(g.buckets.get(name) ?? 0, 1), 'bare proxy µs/req': f(b.buckets.get(name) ?? 0, 1) })),
      { 'kind of code': 'total', 'gateway µs/req': f(total(g), 1), 'bare proxy µs/req': f(total(b), 1) },
    ]),
  );
  console.log(`\nthe gateway's symbols, µs/req:\n`);
  const top = [...g.symbols].sort((x, y) => y[1] - x[1]).slice(0, Number(values.top));
  console.log(
    table(
      top.map(([key, us]) => {
        const [dso, symbol] = key.split('|') as [string, string];
        return { symbol: symbol.slice(0, 110), 'µs/req': f(us, 2), bucket: bucketOf(dso, symbol) };
      }),
    ),
  );
} finally {
  for (const p of [gateway, bare, upstream]) p.child.kill('SIGTERM');
  for (const p of [gateway, bare]) rmSync(`/tmp/perf-${p.child.pid}.map`, { force: true });
}
