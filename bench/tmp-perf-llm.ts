import { spawn } from 'node:child_process';
import { benchFixture, CHAT_BODY } from './lib/bench-fixture.ts';
import { maxThroughput } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';
const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', SVC_NODE_FLAGS: '--heap-growing-percent=30 --perf-basic-prof-only-functions' });
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url }, 'node');
const spec = { path: '/v1/chat/completions', method: 'POST' as const, headers: { 'content-type': 'application/json', authorization: `Bearer ${fx.key}` }, body: CHAT_BODY };
for (const [name, proc] of [['gateway', gateway], ['bare', bare]] as const) {
  await maxThroughput(proc.url, spec, 3);
  const perf = spawn('perf', ['record', '-e', 'cpu-clock', '-F', '1999', '-g', '-o', `/tmp/perf-llm-${name}.data`, '-p', String(proc.child.pid), '--', 'sleep', '6'], { stdio: 'ignore' });
  const exited = new Promise((res) => perf.once('exit', res));
  const r = await maxThroughput(proc.url, spec, 8);
  await exited;
  console.log(name, Math.round(r.rps), 'req/s');
}
for (const p of [gateway, bare, upstream]) p.child.kill('SIGTERM');
process.exit(0);
