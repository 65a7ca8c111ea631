// LLM proxy benchmark, one run, same fast loopback upstream for all three paths:
//   direct to the upstream | bare Node proxy (bench/bare-proxy.ts) | the gateway (auth, rate
//   limit, metering on; a key with a raised limit, not a disabled limiter).
// Non-streaming at fixed open-loop rates and at maximum throughput; streaming time to first
// chunk; gateway RSS with many concurrent open streams. Medians over rounds.
//   npx tsx bench/llm-proxy.ts [--rounds 5] [--seconds 3] [--streams 1000] [--request-log on|off]
import { parseArgs } from 'node:util';
import { request, Agent } from 'undici';
import { benchFixture, CHAT_BODY } from './lib/bench-fixture.ts';
import { maxThroughput, median, openLoop, percentile, table } from './lib/load.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';
import { mainThreadCpuMs } from './lib/scale.ts';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    streams: { type: 'string', default: '1000' },
    'request-log': { type: 'string', default: 'on' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const streams = Number(values.streams);

const upstream = await startTs('bench/upstream-server.ts');
// A second upstream that streams: first chunk at once, then slowly (for TTFB and open streams).
const slowStream = await startTs('bench/upstream-server.ts', { BENCH_UPSTREAM_MODE: 'stream', BENCH_STREAM_DELAY_MS: '1000' });
const fx = await benchFixture(upstream.url);
const env = { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', SVC_REQUEST_LOG: values['request-log'] };
const gateway = await startBundled('bench/gateway-server.ts', env);
const bare = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: upstream.url }, 'node');
const bareStream = await startBundled('bench/bare-proxy.ts', { BARE_PROXY_TARGET: slowStream.url }, 'node');

// The gateway's stream model points at the streaming upstream.
const { openDatabase } = await import('../server/db/database.ts');
const { upsertModel } = await import('../server/services/models/upsert-model.ts');
const db = openDatabase(fx.databaseUrl);
await upsertModel(db.prisma, checkProtocol, {
  id: 'bench-stream',
  modality: 'llm',
  prices: { outputPicoPerToken: 600_000n },
  upstream: { url: slowStream.url, protocol: 'openai' },
});
await db.close();
await new Promise((r) => setTimeout(r, 2500)); // registry refresh

const headers = { 'content-type': 'application/json', authorization: `Bearer ${fx.key}` };
const paths = {
  direct: { origin: upstream.url.replace(/\/v1$/, ''), path: '/v1/chat/completions', pid: upstream.child.pid! },
  'bare proxy': { origin: bare.url, path: '/v1/chat/completions', pid: bare.child.pid! },
  gateway: { origin: gateway.url, path: '/v1/chat/completions', pid: gateway.child.pid! },
} as const;
type PathName = keyof typeof paths;

async function ttfb(origin: string, path: string, model: string, n: number): Promise<number[]> {
  const out: number[] = [];
  const agent = new Agent({ connections: 8 });
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await request(origin + path, {
      method: 'POST',
      headers,
      dispatcher: agent,
      body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    for await (const _ of res.body) {
      out.push(performance.now() - t);
      break;
    }
    res.body.destroy();
  }
  await agent.close();
  return out.sort((a, b) => a - b);
}

try {
  const rows: Record<string, string | number>[] = [];
  const acc: Record<PathName, Record<string, number[]>> = { direct: {}, 'bare proxy': {}, gateway: {} };
  const push = (p: PathName, k: string, v: number) => (acc[p][k] ??= []).push(v);
  for (const p of Object.keys(paths) as PathName[]) await maxThroughput(paths[p].origin, { path: paths[p].path, method: 'POST', headers, body: CHAT_BODY }, 2);
  for (let r = 0; r < rounds; r++) {
    for (const p of Object.keys(paths) as PathName[]) {
      const spec = { path: paths[p].path, method: 'POST' as const, headers, body: CHAT_BODY };
      for (const rate of [500, 1000]) {
        const l = await openLoop(paths[p].origin, spec, rate, seconds);
        push(p, `p50@${rate}`, l.p50);
        push(p, `p99@${rate}`, l.p99);
        push(p, 'errors', l.errors);
      }
      const cpuBefore = mainThreadCpuMs(paths[p].pid);
      const { rps } = await maxThroughput(paths[p].origin, spec, seconds);
      push(p, 'max', rps);
      // The main thread's CPU per request: what the throughput ratio comes from when both
      // proxies' main threads are saturated; on 2 shared cores they often are not.
      push(p, 'cpu', ((mainThreadCpuMs(paths[p].pid) - cpuBefore) * 1000) / (rps * seconds));
    }
  }
  for (const p of Object.keys(paths) as PathName[]) {
    const a = acc[p];
    rows.push({
      path: p,
      'p50 ms @500/s': median(a['p50@500']!),
      'p99 ms @500/s': median(a['p99@500']!),
      'p50 ms @1000/s': median(a['p50@1000']!),
      'p99 ms @1000/s': median(a['p99@1000']!),
      'max req/s': Math.round(median(a.max!)),
      'main-thread µs/req at max': median(a.cpu!).toFixed(1),
      errors: a.errors!.reduce((s, x) => s + x, 0),
    });
  }
  console.log(`\nLLM proxy, non-streaming POST /v1/chat/completions, ${rounds} rounds x ${seconds}s, medians\n`);
  console.log(table(rows));
  // Each round measures the three paths back to back; the ratios are taken per round and
  // their median reported, so that load from other processes, which drifts over seconds,
  // hits both sides of a ratio alike.
  const added = (p: PathName, k: string, r: number) => acc[p][k]![r]! - acc.direct[k]![r]!;
  const perRound = (f: (r: number) => number) => median(Array.from({ length: rounds }, (_v, r) => f(r)));
  for (const rate of [500, 1000]) {
    const k50 = `p50@${rate}`,
      k99 = `p99@${rate}`;
    const b50 = perRound((r) => added('bare proxy', k50, r)),
      g50 = perRound((r) => added('gateway', k50, r));
    const b99 = perRound((r) => added('bare proxy', k99, r)),
      g99 = perRound((r) => added('gateway', k99, r));
    const r50 = perRound((r) => added('gateway', k50, r) / added('bare proxy', k50, r));
    const r99 = perRound((r) => added('gateway', k99, r) / added('bare proxy', k99, r));
    console.log(
      `@${rate}/s added over direct: bare p50 ${b50.toFixed(3)} / p99 ${b99.toFixed(3)} ms; gateway p50 ${g50.toFixed(3)} / p99 ${g99.toFixed(3)} ms; ratio p50 ${r50.toFixed(2)}x, p99 ${r99.toFixed(2)}x (median of per-round ratios; target <= 1.5x)`,
    );
  }
  console.log(
    `max throughput: gateway ${(100 * perRound((r) => acc.gateway.max![r]! / acc['bare proxy'].max![r]!)).toFixed(1)} % of the bare proxy (median of per-round ratios; target >= 60 %)`,
  );
  console.log(
    `main-thread CPU per request at max throughput: the bare proxy's is ${(100 * perRound((r) => acc['bare proxy'].cpu![r]! / acc.gateway.cpu![r]!)).toFixed(1)} % of the gateway's (median of per-round ratios)`,
  );

  const n = 200;
  const tDirect = await ttfb(slowStream.url.replace(/\/v1$/, ''), '/v1/chat/completions', 'bench-stream', n);
  const tBare = await ttfb(bareStream.url, '/v1/chat/completions', 'bench-stream', n);
  const tGw = await ttfb(gateway.url, '/v1/chat/completions', 'bench-stream', n);
  console.log(`\nStreaming time to first chunk (${n} sequential streams), p50 / p99 ms:`);
  console.log(
    table([
      { path: 'direct', p50: percentile(tDirect, 50), p99: percentile(tDirect, 99) },
      { path: 'bare proxy', p50: percentile(tBare, 50), p99: percentile(tBare, 99) },
      { path: 'gateway', p50: percentile(tGw, 50), p99: percentile(tGw, 99) },
    ]),
  );
  console.log(`gateway - bare proxy, p50: ${(percentile(tGw, 50) - percentile(tBare, 50)).toFixed(3)} ms (target <= 1 ms)`);

  // Many concurrent open streams: each upstream stream lasts ~3 s (3 chunks, 1 s apart).
  const agent = new Agent({ connections: streams + 10 });
  const rssBefore = rssMb(gateway.child.pid!);
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(gateway.child.pid!))), 100);
  let completed = 0;
  let firstChunks = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      const res = await request(gateway.url + '/v1/chat/completions', {
        method: 'POST',
        headers,
        dispatcher: agent,
        body: JSON.stringify({ model: 'bench-stream', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      let first = true;
      for await (const _ of res.body)
        if (first) {
          first = false;
          firstChunks++;
        }
      if (res.statusCode === 200) completed++;
    }),
  );
  clearInterval(sampler);
  await agent.close();
  console.log(
    `\n${streams} concurrent streams through the gateway: ${completed} completed (${firstChunks} got a first chunk), RSS ${rssBefore.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB (target < 250 MB)`,
  );
} finally {
  for (const p of [gateway, bare, bareStream, upstream, slowStream]) p.child.kill('SIGTERM');
}
