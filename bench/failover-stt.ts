// What an engine failing mid-session costs a streaming-transcription client (docs/failover.md,
// "Streaming STT"): the real gateway in this process (test/support/gateway-harness.ts, a fresh
// SQLite database), one model served by a scripted Deepgram then a scripted Cartesia (and one the
// other way round: test/support/scripted-*.ts, real WebSocket servers), and a client on
// GET /stt/websocket (turn_source=gateway, failover_events=true) that sends 6.8 s of voiced
// bursts (six words in two turns, test/support/speech-bursts.ts) as fast as the socket takes
// them, then {"type":"close"}. Per run: the time from the close to the last final transcript,
// and the words lost or duplicated (each final word matched to the burst it falls in). Faults in
// the first engine (test/support/socket-faults.ts): `reset` (connection dropped) and `stall`
// (socket kept, nothing sent: a finalize left unanswered is taken over after the hedge delay,
// SVC_STT_FINALIZE_HEDGE_MS, --hedge-ms here, the gateway's 200 by default; else found after
// SVC_STT_STALL_SECONDS, --stall-seconds here, 0.5 by default) at the start (its first message),
// the middle (right after its first final) and the end (in place of its last final). "extra" is
// the run's time minus the no-fault median of the same model; "switch" is the time from the fault
// (the message the engine did not send) to the client's engine.switched: how long the gateway
// took to notice and move to the next engine (for a stall, about the hedge delay, or the
// allowance with --hedge-ms 0).
//
//   npx tsx bench/failover-stt.ts [--runs 10] [--stall-seconds 0.5] [--hedge-ms 200] [--faults reset,stall]
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../test/support/gateway-harness.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../test/support/scripted-cartesia.ts';
import { startScriptedDeepgram, type ScriptedDeepgram } from '../test/support/scripted-deepgram.ts';
import type { SocketFault } from '../test/support/socket-faults.ts';
import { speechBursts } from '../test/support/speech-bursts.ts';
import { median, percentile, table } from './lib/load.ts';

const RATE = 16000;
const BURSTS: [number, number][] = [
  [0.3, 0.6],
  [0.9, 1.2],
  [1.5, 1.8],
  [3.6, 3.9],
  [4.2, 4.5],
  [4.8, 5.1],
];
const pcm = speechBursts(RATE, BURSTS, 6.8);
const AUDIO = Buffer.alloc(pcm.length * 2);
pcm.forEach((x, i) => AUDIO.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(x * 32767))), i * 2));

export interface FailoverSttRow {
  model: string;
  fault: string;
  place: string;
  runs: number;
  'final p50 ms': number;
  'final p95 ms': number;
  'extra p50 ms': number;
  'extra p95 ms': number;
  'switch p50 ms': number | string;
  'words lost': number;
  'words duplicated': number;
  errors: number;
}

interface Run {
  finalMs: number;
  /** When the client got engine.switched (performance.now()), if it did. */
  switchedAt?: number;
  lost: number;
  duplicated: number;
  error: boolean;
}

/** One session: streams the bursts, closes, and times the last final from the close. */
async function runSession(h: GatewayHarness, model: string): Promise<Run> {
  const url = `${h.url.replace(/^http/, 'ws')}/stt/websocket?model=${model}&sample_rate=${RATE}&turn_source=gateway&failover_events=true&api_key=${h.key}`;
  const ws = new WebSocket(url);
  const words: { start: number; end: number }[] = [];
  let error = false;

  let lastFinalAt = 0;
  let switchedAt: number | undefined;
  const done = new Promise<void>((resolve) => ws.on('close', () => resolve()));
  ws.on('message', (data) => {
    const e = JSON.parse(data.toString()) as { type: string; is_final?: boolean; words?: { start: number; end: number }[] };
    if (e.type === 'transcript' && e.is_final) {
      lastFinalAt = performance.now();
      words.push(...(e.words ?? []));
    }
    if (e.type === 'engine.switched') switchedAt = performance.now();
    if (e.type === 'error') error = true;
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  for (let at = 0; at < AUDIO.length; at += 3200) ws.send(AUDIO.subarray(at, Math.min(AUDIO.length, at + 3200)));
  const closedAt = performance.now();
  ws.send(JSON.stringify({ type: 'close' }));
  await done;
  const hits = BURSTS.map(([s, e]) => words.filter((w) => w.start < e + 0.15 && w.end > s - 0.15).length);
  return {
    finalMs: lastFinalAt - closedAt,
    switchedAt,
    lost: hits.filter((n) => n === 0).length,
    duplicated: hits.reduce((sum, n) => sum + Math.max(0, n - 1), 0) + (words.length - hits.reduce((a, b) => a + b, 0)),
    error,
  };
}

/**
 * Runs every case of `faults` (and the no-fault one) `runs` times, stalls found after
 * `stallSeconds`, finalizes taken over after `hedgeMs` (undefined: the gateway's default); returns one row per case.
 */
export async function benchSttFailover(
  runs: number,
  stallSeconds: number,
  faults: readonly string[] = ['reset', 'stall'],
  hedgeMs?: number,
): Promise<FailoverSttRow[]> {
  process.env.BENCH_FO_DG_KEY = 'dg_bench_failover';
  process.env.BENCH_FO_CA_KEY = 'sk_car_bench_failover';
  const [dg, ca]: [ScriptedDeepgram, ScriptedCartesia] = await Promise.all([
    startScriptedDeepgram({ apiKey: 'dg_bench_failover' }),
    startScriptedCartesia({ apiKey: 'sk_car_bench_failover' }),
  ]);
  const h = await startGateway({
    creditsMicros: 10_000_000_000n,
    env: {
      SVC_HEALTH_CHECK_SECONDS: '3600',
      SVC_STT_STALL_SECONDS: String(stallSeconds),
      ...(hedgeMs !== undefined && { SVC_STT_FINALIZE_HEDGE_MS: String(hedgeMs) }),
    },
  });
  const rows: FailoverSttRow[] = [];
  try {
    const prisma = h.testDb.db.prisma;
    const deepgram = (weight: number) => ({ url: dg.url, protocol: 'deepgram', upstreamModel: 'nova-3', apiKeyEnv: 'BENCH_FO_DG_KEY', weight });
    const cartesia = (weight: number) => ({ url: ca.url, protocol: 'cartesia', upstreamModel: 'ink-whisper', apiKeyEnv: 'BENCH_FO_CA_KEY', weight });
    const models = [
      { id: 'dg-then-ca', first: dg as { sttFault?: SocketFault }, upstreams: [deepgram(1_000_000), cartesia(1)] },
      { id: 'ca-then-dg', first: ca as { sttFault?: SocketFault }, upstreams: [cartesia(1_000_000), deepgram(1)] },
    ];
    for (const m of models) {
      for (const upstream of m.upstreams) await upsertModel(prisma, checkProtocol, { id: m.id, modality: 'stt', prices: { picoPerSecond: 1n }, upstream });
    }
    await h.runtime.ctx.registry.refresh();
    const { ctx } = h.runtime;
    const cases: { fault: string; place: string; socketFault?: SocketFault }[] = [{ fault: 'none', place: '-' }];
    for (const kind of (['reset', 'stall'] as const).filter((k) => faults.includes(k))) {
      cases.push({ fault: kind, place: 'start', socketFault: { kind, afterFinals: 0 } });
      cases.push({ fault: kind, place: 'middle', socketFault: { kind, afterFinals: 1 } });
      cases.push({ fault: kind, place: 'end', socketFault: { kind, afterFinals: 1, onFinal: true } });
    }
    for (const m of models) {
      // Warm-up (the turn detector's model, the engines' first sockets): not counted.
      for (let i = 0; i < 3; i++) await runSession(h, m.id);
      let baseline = NaN;
      for (const c of cases) {
        const results: Run[] = [];
        const switches: number[] = [];
        for (let i = 0; i < runs; i++) {
          for (const u of ctx.registry.resolve(m.id, 'stt', null).upstreams) ctx.health.record(u, { ok: true });
          let shownAt: number | undefined;
          m.first.sttFault = c.socketFault && { ...c.socketFault, shown: () => (shownAt = performance.now()) };
          const r = await runSession(h, m.id);
          if (shownAt !== undefined && r.switchedAt !== undefined) switches.push(r.switchedAt - shownAt);
          results.push(r);
        }
        m.first.sttFault = undefined;
        const times = results.map((r) => r.finalMs).sort((a, b) => a - b);
        if (c.fault === 'none') baseline = median(times);
        rows.push({
          model: m.id,
          fault: c.fault,
          place: c.place,
          runs,
          'final p50 ms': Math.round(percentile(times, 50)),
          'final p95 ms': Math.round(percentile(times, 95)),
          'extra p50 ms': Math.round(percentile(times, 50) - baseline),
          'extra p95 ms': Math.round(percentile(times, 95) - baseline),
          'switch p50 ms': switches.length ? Math.round(median(switches.sort((a, b) => a - b))) : '—',
          'words lost': results.reduce((s, r) => s + r.lost, 0),
          'words duplicated': results.reduce((s, r) => s + r.duplicated, 0),
          errors: results.filter((r) => r.error).length,
        });
      }
    }
  } finally {
    await h.close();
    await Promise.allSettled([dg.close(), ca.close()]);
  }
  return rows;
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string', default: '10' },
      'stall-seconds': { type: 'string', default: '0.5' },
      faults: { type: 'string', default: 'reset,stall' },
      'hedge-ms': { type: 'string' },
    },
    strict: false,
  });
  const runs = Number(values.runs);
  const stallSeconds = Number(values['stall-seconds']);
  const hedgeMs = values['hedge-ms'] === undefined ? undefined : Number(values['hedge-ms']);
  const rows = await benchSttFailover(runs, stallSeconds, String(values.faults).split(','), hedgeMs);
  const hedge = hedgeMs === undefined ? 'default' : String(hedgeMs);
  console.log(`Streaming STT failover: ${runs} runs each, SVC_STT_STALL_SECONDS=${stallSeconds}, SVC_STT_FINALIZE_HEDGE_MS=${hedge}, ms`);
  console.log(table(rows as unknown as Record<string, string | number>[]));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run(process.argv.slice(2));
