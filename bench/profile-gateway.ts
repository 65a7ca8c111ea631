// Where the gateway's CPU goes, next to the bare proxy's (bench/bare-proxy.ts), under the
// same open-loop load on the non-streaming chat route: both are profiled through the
// inspector only while the load runs (no start-up in the figures), and the CPU time is
// shown in microseconds per request, by package and, for the gateway, by function.
//   npx tsx bench/profile-gateway.ts [--rate 1000] [--seconds 6] [--top 40] [--save DIR]
// --save writes both .cpuprofile files (open them in Chrome DevTools or speedscope).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { benchFixture, CHAT_BODY } from './lib/bench-fixture.ts';
import { attachInspector } from './lib/inspector.ts';
import { maxThroughput, openLoop, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '6' },
    top: { type: 'string', default: '40' },
    save: { type: 'string' },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const inspect = { NODE_OPTIONS: '--inspect=127.0.0.1:0' };
const gateway = await startBundled('bench/gateway-server.ts', {
  SVC_DATA_DIR: fx.dataDir,
  DATABASE_URL: fx.databaseUrl,
  SVC_MODELS_FILE: '/nonexistent',
  ...inspect,
});
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url, ...inspect }, 'node');
const spec = {
  path: '/v1/chat/completions',
  method: 'POST' as const,
  headers: { 'content-type': 'application/json', authorization: `Bearer ${fx.key}` },
  body: CHAT_BODY,
};

try {
  const results: Record<string, { profile: CpuProfile; requests: number }> = {};
  for (const [name, proc] of [
    ['gateway', gateway],
    ['bare proxy', bare],
  ] as const) {
    await maxThroughput(proc.url, spec, 2); // warm up (JIT)
    const session = await attachInspector(proc.child.pid!);
    await session.call('Profiler.enable');
    await session.call('Profiler.setSamplingInterval', { interval: 200 });
    await session.call('Profiler.start');
    const load = await openLoop(proc.url, spec, rate, seconds, 0);
    const { profile } = await session.call<{ profile: CpuProfile }>('Profiler.stop');
    session.close();
    results[name] = { profile, requests: load.ok };
    if (values.save) {
      mkdirSync(values.save, { recursive: true });
      writeFileSync(join(values.save, `${name.replace(' ', '-')}.cpuprofile`), JSON.stringify(profile));
    }
  }

  const byPackage = (p: CpuProfile) => selfTimes(p, (url) => packageOf(url));
  const g = results.gateway!;
  const b = results['bare proxy']!;
  const gp = byPackage(g.profile);
  const bp = byPackage(b.profile);
  const perRequest = (us: number | undefined, n: number) => Number(((us ?? 0) / n).toFixed(1));
  const rows = [...new Set([...gp.keys(), ...bp.keys()])]
    .filter((k) => k !== '(idle)')
    .map((k) => ({ where: k, 'gateway us/req': perRequest(gp.get(k), g.requests), 'bare proxy us/req': perRequest(bp.get(k), b.requests) }))
    .sort((x, y) => y['gateway us/req'] - x['gateway us/req'])
    .filter((r) => r['gateway us/req'] >= 0.5 || r['bare proxy us/req'] >= 0.5);
  const busy = (m: Map<string, number>, n: number) =>
    perRequest(
      [...m].filter(([k]) => k !== '(idle)').reduce((s, [, v]) => s + v, 0),
      n,
    );
  rows.unshift({ where: 'total (not idle)', 'gateway us/req': busy(gp, g.requests), 'bare proxy us/req': busy(bp, b.requests) });
  console.log(`\nCPU of the main thread per request, open loop at ${rate}/s for ${seconds}s (${g.requests} and ${b.requests} requests answered 200)\n`);
  console.log(table(rows));
  console.log(`\ngateway, by function (self time):\n`);
  const fns = selfTimes(g.profile, (url, fn, line) => `${fn || '(anonymous)'} ${shortUrl(url)}:${line + 1}`);
  console.log(
    table(
      [...fns]
        .sort((x, y) => y[1] - x[1])
        .slice(0, Number(values.top))
        .map(([k, v]) => ({ function: k, 'us/req': perRequest(v, g.requests) })),
    ),
  );
} finally {
  for (const p of [gateway, bare, upstream]) p.child.kill('SIGTERM');
}

/** Self time (microseconds) of the profile's samples, grouped by `key`. */
function selfTimes(p: CpuProfile, key: (url: string, functionName: string, line: number) => string): Map<string, number> {
  const nodes = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const out = new Map<string, number>();
  p.samples.forEach((id, i) => {
    const f = nodes.get(id)!;
    const k = f.url ? key(f.url, f.functionName, f.lineNumber) : f.functionName; // (garbage collector), (program), (idle)...
    out.set(k, (out.get(k) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  return out;
}

function packageOf(url: string): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith('node:')) return url.replace(/^node:(internal\/)?/, 'node:').replace(/\/.*$/, '');
  if (url.startsWith('wasm://')) return 'wasm (undici llhttp)';
  return 'project';
}

function shortUrl(url: string): string {
  return url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/\.build\//, '.build/');
}
