// Realtime sessions at scale (issue #31): N concurrent WS /v1/realtime conversations through the
// bundled gateway (bench/gateway-server.ts, run as `svc gateway` runs, fresh SQLite fixture: key
// auth, reservations, per-second and per-span debits on), then the same N clients' audio through
// a bare `ws` relay (bench/bare-ws-relay.ts) to a realtime transcription engine, in the same run.
// Remote engines only, each scripted in a process of its own, so the gateway's CPU is its own:
// the Deepgram peer transcribes (test/support/scripted-deepgram.ts), the scripted LLM answers
// (bench/upstream-server.ts: "Sure, I can help with that." in six chunks), the Cartesia peer
// speaks (test/support/scripted-cartesia.ts); the relay's engine is the scripted OpenAI realtime
// transcription peer (test/support/scripted-openai-realtime.ts, energy VAD).
//
// Each session streams, in real time, 20 ms pcm16 frames at 24 kHz (input_audio_buffer.append,
// base64 in JSON): a question spoken by flite after 0.5 s of silence (bench/lib/paced-turns.ts),
// then SILENCE_SECONDS of silence, looped; session k starts k/N of a cycle late. Turn detection:
// server_vad with 500 ms of silence on both (the gateway's detector on the gateway, the engine's
// on the relay). E is when the frame holding the question's last voiced sample was sent. Per
// turn: E -> input_audio_buffer.speech_stopped (both paths; the difference of the two is what
// the gateway adds to a turn's end, detectors aside) and, on the gateway, E -> the answer's
// first response.output_audio.delta. One cycle per session is streamed before the window.
// Reported per N and path: p50 / p99 of both, CPU per session-second, RSS added per session,
// event-loop delay p99 / max, the main thread's wait for a CPU (bench/lib/scale.ts), turns
// missed (no speech_stopped, or no answer, before the next question) and sessions closed.
// The gateway's session does much more than the relay (a turn detector on every frame, a
// transcription engine, the LLM and the TTS engine per answer, billing): the relay is the floor
// for moving the same audio, not the same work.
// --profile DIR: both processes profiled over each window (bench/lib/cpu-profile.ts).
//
//   npx tsx bench/realtime-at-scale.ts [--sessions 10,30,60] [--seconds 20] [--profile DIR] [--top 30]
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { newId } from '../server/db/ids.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { mapVoiceToEngine } from '../server/services/voices/engine-voices.ts';
import { INSPECT_ENV, profileTables, saveProfile, type CpuProfile } from './lib/cpu-profile.ts';
import { percentile, table } from './lib/load.ts';
import { FRAME_MS, question, RATE } from './lib/paced-turns.ts';
import { rssMb, startBundled, startTs } from './lib/processes.ts';
import { fixed as f, gatewayLoopDelay, loadAverage, measureWindow, relayLoopDelay, sleep, type LoopDelay } from './lib/scale.ts';
import { METRICS_TOKEN, scaleDatabase, scaleGatewayEnv } from './lib/scale-fixture.ts';
import type { Peers } from './lib/upstream-peers.ts';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '10,30,60' },
    seconds: { type: 'string', default: '20' },
    profile: { type: 'string' },
    top: { type: 'string', default: '30' },
  },
});
const sessionCounts = values.sessions.split(',').map(Number);
const windowSeconds = Number(values.seconds);

const SILENCE_SECONDS = 3;
const OPEN_BATCH = 10;
const REPLY = ['Sure', ', I can', ' help', ' with', ' that', '.'];
const MODELS = { stt: 'bench-deepgram-stt', llm: 'bench-llm', tts: 'bench-cartesia-tts' };
const KEY_ENVS = { deepgram: 'BENCH_DEEPGRAM_KEY', cartesia: 'BENCH_CARTESIA_KEY' };
const TURN_DETECTION = { type: 'server_vad', silence_duration_ms: 500 };

// ---------- the audio: one question, then silence; each frame's append event written once ----------
const q = await question('Can I change my delivery address?');
const FRAME_BYTES = ((RATE * FRAME_MS) / 1000) * 2;
const frames: string[] = [];
for (let at = 0; at < q.pcm.length; at += FRAME_BYTES)
  frames.push(JSON.stringify({ type: 'input_audio_buffer.append', audio: q.pcm.subarray(at, at + FRAME_BYTES).toString('base64') }));
const silentFrame = JSON.stringify({ type: 'input_audio_buffer.append', audio: Buffer.alloc(FRAME_BYTES).toString('base64') });
for (let i = 0; i < (SILENCE_SECONDS * 1000) / FRAME_MS; i++) frames.push(silentFrame);
const CYCLE_MS = frames.length * FRAME_MS;

// ---------- processes ----------
const peersProc = await startTs('bench/lib/upstream-peers.ts');
const peers = (await (await fetch(`${peersProc.url}/peers`)).json()) as Peers;
const llm = await startTs('bench/upstream-server.ts', {
  BENCH_UPSTREAM_MODE: 'stream',
  BENCH_STREAM_CHUNKS: JSON.stringify(REPLY),
  BENCH_STREAM_DELAY_MS: '0',
});

const voiceId = newId('voice');
const { dataDir, key } = await scaleDatabase('svc-bench-realtime-scale-', async (db) => {
  await upsertModel(db.prisma, checkProtocol, {
    id: MODELS.stt,
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: peers.deepgram.url, protocol: 'deepgram', upstreamModel: 'nova-3', apiKeyEnv: KEY_ENVS.deepgram },
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: MODELS.llm,
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: llm.url, protocol: 'openai' },
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: MODELS.tts,
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: peers.cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: KEY_ENVS.cartesia },
  });
  await db.prisma.voice.create({ data: { id: voiceId, orgId: null, kind: 'library', name: 'bench cartesia', tags: [] } });
  await mapVoiceToEngine(db.prisma, { voiceId, modelId: MODELS.tts, upstreamId: 'bench-cartesia-voice' });
});

const inspect = values.profile ? INSPECT_ENV : {};
const gateway = await startBundled(
  'bench/gateway-server.ts',
  scaleGatewayEnv(dataDir, {
    BENCH_GATEWAY_LOG_LEVEL: 'warn',
    [KEY_ENVS.deepgram]: peers.deepgram.key,
    [KEY_ENVS.cartesia]: peers.cartesia.key,
    ...inspect,
  }),
);
const relay = await startBundled(
  'bench/bare-ws-relay.ts',
  { BARE_RELAY_TARGET: `${peers.realtime.url}/realtime`, BARE_RELAY_AUTH: `Bearer ${peers.realtime.key}`, ...inspect },
  'node',
);
process.once('exit', () => {
  for (const p of [gateway, relay, llm, peersProc]) p.child.kill('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
});

// ---------- sessions ----------
type Path = 'gateway' | 'relay';
type Event = { type: string; [k: string]: unknown };

interface Live {
  ws: WebSocket;
  /** When the current turn's last voiced frame was sent (E), until its speech_stopped / first answer audio. */
  voicedAt: number;
  stopped: boolean;
  answered: boolean;
  counting: boolean;
  stops: number[];
  answers: number[];
  missed: number;
  closedEarly: boolean;
}

function open(path: Path): Promise<Live> {
  const url = `${(path === 'gateway' ? gateway.url : relay.url).replace(/^http/, 'ws')}/v1/realtime?model=${path === 'gateway' ? MODELS.llm : 'gpt-4o-transcribe'}`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${key}` } });
  const s: Live = { ws, voicedAt: NaN, stopped: true, answered: true, counting: false, stops: [], answers: [], missed: 0, closedEarly: false };
  return new Promise((resolve, reject) => {
    ws.on('message', (data) => {
      const at = performance.now();
      const e = JSON.parse(data.toString()) as Event;
      if (e.type === 'session.created') {
        const session =
          path === 'gateway'
            ? { type: 'realtime', audio: { input: { turn_detection: TURN_DETECTION } } }
            : { type: 'transcription', audio: { input: { turn_detection: TURN_DETECTION } } };
        ws.send(JSON.stringify({ type: 'session.update', session }));
      }
      if (e.type === 'session.updated') resolve(s);
      if (e.type === 'error') reject(new Error(`${path}: error event ${JSON.stringify(e.error)}`));
      if (e.type === 'input_audio_buffer.speech_stopped' && !s.stopped && !Number.isNaN(s.voicedAt)) {
        s.stopped = true;
        if (s.counting) s.stops.push(at - s.voicedAt);
      }
      if (e.type === 'response.output_audio.delta' && !s.answered && s.stopped) {
        s.answered = true;
        if (s.counting) s.answers.push(at - s.voicedAt);
      }
    });
    ws.on('close', () => (s.closedEarly = true));
    ws.on('error', reject);
  });
}

/** Streams every session in real time for `ms`, session k a k/N of a cycle late; `counting` from `countFrom` on. */
async function stream(path: Path, sessions: Live[], ms: number, countFrom: number): Promise<void> {
  const frameCount = Math.floor(ms / FRAME_MS);
  const t0 = performance.now() + 50;
  await Promise.all(
    sessions.map(async (s, k) => {
      const start = t0 + (k / sessions.length) * CYCLE_MS;
      for (let i = 0; i < frameCount; i++) {
        await sleep(start + i * FRAME_MS - performance.now());
        if (s.closedEarly) return;
        const inCycle = i % frames.length;
        if (inCycle === 0) {
          // A new question: the last turn had its stop (and its answer) by now, or missed it.
          if (s.counting && (!s.stopped || (path === 'gateway' && !s.answered))) s.missed++;
          s.counting = performance.now() >= countFrom;
          s.voicedAt = NaN;
        }
        s.ws.send(frames[inCycle]!);
        if (inCycle === q.lastVoicedFrame) {
          s.voicedAt = performance.now();
          s.stopped = false;
          s.answered = false;
        }
      }
    }),
  );
}

interface Row {
  path: Path;
  n: number;
  stops: number[];
  answers: number[];
  cpuMs: number;
  waitMs: number;
  rssPerSessionMb: number;
  loop: LoopDelay;
  missed: number;
  closedEarly: number;
  profile?: CpuProfile;
}

async function runPath(path: Path, n: number): Promise<Row> {
  const proc = path === 'gateway' ? gateway : relay;
  const pid = proc.child.pid!;
  const rssBefore = rssMb(pid);
  const sessions: Live[] = [];
  for (let i = 0; i < n; i += OPEN_BATCH) sessions.push(...(await Promise.all(Array.from({ length: Math.min(OPEN_BATCH, n - i) }, () => open(path)))));
  await sleep(500);
  const loop = path === 'gateway' ? () => gatewayLoopDelay(gateway.url, METRICS_TOKEN) : () => relayLoopDelay(relay.url);
  // One cycle per session before the window; the last cycle's answers come within the second after it.
  const countFrom = performance.now() + CYCLE_MS + 100;
  const streaming = stream(path, sessions, CYCLE_MS + windowSeconds * 1000, countFrom);
  await sleep(countFrom - performance.now());
  const w = await measureWindow(pid, loop, () => streaming.then(() => sleep(1000)), Boolean(values.profile));
  const closedEarly = sessions.filter((s) => s.closedEarly).length;
  for (const s of sessions) s.ws.close();
  await sleep(1000);
  const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
  return {
    path,
    n,
    stops: sorted(sessions.flatMap((s) => s.stops)),
    answers: sorted(sessions.flatMap((s) => s.answers)),
    cpuMs: w.cpuMs,
    waitMs: w.waitMs,
    rssPerSessionMb: (w.rssPeakMb - rssBefore) / n,
    loop: w.loop,
    missed: sessions.reduce((a, s) => a + s.missed, 0),
    closedEarly,
    profile: w.profile,
  };
}

const rows: Record<string, string | number>[] = [];
const both = (xs: number[]) => `${f(percentile(xs, 50))} / ${f(percentile(xs, 99))}`;
console.error(`load average before: ${loadAverage()}`);
for (const n of sessionCounts) {
  const gw = await runPath('gateway', n);
  const rl = await runPath('relay', n);
  const seconds = windowSeconds + 1;
  for (const r of [gw, rl])
    rows.push({
      N: n,
      path: r.path,
      'E → speech_stopped p50 / p99 ms': both(r.stops),
      'E → first answer audio p50 / p99 ms': r.path === 'gateway' ? both(r.answers) : '',
      'CPU ms / session-s': f(r.cpuMs / (n * seconds), 2),
      'CPU wait ms/s': f(r.waitMs / seconds, 0),
      'RSS MB / session': f(r.rssPerSessionMb, 3),
      'loop p99 / max ms': `${f(r.loop.p99)} / ${f(r.loop.max)}`,
      'turns / missed / closed': `${r.stops.length} / ${r.missed} / ${r.closedEarly}`,
    });
  rows.push({
    N: n,
    path: 'gateway - relay',
    'E → speech_stopped p50 / p99 ms': `${f(percentile(gw.stops, 50) - percentile(rl.stops, 50))} / ${f(percentile(gw.stops, 99) - percentile(rl.stops, 99))}`,
    'E → first answer audio p50 / p99 ms': '',
    'CPU ms / session-s': `${f(gw.cpuMs / rl.cpuMs, 2)}x`,
    'CPU wait ms/s': '',
    'RSS MB / session': '',
    'loop p99 / max ms': '',
    'turns / missed / closed': '',
  });
  if (values.profile && gw.profile && rl.profile) {
    for (const r of [gw, rl]) saveProfile(values.profile, `realtime-${r.path}-${n}`, r.profile!);
    const sessionSeconds = n * seconds;
    console.log(`\nN=${n}: main-thread CPU per session-second, gateway next to the relay (profiles in ${values.profile})\n`);
    console.log(profileTables(gw.profile, sessionSeconds, 'session-s', Number(values.top), { name: 'relay', profile: rl.profile, units: sessionSeconds }));
  }
  console.error(`N=${n} done, load average ${loadAverage()}`);
}
console.log(`${new Date().toISOString()}  --sessions ${values.sessions} --seconds ${windowSeconds}  load average ${loadAverage()}`);
console.log(table(rows));
process.exit(0);
