// Gateway core benchmark: the same keyed, metered route (/v1/chat/completions against a fast
// loopback upstream) with the core on (auth + rate limit + credit check + debit) and with
// the pass-through core, in one run. Rounds are short and paired (off and on back to back,
// the order alternating), and the figures are medians of the per-round differences: load
// from other processes on a shared machine drifts over seconds and hits both halves of a
// pair alike, so it cancels out of a difference where it would not out of two medians.
//   npx tsx bench/gateway-core.ts [--rounds 12] [--seconds 2] [--rate 1000]
import { parseArgs } from 'node:util';
import { benchFixture, chatSpec } from './lib/bench-fixture.ts';
import { maxThroughput, median, openLoop, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '12' }, seconds: { type: 'string', default: '2' }, rate: { type: 'string', default: '1000' } },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const rate = Number(values.rate);

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const env = { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', BENCH_KEY_ID: fx.keyId, BENCH_ORG_ID: fx.orgId };
const on = await startBundled('bench/gateway-server.ts', { ...env, BENCH_CORE: 'on' });
const off = await startBundled('bench/gateway-server.ts', { ...env, BENCH_CORE: 'off' });
const spec = chatSpec(fx.key);

try {
  type Side = { p50: number[]; p99: number[]; rps: number[]; errors: number };
  const res: Record<'on' | 'off', Side> = { on: { p50: [], p99: [], rps: [], errors: 0 }, off: { p50: [], p99: [], rps: [], errors: 0 } };
  // Warm both (JIT, connection pools, SQLite page cache).
  for (const g of [off, on]) {
    await maxThroughput(g.url, spec, 2);
    await openLoop(g.url, spec, rate, 1, 0);
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
    for (const name of order) {
      const g = name === 'on' ? on : off;
      const lat = await openLoop(g.url, spec, rate, seconds);
      res[name].p50.push(lat.p50);
      res[name].p99.push(lat.p99);
      res[name].errors += lat.errors;
    }
    for (const name of order) {
      const g = name === 'on' ? on : off;
      const max = await maxThroughput(g.url, spec, seconds);
      res[name].rps.push(max.rps);
      res[name].errors += max.errors + max.non2xx;
    }
  }
  const m = (n: 'on' | 'off', k: 'p50' | 'p99' | 'rps') => median(res[n][k]);
  const paired = (k: 'p50' | 'p99') => median(res.on[k].map((v, i) => v - res.off[k][i]!));
  const kept = median(res.on.rps.map((v, i) => v / res.off.rps[i]!));
  console.log(`\nGateway core, POST /v1/chat/completions (non-streaming), ${rounds} paired rounds x ${seconds}s, open loop at ${rate} req/s; medians\n`);
  console.log(
    table([
      { core: 'off (pass-through)', 'p50 ms': m('off', 'p50'), 'p99 ms': m('off', 'p99'), 'max req/s': Math.round(m('off', 'rps')), errors: res.off.errors },
      { core: 'on (auth+limit+metering)', 'p50 ms': m('on', 'p50'), 'p99 ms': m('on', 'p99'), 'max req/s': Math.round(m('on', 'rps')), errors: res.on.errors },
    ]),
  );
  console.log(
    `\nadded by the core (median of per-round differences): p50 ${paired('p50').toFixed(3)} ms (target <= 0.2), p99 ${paired('p99').toFixed(3)} ms (target <= 1), max throughput kept ${(100 * kept).toFixed(1)} % (target >= 70 %)`,
  );
} finally {
  for (const p of [on, off, upstream]) p.child.kill('SIGTERM');
}
