// Load on the three request paths, each against its own fast loopback upstream, upstream
// alone vs through the real gateway (auth, rate limit, metering on; SQLite):
//   LLM  POST /v1/chat/completions     (scripted OpenAI chat upstream)
//   TTS  POST /v1/audio/speech, pcm    (scripted OpenAI speech upstream, 0.5 s of 24 kHz PCM)
//   STT  POST /v1/audio/transcriptions (1 s WAV; scripted OpenAI transcription upstream)
// For each: open-loop latency at a fixed rate (p50/p99, and what the gateway adds), closed-loop
// maximum throughput with autocannon, error rate, and the gateway's RSS.
//   npx tsx bench/load.ts [--seconds 10] [--rate 200] [--connections 32]
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { openLoop, table, type RequestSpec } from './lib/load.ts';
import { rssMb } from './lib/processes.ts';
import { checkPath, startThreePaths } from './lib/three-paths.ts';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '10' }, rate: { type: 'string', default: '200' }, connections: { type: 'string', default: '32' } },
});
const seconds = Number(values.seconds);
const rate = Number(values.rate);
const connections = Number(values.connections);

const setup = await startThreePaths();
const { gateway } = setup;

async function closedLoop(o: string, spec: RequestSpec) {
  const r = await autocannon({ url: o + spec.path, method: spec.method ?? 'GET', headers: spec.headers, body: spec.body, connections, duration: seconds });
  const total = r.requests.total + r.errors;
  return { rps: r.requests.average, errorRate: total ? (r.errors + r.non2xx) / total : 0 };
}

const rows: Record<string, string | number>[] = [];
const rssStart = rssMb(gateway.child.pid!);
let rssPeak = rssStart;
const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMb(gateway.child.pid!))), 200);
try {
  for (const p of [setup.paths.llm, setup.paths.tts, setup.paths.stt]) {
    await checkPath(p.name, p.direct);
    await checkPath(p.name, p.gateway);
    await closedLoop(p.gateway.origin, p.gateway.spec); // warm-up (JIT, pools)
    const d = await openLoop(p.direct.origin, p.direct.spec, rate, seconds);
    const g = await openLoop(p.gateway.origin, p.gateway.spec, rate, seconds);
    const dMax = await closedLoop(p.direct.origin, p.direct.spec);
    const gMax = await closedLoop(p.gateway.origin, p.gateway.spec);
    rows.push({
      path: p.name,
      [`upstream p50/p99 ms @${rate}/s`]: `${d.p50.toFixed(2)} / ${d.p99.toFixed(2)}`,
      [`gateway p50/p99 ms @${rate}/s`]: `${g.p50.toFixed(2)} / ${g.p99.toFixed(2)}`,
      'added p50/p99 ms': `${(g.p50 - d.p50).toFixed(2)} / ${(g.p99 - d.p99).toFixed(2)}`,
      'upstream max req/s': Math.round(dMax.rps),
      'gateway max req/s': Math.round(gMax.rps),
      'gateway errors (open / max)': `${((100 * g.errors) / Math.max(1, g.sent)).toFixed(2)} % / ${(100 * gMax.errorRate).toFixed(2)} %`,
      'RSS MB after': Math.round(rssMb(gateway.child.pid!)),
    });
    console.error(`done: ${p.name}`);
  }
} finally {
  clearInterval(sampler);
  setup.stop();
}
console.log(`\nLoad: ${seconds} s per measurement, open loop at ${rate} req/s, closed loop with ${connections} connections (autocannon)\n`);
console.log(table(rows));
console.log(`\ngateway RSS: ${rssStart.toFixed(0)} MB at start, peak ${rssPeak.toFixed(0)} MB`);
