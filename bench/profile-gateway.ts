// Where the gateway's CPU goes, next to the bare proxy's (bench/bare-proxy.ts), under the
// same open-loop load on the non-streaming chat route: both are profiled through the
// inspector only while the load runs (no start-up in the figures), and the CPU time is
// shown in microseconds per request, by package and, for the gateway, by function.
//   npx tsx bench/profile-gateway.ts [--rate 1000] [--seconds 6] [--top 40] [--save DIR]
// --save writes both .cpuprofile files (open them in Chrome DevTools or speedscope).
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { INSPECT_ENV, profileTables, profileWhile, saveProfile, type CpuProfile } from './lib/cpu-profile.ts';
import { maxThroughput, openLoop } from './lib/load.ts';
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

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', {
  SVC_DATA_DIR: fx.dataDir,
  DATABASE_URL: fx.databaseUrl,
  SVC_MODELS_FILE: '/nonexistent',
  ...INSPECT_ENV,
});
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url, ...INSPECT_ENV }, 'node');
const spec = chatSpec(fx.key);

try {
  const results: Record<string, { profile: CpuProfile; requests: number }> = {};
  for (const [name, proc] of [
    ['gateway', gateway],
    ['bare proxy', bare],
  ] as const) {
    await maxThroughput(proc.url, spec, 2); // warm up (JIT)
    const { profile, result: load } = await profileWhile(proc.child.pid!, () => openLoop(proc.url, spec, rate, seconds, 0));
    results[name] = { profile, requests: load.ok };
    if (values.save) saveProfile(values.save, name, profile);
  }
  const g = results.gateway!;
  const b = results['bare proxy']!;
  console.log(`\nCPU of the main thread per request, open loop at ${rate}/s for ${seconds}s (${g.requests} and ${b.requests} requests answered 200)\n`);
  console.log(profileTables(g.profile, g.requests, 'req', Number(values.top), { name: 'bare proxy', profile: b.profile, units: b.requests }));
} finally {
  for (const p of [gateway, bare, upstream]) p.child.kill('SIGTERM');
}
