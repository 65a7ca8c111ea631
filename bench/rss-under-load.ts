// The gateway's RSS idle, at the peak of a closed-loop maximum-throughput load on the chat
// route, and some seconds after it: how the Node flags (SVC_NODE_FLAGS, passed through to the
// gateway as `svc` would) trade memory for speed.
//   SVC_NODE_FLAGS=--heap-growing-percent=50 npx tsx bench/rss-under-load.ts [--seconds 8]
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput } from './lib/load.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '8' } } });
const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent' });
const spec = chatSpec(fx.key);
const pid = gateway.child.pid!;
try {
  const idle = rssMb(pid);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
  const load = await maxThroughput(gateway.url, spec, Number(values.seconds));
  clearInterval(sampler);
  const after = rssMb(pid);
  await new Promise((resolve) => setTimeout(resolve, 8_000));
  console.log(
    `SVC_NODE_FLAGS=${JSON.stringify(process.env.SVC_NODE_FLAGS ?? '(default)')}: RSS idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB under ${Math.round(load.rps)} req/s, ${after.toFixed(0)} MB at the end of the load, ${rssMb(pid).toFixed(0)} MB 8 s later`,
  );
} finally {
  gateway.child.kill('SIGTERM');
  upstream.child.kill('SIGTERM');
}
