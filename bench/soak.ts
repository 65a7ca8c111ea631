// Soak: mixed traffic through the real gateway for N minutes (LLM chat, LLM streams, TTS,
// STT batch, each against a fast loopback upstream), evenly paced at a fixed total rate. The
// gateway's RSS and V8 heap (from its /metrics) are sampled every 10 s; the result is the
// least-squares slope of each over time (whole run and second half, after warm-up), which
// should be flat, and the error count. RSS can step up under a burst (the allocator keeps
// freed pages); a leak shows as a heap that keeps growing.
//   npx tsx bench/soak.ts [--minutes 10] [--rate 100] [--only llm|stream|tts|stt]
import { parseArgs } from 'node:util';
import { createServer } from 'node:net';
import { Pool } from 'undici';
import { table } from './lib/load.ts';
import { rssMb } from './lib/processes.ts';
import { checkPath, startThreePaths, type BenchPath } from './lib/three-paths.ts';

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '10' }, rate: { type: 'string', default: '100' }, only: { type: 'string' } } });
const minutes = Number(values.minutes);
const rate = Number(values.rate);
const SAMPLE_MS = 10_000;
const MAX_IN_FLIGHT = 256;

const metricsPort = await new Promise<number>((resolve) => {
  const srv = createServer().listen(0, '127.0.0.1', () => {
    const { port } = srv.address() as { port: number };
    srv.close(() => resolve(port));
  });
});
const setup = await startThreePaths({ metricsPort });

/** The gateway's V8 heap in use and its external memory (Buffers, wasm), MB, from /metrics. */
async function memoryMb(): Promise<{ heap: number; external: number }> {
  const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
  const mb = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 1024 / 1024;
  return { heap: mb('nodejs_heap_size_used_bytes'), external: mb('nodejs_external_memory_bytes') };
}
const { gateway, paths } = setup;
// The mix, per 10 requests: 4 chat, 2 chat streams, 2 TTS, 2 STT.
const only = { llm: paths.llm, stream: paths.llmStream, tts: paths.tts, stt: paths.stt }[values.only ?? ''];
const mix: BenchPath[] = only
  ? [only]
  : [paths.llm, paths.llm, paths.llm, paths.llm, paths.llmStream, paths.llmStream, paths.tts, paths.tts, paths.stt, paths.stt];

/** Least-squares slope of y over x. */
function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const num = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  const den = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  return num / den;
}

const counts = new Map<string, { ok: number; errors: number }>();
const samples: { minute: number; rss: number; heap: number; external: number }[] = [];
try {
  for (const p of Object.values(paths)) await checkPath(p.name, p.gateway);
  const pool = new Pool(gateway.url, { connections: 128, keepAliveTimeout: 30_000 });
  const start = performance.now();
  const end = start + minutes * 60_000;
  const sample = async () => {
    const s = {
      minute: (performance.now() - start) / 60_000,
      rss: rssMb(gateway.child.pid!),
      ...(await memoryMb().catch(() => ({ heap: NaN, external: NaN }))),
    };
    samples.push(s);
    console.error(`${s.minute.toFixed(1)} min: RSS ${s.rss.toFixed(1)} MB, heap used ${s.heap.toFixed(1)} MB, external ${s.external.toFixed(1)} MB`);
  };
  await sample();
  const sampler = setInterval(() => void sample(), SAMPLE_MS);
  let inFlight = 0;
  let skipped = 0;
  const running = new Set<Promise<void>>();
  for (let i = 0; ; i++) {
    const due = start + (i * 1000) / rate;
    if (due >= end) break;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    if (inFlight >= MAX_IN_FLIGHT) {
      skipped++;
      continue;
    }
    const p = mix[i % mix.length]!;
    const c = counts.get(p.name) ?? { ok: 0, errors: 0 };
    counts.set(p.name, c);
    inFlight++;
    const { spec } = p.gateway;
    const work = pool
      .request({ path: spec.path, method: spec.method ?? 'GET', headers: spec.headers, body: spec.body })
      .then(async (res) => {
        await res.body.dump({ limit: 4 * 1024 * 1024 });
        if (res.statusCode === 200) c.ok++;
        else c.errors++;
      })
      .catch(() => {
        c.errors++;
      })
      .finally(() => {
        inFlight--;
        running.delete(work);
      });
    running.add(work);
  }
  await Promise.all(running);
  clearInterval(sampler);
  await sample();
  await pool.close();

  const rss = samples.map((s) => ({ x: s.minute, y: s.rss }));
  const heap = samples.map((s) => ({ x: s.minute, y: s.heap }));
  const secondHalf = (points: { x: number; y: number }[]) => points.filter((p) => p.x >= minutes / 2);
  console.log(
    `\nSoak: ${minutes} min of ${only ? only.name : 'mixed'} traffic at ${rate} req/s through the gateway (${skipped} sends skipped at ${MAX_IN_FLIGHT} in flight)\n`,
  );
  console.log(table([...counts].map(([path, c]) => ({ path, ok: c.ok, errors: c.errors }))));
  console.log(`\nRSS samples (MB, every ${SAMPLE_MS / 1000} s): ${samples.map((s) => s.rss.toFixed(0)).join(' ')}`);
  console.log(`heap used samples (MB): ${samples.map((s) => s.heap.toFixed(0)).join(' ')}`);
  console.log(`external samples (MB): ${samples.map((s) => s.external.toFixed(0)).join(' ')}`);
  console.log(
    `RSS start ${samples[0]!.rss.toFixed(1)} MB, end ${samples.at(-1)!.rss.toFixed(1)} MB, max ${Math.max(...samples.map((s) => s.rss)).toFixed(1)} MB`,
  );
  console.log(`RSS slope: ${slope(rss).toFixed(2)} MB/min over the whole run, ${slope(secondHalf(rss)).toFixed(2)} MB/min over the second half`);
  console.log(`heap used slope: ${slope(heap).toFixed(2)} MB/min over the whole run, ${slope(secondHalf(heap)).toFixed(2)} MB/min over the second half`);
} finally {
  setup.stop();
}
