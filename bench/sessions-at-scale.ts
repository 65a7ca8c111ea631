// Live STT sessions at scale (issue #31): N concurrent GET /stt/websocket sessions through the
// bundled gateway (bench/gateway-server.ts, run as `svc gateway` runs, fresh SQLite fixture: key
// auth, reservations and per-interval debits on), then the same N through a bare Node `ws` relay
// (bench/bare-ws-relay.ts: pipes frames, nothing else) to the same engine, in the same run.
// The engine is the scripted Deepgram peer (test/support/scripted-deepgram.ts) in a process of
// its own (bench/lib/upstream-peers.ts); it sends an interim Results when a voiced burst ends.
//
// Each session streams 16 kHz pcm_s16le in real time, a 20 ms frame every 20 ms: a cycle of
// BURST_FRAMES voiced frames (a tone) then SILENT_FRAMES of silence, looped; session k starts
// k/N of a frame late (sessions arrive at random phases in production, not in lock-step).
// Latency: from sending the first silent frame of a cycle (the one that makes the engine speak)
// to the first interim transcript after it (gateway: `transcript` is_final false; relay: the
// engine's own `Results`). The first WARMUP_CYCLES cycles of each session are streamed before
// the window (the gateway opens each engine at its session's first audio) and not counted.
// The paths run one after the other, after one unmeasured pass through the relay (warming up the
// engine's process and the clients). Reported per N and path: p50 / p99 of that latency (the
// difference gateway minus relay is what the gateway adds over a bare relay), CPU ms per
// session-second of the process (utime + stime from /proc/<pid>/stat over the streaming window)
// and of its main thread alone, its read and write system calls and the messages the client
// received per session-second, RSS added per session (during the window minus before opening),
// event-loop delay p99 / max over the window (the gateway: its /metrics `nodejs_eventloop_lag_*`,
// prom-client's monitorEventLoopDelay, reset at each scrape; the relay: its GET /stats), the main
// thread's wait for a CPU (ms per second: the machine's share of a stall; bench/lib/scale.ts),
// transcripts missing and sessions closed early.
// --profile DIR: each process (with --base, the base gateway too) is profiled through its
// inspector over each streaming window (bench/lib/cpu-profile.ts); the profiles are written to DIR
// and the gateway's self time is printed per package and per function, in microseconds per
// session-second, next to the relay's (the profiler's own cost is in that run's figures: measure
// and profile in separate runs).
//
// --base DIR: the gateway of another checkout too, on a copy of the fixture database, measured in
// the same run (as bench/tts-at-scale.ts --base).
//
// --rounds K: each N is measured K times, the paths taking turns (round r starts at the r-th
// path, so none is always first); each figure shown is the median over the rounds, and each
// gateway-relay difference or ratio the median of the rounds' own (this machine's noise moves
// both paths of a round together, and one round's relay can cost half again another's).
//
//   npx tsx bench/sessions-at-scale.ts [--sessions 50,150,300] [--seconds 20] [--rounds 1] [--profile DIR] [--top 30] [--base DIR]
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import type { Peers } from './lib/upstream-peers.ts';
import { INSPECT_ENV, profileTables, saveProfile, type CpuProfile } from './lib/cpu-profile.ts';
import { fixed, gatewayLoopDelay, loadAverage, measureWindow, relayLoopDelay, sleep } from './lib/scale.ts';
import { copyScaleDatabase, METRICS_TOKEN, scaleDatabase, scaleGatewayEnv } from './lib/scale-fixture.ts';
import { median, percentile, table } from './lib/load.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '50,150,300' },
    seconds: { type: 'string', default: '20' },
    profile: { type: 'string' },
    top: { type: 'string', default: '30' },
    base: { type: 'string' },
    rounds: { type: 'string', default: '1' },
  },
});
const rounds = Number(values.rounds);
const sessionCounts = values.sessions.split(',').map(Number);
const streamSeconds = Number(values.seconds);

const RATE = 16000;
const FRAME_MS = 20;
const FRAME_SAMPLES = (RATE * FRAME_MS) / 1000;
const BURST_FRAMES = 10;
const SILENT_FRAMES = 20;
const CYCLE = BURST_FRAMES + SILENT_FRAMES;
const WARMUP_CYCLES = 2;
const WARMUP_SECONDS = (WARMUP_CYCLES * CYCLE * FRAME_MS) / 1000;
const OPEN_BATCH = 25;
const MODEL = 'bench-deepgram-stt';
const KEY_ENV = 'BENCH_DEEPGRAM_KEY';

const voiced = Buffer.alloc(FRAME_SAMPLES * 2);
for (let i = 0; i < FRAME_SAMPLES; i++) voiced.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / RATE)), i * 2);
const silent = Buffer.alloc(FRAME_SAMPLES * 2);

// ---------- processes ----------
const peersProc = await startTs('bench/lib/upstream-peers.ts');
const controlUrl = peersProc.url;
const peers = (await (await fetch(`${controlUrl}/peers`)).json()) as Peers;

const { dataDir, key } = await scaleDatabase('svc-bench-scale-', async (db) => {
  await upsertModel(db.prisma, checkProtocol, {
    id: MODEL,
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: peers.deepgram.url, protocol: 'deepgram', upstreamModel: 'nova-3', apiKeyEnv: KEY_ENV },
  });
});

const inspect = values.profile ? INSPECT_ENV : {};
const gateway = await startBundled(
  'bench/gateway-server.ts',
  scaleGatewayEnv(dataDir, {
    [KEY_ENV]: peers.deepgram.key,
    ...inspect,
  }),
);
const baseDir = values.base ? copyScaleDatabase(dataDir, 'svc-bench-scale-base-') : null;
const base = baseDir
  ? await startBundled(
      'bench/gateway-server.ts',
      scaleGatewayEnv(baseDir, {
        [KEY_ENV]: peers.deepgram.key,
        ...inspect,
      }),
      'gateway',
      values.base,
    )
  : null;
// What gateway/upstreams/protocols/deepgram.ts asks the engine for (engine turns on).
const engineQuery = new URLSearchParams({
  model: 'nova-3',
  punctuate: 'true',
  smart_format: 'true',
  encoding: 'linear16',
  sample_rate: String(RATE),
  channels: '1',
  interim_results: 'true',
  vad_events: 'true',
  endpointing: '300',
  utterance_end_ms: '1000',
});
const relay = await startBundled(
  'bench/bare-ws-relay.ts',
  { BARE_RELAY_TARGET: `${peers.deepgram.url}/v1/listen`, BARE_RELAY_AUTH: `Token ${peers.deepgram.key}`, ...inspect },
  'node',
);
const stop = () => {
  for (const p of [gateway, base, relay, peersProc]) p?.child.kill('SIGTERM');
  for (const dir of [dataDir, baseDir]) if (dir) rmSync(dir, { recursive: true, force: true });
};
process.once('exit', stop);

// ---------- sessions ----------
type Path = 'gateway' | 'base' | 'relay';
const gatewayOf = (path: 'gateway' | 'base') => (path === 'base' ? base! : gateway);
interface Live {
  ws: WebSocket;
  /** When the trigger frame of the current cycle was sent, until its transcript comes. */
  pendingSince: number | null;
  cycle: number;
  latencies: number[];
  missed: number;
  closedEarly: boolean;
  /** Messages received from the gateway or the relay. */
  received: number;
}

function open(path: Path): Promise<Live> {
  const ws =
    path === 'relay'
      ? new WebSocket(`${relay.url.replace(/^http/, 'ws')}/v1/listen?${engineQuery}`)
      : new WebSocket(`${gatewayOf(path).url.replace(/^http/, 'ws')}/stt/websocket?model=${MODEL}&sample_rate=${RATE}&encoding=pcm_s16le`, {
          headers: { authorization: `Bearer ${key}` },
        });
  const s: Live = { ws, pendingSince: null, cycle: 0, latencies: [], missed: 0, closedEarly: false, received: 0 };
  let streaming = false;
  return new Promise((resolve, reject) => {
    ws.on('message', (data, isBinary) => {
      s.received++;
      if (isBinary) return;
      const m = JSON.parse(data.toString()) as { type: string; is_final?: boolean; channel?: { alternatives?: { transcript?: string }[] } };
      if (!streaming) {
        if (path !== 'relay' && m.type === 'session.started') {
          streaming = true;
          resolve(s);
        }
        if (m.type === 'error') reject(new Error(`session refused: ${JSON.stringify(m)}`));
        return;
      }
      const interim =
        path === 'relay'
          ? m.type === 'Results' && m.is_final === false && Boolean(m.channel?.alternatives?.[0]?.transcript)
          : m.type === 'transcript' && m.is_final === false;
      if (!interim || s.pendingSince === null) return;
      if (s.cycle > WARMUP_CYCLES) s.latencies.push(performance.now() - s.pendingSince);
      s.pendingSince = null;
    });
    ws.on('open', () => {
      if (path !== 'relay') return;
      streaming = true;
      resolve(s);
    });
    ws.on('close', () => (s.closedEarly = true));
    ws.on('error', reject);
  });
}

/** Streams every session in real time for `seconds`, session k phase-shifted by k/N of a frame. */
async function stream(sessions: Live[], seconds: number): Promise<void> {
  const frames = Math.floor((seconds * 1000) / FRAME_MS);
  const t0 = performance.now() + 50;
  await Promise.all(
    sessions.map(async (s, k) => {
      const start = t0 + (k / sessions.length) * FRAME_MS;
      for (let i = 0; i < frames; i++) {
        await sleep(start + i * FRAME_MS - performance.now());
        if (s.closedEarly) return;
        const inCycle = i % CYCLE;
        if (inCycle === BURST_FRAMES) {
          if (s.pendingSince !== null && s.cycle > WARMUP_CYCLES) s.missed++;
          s.cycle++;
          s.pendingSince = performance.now();
        }
        s.ws.send(inCycle < BURST_FRAMES ? voiced : silent);
      }
    }),
  );
  await sleep(1000); // the last transcripts
}

interface Row {
  path: Path;
  n: number;
  p50: number;
  p99: number;
  cpuPerSessionSecond: number;
  /** Of which the main thread's. */
  mainCpuPerSessionSecond: number;
  /** Read / write system calls per session-second. */
  readsPerSessionSecond: number;
  writesPerSessionSecond: number;
  /** The main thread's run-queue wait, ms per second of the window. */
  waitPerSecond: number;
  rssPerSessionMb: number;
  loopP99: number;
  loopMax: number;
  missed: number;
  closedEarly: number;
  /** Messages the client received per session-second. */
  messagesPerSessionSecond: number;
  profile?: CpuProfile;
}

async function runPath(path: Path, n: number): Promise<Row> {
  const proc = path === 'relay' ? relay : gatewayOf(path);
  const pid = proc.child.pid!;
  const rssBefore = rssMb(pid);
  const sessions: Live[] = [];
  for (let i = 0; i < n; i += OPEN_BATCH) sessions.push(...(await Promise.all(Array.from({ length: Math.min(OPEN_BATCH, n - i) }, () => open(path)))));
  await sleep(500);
  const loop = path === 'relay' ? () => relayLoopDelay(relay.url) : () => gatewayLoopDelay(gatewayOf(path).url, METRICS_TOKEN);
  // The warm-up cycles are streamed before the window (the gateway opens each engine at the session's first audio).
  const streaming = stream(sessions, WARMUP_SECONDS + streamSeconds);
  await sleep(WARMUP_SECONDS * 1000);
  const receivedBefore = sessions.reduce((a, s) => a + s.received, 0);
  const w = await measureWindow(pid, loop, () => streaming, Boolean(values.profile));
  const windowSeconds = streamSeconds + 1;
  const received = sessions.reduce((a, s) => a + s.received, 0) - receivedBefore;
  const closedEarly = sessions.filter((s) => s.closedEarly).length;
  for (const s of sessions) s.ws.close();
  await sleep(1000);
  const all = sessions.flatMap((s) => s.latencies).sort((a, b) => a - b);
  return {
    path,
    n,
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    cpuPerSessionSecond: w.cpuMs / (n * windowSeconds),
    mainCpuPerSessionSecond: w.mainCpuMs / (n * windowSeconds),
    readsPerSessionSecond: w.syscalls.reads / (n * windowSeconds),
    writesPerSessionSecond: w.syscalls.writes / (n * windowSeconds),
    waitPerSecond: w.waitMs / windowSeconds,
    rssPerSessionMb: (w.rssPeakMb - rssBefore) / n,
    loopP99: w.loop.p99,
    loopMax: w.loop.max,
    missed: sessions.reduce((a, s) => a + s.missed, 0),
    closedEarly,
    messagesPerSessionSecond: received / (n * windowSeconds),
    profile: w.profile,
  };
}

const f = fixed;
const rows: Record<string, string | number>[] = [];
console.error(`load average before: ${loadAverage()}`);
// One unmeasured pass through the relay first: the engine's process and this one (the clients)
// are then as warm for the first path measured as for the later ones.
await runPath('relay', sessionCounts[0]!);
/** Each numeric figure's median over the rounds; what was missed or closed, summed. */
function medianRow(of: Row[]): Row {
  const m = (pick: (r: Row) => number) => median(of.map(pick));
  return {
    ...of[0]!,
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    cpuPerSessionSecond: m((r) => r.cpuPerSessionSecond),
    mainCpuPerSessionSecond: m((r) => r.mainCpuPerSessionSecond),
    readsPerSessionSecond: m((r) => r.readsPerSessionSecond),
    writesPerSessionSecond: m((r) => r.writesPerSessionSecond),
    waitPerSecond: m((r) => r.waitPerSecond),
    rssPerSessionMb: m((r) => r.rssPerSessionMb),
    loopP99: m((r) => r.loopP99),
    loopMax: m((r) => r.loopMax),
    missed: of.reduce((a, r) => a + r.missed, 0),
    closedEarly: of.reduce((a, r) => a + r.closedEarly, 0),
    messagesPerSessionSecond: m((r) => r.messagesPerSessionSecond),
  };
}

/** A gateway's figures less (p50, p99) or over (CPU) the relay's of the same round, median over the rounds; the other columns blank. */
function comparedRow(n: number, path: string, gateway: Row[], relay: Row[]): Record<string, string | number> {
  const m = (pick: (g: Row, r: Row) => number) => median(gateway.map((g, i) => pick(g, relay[i]!)));
  return {
    ...Object.fromEntries(Object.keys(rows.at(-1)!).map((column) => [column, ''])),
    N: n,
    path,
    'p50 ms': f(m((g, r) => g.p50 - r.p50)),
    'p99 ms': f(m((g, r) => g.p99 - r.p99)),
    'CPU ms / session-s': `${f(
      m((g, r) => g.cpuPerSessionSecond / r.cpuPerSessionSecond),
      2,
    )}x`,
    'main thread ms / session-s': `${f(
      m((g, r) => g.mainCpuPerSessionSecond / r.mainCpuPerSessionSecond),
      2,
    )}x`,
  };
}

const paths: Path[] = base ? ['gateway', 'relay', 'base'] : ['gateway', 'relay'];
for (const n of sessionCounts) {
  const measured = new Map<Path, Row[]>(paths.map((p) => [p, []]));
  for (let round = 0; round < rounds; round++)
    for (let i = 0; i < paths.length; i++) {
      const path = paths[(round + i) % paths.length]!;
      measured.get(path)!.push(await runPath(path, n));
    }
  const [gw, rl, bs] = paths.map((p) => medianRow(measured.get(p)!));
  for (const r of bs ? [gw!, rl!, bs] : [gw!, rl!])
    rows.push({
      N: n,
      path: r.path === 'base' ? `gateway (${values.base})` : r.path,
      'p50 ms': f(r.p50),
      'p99 ms': f(r.p99),
      'CPU ms / session-s': f(r.cpuPerSessionSecond, 2),
      'main thread ms / session-s': f(r.mainCpuPerSessionSecond, 2),
      'reads / writes per session-s': `${f(r.readsPerSessionSecond)} / ${f(r.writesPerSessionSecond)}`,
      'messages to the client / session-s': f(r.messagesPerSessionSecond, 2),
      'CPU wait ms/s': f(r.waitPerSecond, 0),
      'RSS MB / session': f(r.rssPerSessionMb, 3),
      'loop p99 / max ms': `${f(r.loopP99)} / ${f(r.loopMax)}`,
      'missed / closed': `${r.missed} / ${r.closedEarly}`,
    });
  rows.push(comparedRow(n, 'gateway - relay', measured.get('gateway')!, measured.get('relay')!));
  if (bs) rows.push(comparedRow(n, 'base - relay', measured.get('base')!, measured.get('relay')!));
  const [gwProfiled, rlProfiled] = [measured.get('gateway')![0]!, measured.get('relay')![0]!];
  if (values.profile && gwProfiled.profile && rlProfiled.profile) {
    const bsProfiled = measured.get('base')?.[0];
    for (const r of [gwProfiled, rlProfiled, bsProfiled]) if (r?.profile) saveProfile(values.profile, `stt-${r.path}-${n}`, r.profile);
    const sessionSeconds = n * (streamSeconds + 1);
    console.log(`\nN=${n}: main-thread CPU per session-second, gateway next to the relay (profiles in ${values.profile})\n`);
    console.log(
      profileTables(gwProfiled.profile, sessionSeconds, 'session-s', Number(values.top), { name: 'relay', profile: rlProfiled.profile, units: sessionSeconds }),
    );
  }
  console.error(`N=${n} done, load average ${loadAverage()}`);
}
console.log(`${new Date().toISOString()}  --sessions ${values.sessions} --seconds ${streamSeconds} --rounds ${rounds}  load average ${loadAverage()}`);
console.log(table(rows));
process.exit(0);
