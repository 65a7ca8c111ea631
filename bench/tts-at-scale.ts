// TTS sockets at scale (issue #31): N concurrent WS /tts/websocket sockets through the bundled
// gateway (bench/gateway-server.ts, run as `svc gateway` runs, fresh SQLite fixture: key auth,
// reservations and per-span debits on), then the same N through a bare relay
// (bench/bare-tts-relay.ts: Cartesia-shaped requests to the engine's /tts/bytes, its audio back as
// base64 `chunk` events, nothing else), then N clients calling the engine alone, in the same run.
// The engine is the scripted Cartesia peer (test/support/scripted-cartesia.ts: a tone,
// 20 ms of audio per character, sent as fast as the client takes it) in a process of its own
// (bench/lib/upstream-peers.ts).
//
// Each socket runs a context every --every seconds (socket k starts k/N of a period late): the
// two sentences of an agent's answer, the first sent at once with continue:true, the second
// SECOND_AFTER_MS later, then {transcript:"", continue:false}; raw pcm_s16le at the engine's
// rate (24 kHz, nothing to resample), read to `done`. The engine alone: the two sentences as two
// POST /tts/bytes one after the other, each read to its end, as the gateway speaks them. The same
// load runs for --warmup seconds before the measured window (at least one context a socket): at
// 25 streams a second a gateway's own code is called a few hundred times a second, and V8 takes
// tens of seconds to optimize it (until then it runs as baseline code, and compiles beside it),
// while a relay runs Node's own code, hot from the first second; a gateway runs for days.
// Reported per N and path: time to first audio (the first sentence sent -> its first `chunk`;
// the engine alone: the request sent -> the first byte of audio) p50 / p99, and what the
// gateway and the relay add over the engine alone; CPU per stream (a context: both sentences; all
// threads, and the main thread's alone) and per session-second, read and write system calls per
// stream, RSS added per socket, event-loop delay p99 / max, the main thread's wait for a CPU
// (bench/lib/scale.ts), the audio events a stream received (`chunk` messages, warm-up included),
// and streams that failed or came late (a context still running when its socket's next one was
// due).
// --profile DIR: the gateway and the relay are profiled over each window (bench/lib/cpu-profile.ts);
// the gateway's self time is printed per package and function, in microseconds per stream.
// --base DIR: the gateway of another checkout too (say an export of an earlier commit:
// `git archive <commit> | tar -x -C DIR`, with this tree's node_modules and
// server/db/generated linked in), on a copy of the fixture database, measured in the same run.
//
// --rounds K: each N is measured K times, the paths taking turns (round r starts at the r-th path);
// each figure shown is the median over the rounds, each ratio the median of the rounds' own.
//
//   npx tsx bench/tts-at-scale.ts [--sockets 50,150] [--seconds 20] [--warmup 30] [--rounds 1] [--every 2] [--profile DIR] [--top 30] [--base DIR]
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { newId } from '../server/db/ids.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { mapVoiceToEngine } from '../server/services/voices/engine-voices.ts';
import { INSPECT_ENV, profileTables, saveProfile, type CpuProfile } from './lib/cpu-profile.ts';
import { median, percentile, table } from './lib/load.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';
import { fixed as f, gatewayLoopDelay, loadAverage, measureWindow, relayLoopDelay, sleep, type LoopDelay } from './lib/scale.ts';
import { copyScaleDatabase, METRICS_TOKEN, scaleDatabase, scaleGatewayEnv } from './lib/scale-fixture.ts';
import type { Peers } from './lib/upstream-peers.ts';

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '50,150' },
    seconds: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '1' },
    every: { type: 'string', default: '2' },
    profile: { type: 'string' },
    top: { type: 'string', default: '30' },
    base: { type: 'string' },
  },
});
const socketCounts = values.sockets.split(',').map(Number);
const windowSeconds = Number(values.seconds);
const warmupSeconds = Number(values.warmup);
const rounds = Number(values.rounds);
const everyMs = Number(values.every) * 1000;

const RATE = 24000;
const SENTENCES = ['Thanks for calling Acme support, my name is Sam.', ' How can I help you today?'];
const SECOND_AFTER_MS = 100;
const OPEN_BATCH = 25;
/** A stream not done by then failed. */
const STREAM_TIMEOUT_MS = 20_000;
const MODEL = 'bench-cartesia-tts';
const ENGINE_MODEL = 'sonic-3';
const ENGINE_VOICE = 'bench-cartesia-voice';
const KEY_ENV = 'BENCH_CARTESIA_KEY';
const OUTPUT = { container: 'raw', encoding: 'pcm_s16le', sample_rate: RATE };

// ---------- processes ----------
const peersProc = await startTs('bench/lib/upstream-peers.ts');
const peers = (await (await fetch(`${peersProc.url}/peers`)).json()) as Peers;

const voiceId = newId('voice');
const { dataDir, key } = await scaleDatabase('svc-bench-tts-scale-', async (db) => {
  await upsertModel(db.prisma, checkProtocol, {
    id: MODEL,
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: peers.cartesia.url, protocol: 'cartesia', upstreamModel: ENGINE_MODEL, apiKeyEnv: KEY_ENV },
  });
  await db.prisma.voice.create({ data: { id: voiceId, orgId: null, kind: 'library', name: 'bench cartesia', tags: [] } });
  await mapVoiceToEngine(db.prisma, { voiceId, modelId: MODEL, upstreamId: ENGINE_VOICE });
});

const inspect = values.profile ? INSPECT_ENV : {};
const gateway = await startBundled(
  'bench/gateway-server.ts',
  scaleGatewayEnv(dataDir, {
    BENCH_GATEWAY_LOG_LEVEL: 'warn',
    [KEY_ENV]: peers.cartesia.key,
    ...inspect,
  }),
);
const baseDir = values.base ? copyScaleDatabase(dataDir, 'svc-bench-tts-scale-base-') : null;
const base = baseDir
  ? await startBundled(
      'bench/gateway-server.ts',
      scaleGatewayEnv(baseDir, {
        BENCH_GATEWAY_LOG_LEVEL: 'warn',
        [KEY_ENV]: peers.cartesia.key,
      }),
      'gateway',
      values.base,
    )
  : null;
const relay = await startBundled(
  'bench/bare-tts-relay.ts',
  { BARE_TTS_ENGINE: peers.cartesia.url, BARE_TTS_KEY: peers.cartesia.key, BARE_TTS_VOICE: ENGINE_VOICE, ...inspect },
  'node',
);
process.once('exit', () => {
  for (const p of [gateway, base, relay, peersProc]) p?.child.kill('SIGTERM');
  for (const dir of [dataDir, baseDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---------- clients ----------
type Path = 'gateway' | 'base' | 'relay' | 'engine';
const gatewayOf = (path: 'gateway' | 'base') => (path === 'base' ? base! : gateway);
/** Audio events (WebSocket messages) received per path, warm-up included: what the path costs in frames a stream. */
const chunkEvents: Record<Path, number> = { gateway: 0, base: 0, relay: 0, engine: 0 };
/** Streams run per path, warm-up included (the denominator of chunkEvents). */
const streamsRun: Record<Path, number> = { gateway: 0, base: 0, relay: 0, engine: 0 };

interface Stats {
  ttfa: number[];
  streams: number;
  failed: number;
  late: number;
}

/** A client's way of running one context (a stream): resolves with its time to first audio. */
interface Client {
  readonly path: Path;
  run(): Promise<number>;
  close(): void;
}

/** A socket to the gateway or the relay; each run is a new context whose events are routed to it. */
function openSocket(path: 'gateway' | 'base' | 'relay'): Promise<Client> {
  const url = path === 'relay' ? relay.url : gatewayOf(path).url;
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/tts/websocket`, {
    headers: { authorization: `Bearer ${key}`, 'cartesia-version': '2025-04-16' },
  });
  const fields =
    path === 'relay'
      ? { model_id: ENGINE_MODEL, voice: { mode: 'id', id: ENGINE_VOICE }, output_format: OUTPUT, language: 'en' }
      : { model_id: MODEL, voice: { mode: 'id', id: voiceId }, output_format: OUTPUT, language: 'en' };
  const listeners = new Map<string, (e: { type: string; message?: string }) => void>();
  ws.on('message', (data) => {
    const e = JSON.parse(data.toString()) as { type: string; context_id?: string; message?: string };
    if (e.type === 'chunk') chunkEvents[path]++;
    if (e.context_id) listeners.get(e.context_id)?.(e);
  });
  let seq = 0;
  const client: Client = {
    path,
    run: () =>
      new Promise((resolve, reject) => {
        const id = `c${++seq}`;
        const sentAt = performance.now();
        let firstAt = NaN;
        const timer = setTimeout(() => {
          listeners.delete(id);
          reject(new Error('no done in time'));
        }, STREAM_TIMEOUT_MS);
        listeners.set(id, (e) => {
          if (e.type === 'chunk' && Number.isNaN(firstAt)) firstAt = performance.now();
          if (e.type === 'error') {
            listeners.delete(id);
            clearTimeout(timer);
            reject(new Error(`error event: ${e.message}`));
          }
          if (e.type === 'done') {
            listeners.delete(id);
            clearTimeout(timer);
            if (Number.isNaN(firstAt)) reject(new Error('done without audio'));
            else resolve(firstAt - sentAt);
          }
        });
        ws.send(JSON.stringify({ ...fields, context_id: id, transcript: SENTENCES[0], continue: true }));
        setTimeout(() => {
          ws.send(JSON.stringify({ ...fields, context_id: id, transcript: SENTENCES[1], continue: true }));
          ws.send(JSON.stringify({ ...fields, context_id: id, transcript: '', continue: false }));
        }, SECOND_AFTER_MS);
      }),
    close: () => ws.close(),
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('error', reject);
  });
}

const engineAgent = new Agent({ connections: 2048, keepAliveTimeout: 30_000 });

/** The engine alone: each sentence a POST /tts/bytes read to its end, the second after the first; the time to the first's first byte. */
function engineClient(): Client {
  const speak = async (transcript: string): Promise<number> => {
    const sentAt = performance.now();
    const res = await request(`${peers.cartesia.url}/tts/bytes`, {
      method: 'POST',
      dispatcher: engineAgent,
      signal: AbortSignal.timeout(STREAM_TIMEOUT_MS),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${peers.cartesia.key}`, 'cartesia-version': '2026-03-01' },
      body: JSON.stringify({ model_id: ENGINE_MODEL, transcript, voice: { mode: 'id', id: ENGINE_VOICE }, output_format: OUTPUT }),
    });
    let first = NaN;
    for await (const chunk of res.body) if (Number.isNaN(first) && (chunk as Buffer).length) first = performance.now() - sentAt;
    if (res.statusCode !== 200 || Number.isNaN(first)) throw new Error(`the engine answered ${res.statusCode} without audio`);
    return first;
  };
  return {
    path: 'engine',
    run: async () => {
      const first = speak(SENTENCES[0]!);
      await sleep(SECOND_AFTER_MS);
      const ttfa = await first;
      await speak(SENTENCES[1]!);
      return ttfa;
    },
    close: () => {},
  };
}

/** Every client runs a context every period for `ms`, client k starting k/N of a period late; a context due while the last runs waits for it (late). */
async function schedule(clients: Client[], ms: number, stats: Stats | null): Promise<void> {
  const t0 = performance.now() + 50;
  await Promise.all(
    clients.map(async (c, k) => {
      const start = t0 + (k / clients.length) * everyMs;
      for (let i = 0; start + i * everyMs < t0 + ms; i++) {
        const due = start + i * everyMs;
        if (performance.now() > due + everyMs / 2 && stats) stats.late++;
        await sleep(due - performance.now());
        try {
          const ttfa = await c.run();
          streamsRun[c.path]++;
          if (stats) {
            stats.ttfa.push(ttfa);
            stats.streams++;
          }
        } catch {
          if (stats) stats.failed++;
        }
      }
    }),
  );
}

interface Row extends Stats {
  path: Path;
  n: number;
  cpuMs: number;
  mainCpuMs: number;
  syscalls: { reads: number; writes: number };
  waitMs: number;
  rssPerSocketMb: number;
  loop: LoopDelay;
  profile?: CpuProfile;
}

/** The paths whose process has been warmed up (it stays warm for the next rounds and N). */
const warmed = new Set<Path>();

async function runPath(path: Path, n: number): Promise<Row> {
  const proc = path === 'relay' ? relay : path === 'engine' ? peersProc : gatewayOf(path);
  const pid = proc.child.pid!;
  const rssBefore = rssMb(pid);
  const clients: Client[] = [];
  for (let i = 0; i < n; i += OPEN_BATCH) {
    const batch = Array.from({ length: Math.min(OPEN_BATCH, n - i) }, () => (path === 'engine' ? Promise.resolve(engineClient()) : openSocket(path)));
    clients.push(...(await Promise.all(batch)));
  }
  // Warm-up, unmeasured: the same load for --warmup seconds the first time a path runs, one context a socket after that.
  await schedule(clients, warmed.has(path) ? everyMs : Math.max(everyMs, warmupSeconds * 1000), null);
  warmed.add(path);
  const stats: Stats = { ttfa: [], streams: 0, failed: 0, late: 0 };
  const loop: () => Promise<LoopDelay> =
    path === 'relay'
      ? () => relayLoopDelay(relay.url)
      : path === 'engine'
        ? async () => ({ p99: NaN, max: NaN })
        : () => gatewayLoopDelay(gatewayOf(path).url, METRICS_TOKEN);
  const w = await measureWindow(pid, loop, () => schedule(clients, windowSeconds * 1000, stats), Boolean(values.profile) && path !== 'engine');
  for (const c of clients) c.close();
  await sleep(500);
  stats.ttfa.sort((a, b) => a - b);
  return {
    ...stats,
    path,
    n,
    cpuMs: w.cpuMs,
    mainCpuMs: w.mainCpuMs,
    syscalls: w.syscalls,
    waitMs: w.waitMs,
    rssPerSocketMb: (w.rssPeakMb - rssBefore) / n,
    loop: w.loop,
    profile: w.profile,
  };
}

const rows: Record<string, string | number>[] = [];
const order: Path[] = base ? ['engine', 'relay', 'gateway', 'base'] : ['engine', 'relay', 'gateway'];
console.error(`load average before: ${loadAverage()}`);
for (const n of socketCounts) {
  // Round r starts at the r-th path, so that none is always first after the machine's quiet spell.
  const byRound: Partial<Record<Path, Row>>[] = [];
  for (let round = 0; round < rounds; round++) {
    const got: Partial<Record<Path, Row>> = {};
    for (let i = 0; i < order.length; i++) {
      const path = order[(i + round) % order.length]!;
      got[path] = await runPath(path, n);
    }
    byRound.push(got);
  }
  const of = (path: Path) => byRound.map((r) => r[path]!);
  /** The median over the rounds of a figure of one path's rows. */
  const med = (path: Path, figure: (r: Row) => number) => median(of(path).map(figure));
  const ttfa = (q: number) => (r: Row) => percentile(r.ttfa, q);
  for (const path of order) {
    const proxied = path !== 'engine';
    const streams = of(path).reduce((acc, r) => acc + r.streams, 0);
    const failed = of(path).reduce((acc, r) => acc + r.failed, 0);
    const late = of(path).reduce((acc, r) => acc + r.late, 0);
    // What a path adds over the engine alone: each round's difference, median over the rounds.
    const added = (q: number) => median(byRound.map((r) => ttfa(q)(r[path]!) - ttfa(q)(r.engine!)));
    /** A proxied path's figure, median over the rounds (blank for the engine alone). */
    const fig = (figure: (r: Row) => number, digits = 1) => (proxied ? f(med(path, figure), digits) : '');
    rows.push({
      N: n,
      path: path === 'engine' ? 'engine alone' : path === 'base' ? `gateway (${values.base})` : path,
      'first audio p50 / p99 ms': `${f(med(path, ttfa(50)))} / ${f(med(path, ttfa(99)))}`,
      'added p50 / p99 ms': proxied ? `${f(added(50))} / ${f(added(99))}` : '',
      'CPU ms / stream': fig((r) => r.cpuMs / r.streams, 2),
      'main thread ms / stream': fig((r) => r.mainCpuMs / r.streams, 2),
      'reads / writes per stream': proxied ? `${fig((r) => r.syscalls.reads / r.streams)} / ${fig((r) => r.syscalls.writes / r.streams)}` : '',
      'CPU ms / session-s': fig((r) => r.cpuMs / (n * windowSeconds), 2),
      'CPU wait ms/s': fig((r) => r.waitMs / windowSeconds, 0),
      'RSS MB / socket': fig((r) => r.rssPerSocketMb, 3),
      'loop p99 / max ms': proxied ? `${fig((r) => r.loop.p99)} / ${fig((r) => r.loop.max)}` : '',
      'chunks / stream': proxied ? f(chunkEvents[path] / streamsRun[path], 1) : '',
      'streams / failed / late': `${streams} / ${failed} / ${late}`,
    });
  }
  // The gateway's CPU per stream as a multiple of another path's: each round's ratio, median over the rounds; the other columns blank.
  const ratioRow = (label: string, other: Path) => {
    const times = (cpu: (r: Row) => number) => {
      const ratio = median(byRound.map((r) => cpu(r.gateway!) / r.gateway!.streams / (cpu(r[other]!) / r[other]!.streams)));
      return `${f(ratio, 2)}x`;
    };
    return {
      ...Object.fromEntries(Object.keys(rows.at(-1)!).map((column) => [column, ''])),
      N: n,
      path: `gateway / ${label}`,
      'CPU ms / stream': times((r) => r.cpuMs),
      'main thread ms / stream': times((r) => r.mainCpuMs),
    };
  };
  rows.push(ratioRow('relay', 'relay'));
  if (base) rows.push(ratioRow('base', 'base'));
  const [gw, relayRow] = [byRound[0]!.gateway!, byRound[0]!.relay!];
  if (values.profile && gw.profile && relayRow.profile) {
    for (const r of [gw, relayRow]) saveProfile(values.profile, `tts-${r.path}-${n}`, r.profile!);
    console.log(`\nN=${n}: main-thread CPU per stream, gateway next to the relay, first round (profiles in ${values.profile})\n`);
    console.log(profileTables(gw.profile, gw.streams, 'stream', Number(values.top), { name: 'relay', profile: relayRow.profile, units: relayRow.streams }));
  }
  console.error(`N=${n} done, load average ${loadAverage()}`);
}
console.log(
  `${new Date().toISOString()}  --sockets ${values.sockets} --seconds ${windowSeconds} --warmup ${warmupSeconds} --every ${values.every} --rounds ${rounds}  load average ${loadAverage()}`,
);
console.log(table(rows));
process.exit(0);
