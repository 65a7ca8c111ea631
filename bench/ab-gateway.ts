// The gateway of this working tree against the gateway of another commit, in one run, on the
// same upstream: paired rounds (the order alternates) of maximum throughput and of an open
// loop's p50/p99, reported as medians of per-round ratios. For changes to the hot path, whose
// effect (a few per cent) is smaller than the drift of a busy 2-core machine between runs.
// Each maximum-throughput round also reads the CPU its gateway's main thread ran per request
// (/proc/<pid>/task/<pid>/stat): which process the scheduler favours moves throughput by
// ±10 % from one round to the next on 2 shared cores, the CPU a request costs far less.
//   npx tsx bench/ab-gateway.ts --base <commit> [--rounds 8] [--seconds 3] [--rate 1000]
//     [--base-env K=V,K=V] [--tree-env K=V,K=V]
// `--base .` compares this tree with itself, e.g. under other Node flags (--tree-env
// SVC_NODE_FLAGS=--single-threaded-gc) or without the access log (BENCH_GATEWAY_LOG_LEVEL is
// read by the bench, so pass LOG_LEVEL=warn instead).
// The base is checked out as a git worktree in the temp directory (with this tree's
// node_modules and generated Prisma client linked in) and bundled there as svc bundles itself.
// Each gateway has its own database, so neither sees the other's commits.
import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, median, openLoop } from './lib/load.ts';
import { ROOT, startBundled, startTs } from './lib/processes.ts';
import { mainThreadCpuMs } from './lib/scale.ts';

const { values } = parseArgs({
  options: {
    base: { type: 'string' },
    rounds: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '3' },
    rate: { type: 'string', default: '1000' },
    'base-env': { type: 'string', default: '' },
    'tree-env': { type: 'string', default: '' },
  },
});
if (!values.base) throw new Error('usage: npx tsx bench/ab-gateway.ts --base <commit> [--rounds 8] [--seconds 3] [--rate 1000]');
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const rate = Number(values.rate);

const envOption = (text: string) =>
  Object.fromEntries(
    text
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
const commit = values.base === '.' ? 'this tree' : execFileSync('git', ['rev-parse', '--short', values.base], { cwd: ROOT, encoding: 'utf8' }).trim();
const baseRoot = values.base === '.' ? ROOT : join(tmpdir(), `svc-ab-${commit}`);
if (!existsSync(baseRoot)) {
  execFileSync('git', ['worktree', 'add', '--detach', baseRoot, commit], { cwd: ROOT, stdio: 'ignore' });
  symlinkSync(join(ROOT, 'node_modules'), join(baseRoot, 'node_modules'));
  symlinkSync(join(ROOT, 'server/db/generated'), join(baseRoot, 'server/db/generated'));
}

const upstream = await startTs('bench/upstream-server.ts');
const start = async (root: string, env: Record<string, string>) => {
  const fx = await benchFixture(upstream.url);
  const gw = await startBundled(
    'bench/gateway-server.ts',
    { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', ...env },
    'gateway',
    root,
  );
  return {
    ...gw,
    spec: chatSpec(fx.key),
  };
};
const sides = { base: await start(baseRoot, envOption(values['base-env']!)), tree: await start(ROOT, envOption(values['tree-env']!)) };
type Side = keyof typeof sides;

/** A maximum-throughput round: its rate and the main thread's CPU per request (µs). */
async function maxRound(side: (typeof sides)[Side]): Promise<{ rps: number; cpu: number }> {
  const pid = side.child.pid!;
  const cpuBefore = mainThreadCpuMs(pid);
  const { rps } = await maxThroughput(side.url, side.spec, seconds);
  return { rps, cpu: ((mainThreadCpuMs(pid) - cpuBefore) * 1000) / (rps * seconds) };
}

try {
  for (const side of Object.values(sides)) await maxThroughput(side.url, side.spec, 2); // warm up
  const acc: Record<Side, { max: number[]; cpu: number[]; p50: number[]; p99: number[] }> = {
    base: { max: [], cpu: [], p50: [], p99: [] },
    tree: { max: [], cpu: [], p50: [], p99: [] },
  };
  for (let r = 0; r < rounds; r++) {
    const order: Side[] = r % 2 ? ['tree', 'base'] : ['base', 'tree'];
    for (const s of order) {
      const { rps, cpu } = await maxRound(sides[s]);
      acc[s].max.push(rps);
      acc[s].cpu.push(cpu);
    }
    for (const s of order) {
      const l = await openLoop(sides[s].url, sides[s].spec, rate, seconds);
      acc[s].p50.push(l.p50);
      acc[s].p99.push(l.p99);
    }
    console.log(
      `round ${r + 1}: max ${Math.round(acc.base.max[r]!)} -> ${Math.round(acc.tree.max[r]!)} req/s; main thread ${acc.base.cpu[r]!.toFixed(1)} -> ${acc.tree.cpu[r]!.toFixed(1)} µs/req; p50 ${acc.base.p50[r]!.toFixed(3)} -> ${acc.tree.p50[r]!.toFixed(3)} ms; p99 ${acc.base.p99[r]!.toFixed(2)} -> ${acc.tree.p99[r]!.toFixed(2)} ms`,
    );
  }
  const ratio = (k: 'max' | 'cpu' | 'p50' | 'p99') => median(acc.tree[k].map((v, i) => v / acc.base[k][i]!));
  console.log(
    `\nthis tree vs ${commit}, medians of ${rounds} per-round ratios: max throughput ${ratio('max').toFixed(3)}x, main-thread CPU per request ${ratio('cpu').toFixed(3)}x, p50 @${rate}/s ${ratio('p50').toFixed(3)}x, p99 @${rate}/s ${ratio('p99').toFixed(3)}x`,
  );
  console.log(
    `medians: max ${Math.round(median(acc.base.max))} -> ${Math.round(median(acc.tree.max))} req/s, main thread ${median(acc.base.cpu).toFixed(1)} -> ${median(acc.tree.cpu).toFixed(1)} µs/req, p50 ${median(acc.base.p50).toFixed(3)} -> ${median(acc.tree.p50).toFixed(3)} ms, p99 ${median(acc.base.p99).toFixed(2)} -> ${median(acc.tree.p99).toFixed(2)} ms`,
  );
} finally {
  for (const p of [sides.base, sides.tree, upstream]) p.child.kill('SIGTERM');
}
