// The gateway for the benchmarks: the real runtime, optionally with the core replaced by the
// pass-through core (no auth, no rate limit, no metering) to measure what the core costs.
// Bench-only: the product has no switch that turns the core off.
import { loadConfig } from '../server/config/env.ts';
import { createGatewayRuntime } from '../gateway/runtime.ts';

// Logging as `svc gateway` logs (LOG_LEVEL, info by default: an access-log line per request).
// BENCH_CORE=off: every request is admitted as the fixture's key (BENCH_KEY_ID, BENCH_ORG_ID).
const passThrough = process.env.BENCH_CORE === 'off';
const { BENCH_KEY_ID: keyId, BENCH_ORG_ID: orgId } = process.env;
if (passThrough && (!keyId || !orgId)) throw new Error('BENCH_CORE=off needs BENCH_KEY_ID and BENCH_ORG_ID (bench/lib/bench-fixture.ts returns them)');
const runtime = await createGatewayRuntime(loadConfig(), {
  passThroughCore: passThrough ? { keyId: keyId!, orgId: orgId! } : undefined,
});
const url = await runtime.app.listen({ host: '127.0.0.1', port: 0 });
// On stderr: stdout carries the logs (bench/lib/processes.ts sends them to a file).
console.error(`listening ${url}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void runtime.close().finally(() => process.exit(0)));
}
