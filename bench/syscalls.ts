// System calls per request, the gateway's next to the bare proxy's, under the same open loop on
// the non-streaming chat route: `strace -c -f` attached to each process while the load runs
// (strace slows the process it counts, so read the counts, not the times). On this VM a system
// call costs 5-20 us under load, so their count is much of the gateway's cost per request.
//   npx tsx bench/syscalls.ts [--rate 500] [--seconds 4]     (needs Debian's strace)
import { execFileSync, spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, openLoop, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '500' }, seconds: { type: 'string', default: '4' } } });
try {
  execFileSync('strace', ['-V'], { stdio: 'ignore' });
} catch {
  console.error('strace is not installed (apt-get install strace)');
  process.exit(1);
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent' });
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url }, 'node');
const spec = chatSpec(fx.key);

/** strace -c's summary as calls per syscall name. */
function parseSummary(text: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    if (m && m[2] !== 'total') calls.set(m[2]!, Number(m[1]));
  }
  return calls;
}

try {
  const counted: Record<string, { calls: Map<string, number>; requests: number }> = {};
  for (const [name, proc] of [
    ['gateway', gateway],
    ['bare proxy', bare],
  ] as const) {
    await maxThroughput(proc.url, spec, 2); // warm up (JIT, connection pools)
    const strace = spawn('strace', ['-f', '-c', '-p', String(proc.child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
    let summary = '';
    strace.stderr!.on('data', (d: Buffer) => (summary += d.toString()));
    await new Promise((r) => setTimeout(r, 500)); // attached to every thread
    const load = await openLoop(proc.url, spec, Number(values.rate), Number(values.seconds), 0);
    strace.kill('SIGINT');
    await new Promise((r) => strace.once('exit', r));
    counted[name] = { calls: parseSummary(summary), requests: load.ok };
  }
  const names = [...new Set([...counted.gateway!.calls.keys(), ...counted['bare proxy']!.calls.keys()])];
  const perRequest = (side: string, call: string) => (counted[side]!.calls.get(call) ?? 0) / counted[side]!.requests;
  const rows = names
    .map((call) => ({ syscall: call, 'gateway per request': perRequest('gateway', call), 'bare proxy per request': perRequest('bare proxy', call) }))
    .filter((r) => r['gateway per request'] >= 0.01 || r['bare proxy per request'] >= 0.01)
    .sort((a, b) => b['gateway per request'] - a['gateway per request']);
  console.log(
    `\nSystem calls per request (all threads), open loop at ${values.rate}/s for ${values.seconds}s: ${counted.gateway!.requests} and ${counted['bare proxy']!.requests} requests answered 200\n`,
  );
  console.log(table(rows));
} finally {
  for (const p of [gateway, bare, upstream]) p.child.kill('SIGTERM');
}
