// What the garbage collector costs under an evenly paced load on the chat route, for the bare
// proxy and the gateway (as svc runs it) on the same upstream: young-generation GCs (count,
// mean and longest pause), what they promoted to the old generation per request, and full GCs.
// Each process is warmed up at maximum throughput first, as in bench/llm-proxy.ts (a burst
// is also what makes V8 decide which allocations to keep). GC pauses are what the p99 is made of.
//   npx tsx bench/gc-under-load.ts [--rate 1000] [--seconds 8]
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, openLoop } from './lib/load.ts';
import { ROOT, startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '8' } } });
const rate = Number(values.rate);
const seconds = Number(values.seconds);

interface GcTotals {
  minor: number;
  minorMs: number;
  minorMaxMs: number;
  major: number;
  majorMs: number;
  majorMaxMs: number;
  oldGrowthBytes: number;
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const probe = (name: string) => {
  const file = join(tmpdir(), `svc-gc-probe-${name}-${process.pid}.json`);
  return { file, env: { NODE_OPTIONS: `--import ${join(ROOT, 'bench/lib/gc-probe.mjs')}`, GC_PROBE_FILE: file } };
};
const settle = () => new Promise((resolve) => setTimeout(resolve, 700)); // the probe writes twice a second
const rows: string[] = [];
try {
  for (const target of ['bare proxy', 'gateway'] as const) {
    const p = probe(target.replace(' ', '-'));
    const server =
      target === 'gateway'
        ? await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', ...p.env })
        : await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url, ...p.env }, 'node');
    const spec = chatSpec(fx.key);
    try {
      await maxThroughput(server.url, spec, 2);
      await settle();
      const before = JSON.parse(readFileSync(p.file, 'utf8')) as GcTotals;
      const load = await openLoop(server.url, spec, rate, seconds, 0);
      await settle();
      const after = JSON.parse(readFileSync(p.file, 'utf8')) as GcTotals;
      const minor = after.minor - before.minor;
      const major = after.major - before.major;
      const promotedPerRequest = (after.oldGrowthBytes - before.oldGrowthBytes) / load.ok;
      rows.push(
        `| ${target} | ${load.ok} | ${minor} | ${((after.minorMs - before.minorMs) / Math.max(1, minor)).toFixed(2)} | ${after.minorMaxMs.toFixed(1)} | ${(promotedPerRequest / 1024).toFixed(2)} | ${major} | ${((after.majorMs - before.majorMs) / Math.max(1, major)).toFixed(1)} | ${load.p50.toFixed(3)} | ${load.p99.toFixed(2)} |`,
      );
    } finally {
      server.child.kill('SIGTERM');
    }
  }
} finally {
  upstream.child.kill('SIGTERM');
}
console.log(`${rate} req/s for ${seconds} s after a 2 s burst (longest pause: since the process started)\n`);
console.log('| process | requests | scavenges | mean scavenge ms | longest scavenge ms | promoted KB/request | full GCs | mean full GC ms | p50 ms | p99 ms |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
