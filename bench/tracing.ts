// What tracing costs: the same keyed, metered route (/v1/chat/completions, non-streaming,
// against a fast loopback upstream) on a gateway without an OTLP endpoint and on one
// exporting every span (sampler always on) to a collector that accepts and discards them.
// Paired rounds as in bench/gateway-core.ts (medians of per-round differences).
// --sampler always_off keeps the hooks, context and traceparent but records and exports nothing.
//   npx tsx bench/tracing.ts [--rounds 12] [--seconds 2] [--rate 1000] [--sampler always_on]
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, median, openLoop, table } from './lib/load.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '2' },
    rate: { type: 'string', default: '1000' },
    sampler: { type: 'string', default: 'always_on' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const rate = Number(values.rate);

// The sink collector: reads each export, counts its bytes, answers 200.
let exportedBytes = 0;
let exports = 0;
const sink = createServer((req, res) => {
  req.on('data', (c: Buffer) => (exportedBytes += c.length));
  req.on('end', () => {
    exports++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const env = { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent' };
const off = await startBundled('bench/gateway-server.ts', env);
const on = await startBundled('bench/gateway-server.ts', { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER: values.sampler! });
const spec = chatSpec(fx.key);

try {
  type Side = { p50: number[]; p99: number[]; rps: number[]; errors: number };
  const res: Record<'on' | 'off', Side> = { on: { p50: [], p99: [], rps: [], errors: 0 }, off: { p50: [], p99: [], rps: [], errors: 0 } };
  for (const g of [off, on]) {
    await maxThroughput(g.url, spec, 2);
    await openLoop(g.url, spec, rate, 1, 0);
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
    for (const name of order) {
      const lat = await openLoop((name === 'on' ? on : off).url, spec, rate, seconds);
      res[name].p50.push(lat.p50);
      res[name].p99.push(lat.p99);
      res[name].errors += lat.errors;
    }
    for (const name of order) {
      const max = await maxThroughput((name === 'on' ? on : off).url, spec, seconds);
      res[name].rps.push(max.rps);
      res[name].errors += max.errors + max.non2xx;
    }
  }
  const m = (n: 'on' | 'off', k: 'p50' | 'p99' | 'rps') => median(res[n][k]);
  const paired = (k: 'p50' | 'p99') => median(res.on[k].map((v, i) => v - res.off[k][i]!));
  const kept = median(res.on.rps.map((v, i) => v / res.off.rps[i]!));
  console.log(
    `\nTracing (${values.sampler}), POST /v1/chat/completions (non-streaming), ${rounds} paired rounds x ${seconds}s, open loop at ${rate} req/s; medians\n`,
  );
  console.log(
    table([
      {
        tracing: 'off (no endpoint)',
        'p50 ms': m('off', 'p50'),
        'p99 ms': m('off', 'p99'),
        'max req/s': Math.round(m('off', 'rps')),
        'RSS MB': Math.round(rssMb(off.child.pid!)),
        errors: res.off.errors,
      },
      {
        tracing: `on (sampler ${values.sampler})`,
        'p50 ms': m('on', 'p50'),
        'p99 ms': m('on', 'p99'),
        'max req/s': Math.round(m('on', 'rps')),
        'RSS MB': Math.round(rssMb(on.child.pid!)),
        errors: res.on.errors,
      },
    ]),
  );
  console.log(
    `\nadded by tracing (median of per-round differences): p50 ${paired('p50').toFixed(3)} ms, p99 ${paired('p99').toFixed(3)} ms, max throughput kept ${(100 * kept).toFixed(1)} %`,
  );
  console.log(`collector received ${exports} exports, ${(exportedBytes / 1e6).toFixed(1)} MB`);
} finally {
  for (const p of [on, off, upstream]) p.child.kill('SIGTERM');
  sink.close();
}
