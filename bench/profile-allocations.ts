// Where the gateway allocates under load: V8's sampling heap profiler, run through the
// inspector with collected objects included (what a request allocates and drops is what the
// young-generation GCs cost), during a closed-loop load on the non-streaming chat route (or an
// open loop at --rate). Prints the bytes allocated per request by function and by package.
//   npx tsx bench/profile-allocations.ts [--seconds 5] [--rate N] [--core off] [--live | --promoted] [--top 40] [--save FILE]
// --save writes the profile (.heapprofile: open it in Chrome DevTools' Memory tab).
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, openLoop } from './lib/load.ts';
import { attachInspector } from './lib/inspector.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    core: { type: 'string', default: 'on' },
    top: { type: 'string', default: '40' },
    live: { type: 'boolean', default: false },
    promoted: { type: 'boolean', default: false },
    rate: { type: 'string' },
    save: { type: 'string' },
  },
});

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', {
  SVC_DATA_DIR: fx.dataDir,
  DATABASE_URL: fx.databaseUrl,
  SVC_MODELS_FILE: '/nonexistent',
  BENCH_CORE: values.core === 'off' ? 'off' : 'on',
  BENCH_KEY_ID: fx.keyId,
  BENCH_ORG_ID: fx.orgId,
  NODE_OPTIONS: '--inspect=127.0.0.1:0', // the gateway's own Node flags stay as svc sets them
});
const spec = chatSpec(fx.key);
try {
  await maxThroughput(gateway.url, spec, 2); // warm up
  const ws = await attachInspector(gateway.child.pid!);
  // --live: only what is still alive when sampling stops; --promoted: what outlived the young
  // generation (collected by a full GC or still alive), which is what makes scavenges slow.
  await ws.call('HeapProfiler.startSampling', {
    samplingInterval: 1024,
    includeObjectsCollectedByMajorGC: !values.live,
    includeObjectsCollectedByMinorGC: !values.live && !values.promoted,
  });
  // Closed loop at maximum throughput (64 connections), or open loop at --rate requests/s.
  const load = values.rate
    ? { rps: (await openLoop(gateway.url, spec, Number(values.rate), Number(values.seconds), 0)).ok / Number(values.seconds) }
    : await maxThroughput(gateway.url, spec, Number(values.seconds));
  const { profile } = await ws.call<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
  ws.close();
  if (values.save) writeFileSync(values.save, JSON.stringify(profile));
  const requests = load.rps * Number(values.seconds);
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  let total = 0;
  const frameName = ({ functionName, url, lineNumber }: ProfileNode['callFrame']) =>
    `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/\.build\//, '.build/')}:${lineNumber + 1}`;
  // A builtin's allocation (Map growth, an array's push) is named with the function that called it.
  const walk = (n: ProfileNode, caller: string) => {
    const { url } = n.callFrame;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1] ?? (url.startsWith('node:') ? url : url ? 'project' : '(vm)');
    const own = frameName(n.callFrame);
    const fn = url ? own : `${own} ← ${caller}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + n.selfSize);
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + n.selfSize);
    total += n.selfSize;
    for (const child of n.children) walk(child, url ? own : caller);
  };
  walk(profile.head, '(root)');
  const perRequest = (bytes: number) => `${(bytes / requests / 1024).toFixed(2).padStart(7)} KB`;
  console.log(`${Math.round(load.rps)} req/s; allocated ${perRequest(total)} per request (sampled)\n\nby package:`);
  for (const [k, v] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(perRequest(v), k);
  console.log('\nby function:');
  for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) console.log(perRequest(v), k);
} finally {
  gateway.child.kill('SIGINT');
  upstream.child.kill('SIGTERM');
}
