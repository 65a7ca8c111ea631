// What the gateway adds to voice latency on each upstream protocol, against the engine alone in
// the same run. Three processes besides this one (the client): the gateway (bench/gateway-server.ts,
// bundled and run as `svc gateway` runs, on a fresh SQLite fixture with key auth, rate limit,
// reservations and debits on), the scripted engine peers (bench/lib/upstream-peers.ts:
// test/support/scripted-*.ts, real HTTP/WebSocket servers written from the vendors' references),
// and an OpenAI-compatible speech server (bench/voice-upstream-server.ts; the scripted OpenAI
// peer has no /audio/speech). "Peer alone" is the same request, or the same session with the
// same audio, sent by this client straight to the peer's own endpoint.
//
// (1) First audio byte of speech: POST /tts/bytes {stream: true, raw pcm_s16le} through the
//     gateway, at the engine's own rate (24 kHz for every protocol's default setting: no
//     resampling) and at 16 kHz (resampled by the gateway), vs the peer's speech endpoint asked
//     for the same output directly (OpenAI's pcm is 24 kHz only: its direct request is that).
//     Time from sending the request to the first body byte, on keep-alive connections (undici),
//     each response read to its end before the next; cases interleaved, order rotating.
// (2) Streaming STT, 20 ms frames of 16-bit PCM sent in real time (one every 20 ms), at the rate
//     the gateway gives the engine (16 kHz; 24 kHz for openai-realtime), so no resampling: silence,
//     a 0.3 s 300 Hz tone burst (a word to every peer), silence. The gateway session is
//     GET /stt/websocket (defaults: turn_detection=balanced, turn_source=auto); the direct one is
//     the peer's own socket opened with what the gateway's protocol module sends (Deepgram
//     /v1/listen query, Cartesia /stt/websocket, Realtime GA session.update with server VAD).
//     Both start streaming once the session is ready (gateway: session.started; the engine is
//     opened at the first audio, 0.2 s of leading silence before the word).
//     - first transcript: from sending the frame that makes the peer speak (known from the
//       audio: deepgram the first silent frame after the burst, cartesia the burst's first frame,
//       realtime the frame that completes 500 ms of silence -- server VAD commits, then deltas)
//       to the first interim (gateway `transcript` is_final:false; peer Results/transcript/
//       input_audio_transcription.delta). openai-realtime twice: the trigger frame at an odd and
//       at an even frame index (the gateway once batched appends by 40 ms, which delayed the
//       second case by a frame; link.ts APPEND_MS is now 10 ms: both should match).
//     - final after finalize: 0.1 s of silence after the burst, then {"type":"finalize"} right
//       after the last frame (peer: Finalize / finalize / input_audio_buffer.commit) to the final
//       transcript. openai (a batch engine the gateway streams, segmented-streaming.ts): the
//       gateway's final after finalize vs one direct POST /v1/audio/transcriptions of the same
//       0.6 s (a WAV, multipart as the gateway sends it).
// (3) Client leaving -> engine connection closed: the client drops its connection and the peer
//     time-stamps its engine connection's close (the peers' own close records). TTS: after the
//     first body byte of a 5,000-character synthesis (the Deepgram and ElevenLabs peers make 40 ms
//     of tone per character: 9.6 MB at 24 kHz, more than loopback socket buffers hold, so the
//     engine is still sending); STT: the socket terminated right after its first transcript;
//     openai: while the peer holds the final's transcription request. Peer clocks are mapped to
//     this process's with the offset measured by min-RTT pings.
//
// Each round measures every case; p50/p90 are over all samples of all rounds; "added p50" is the
// median over rounds of (gateway p50 - peer p50) of that round, "x" the median of the per-round
// ratios: noise from other processes drifts over seconds and hits both sides of a round alike.
// Target (issue): the gateway adds <= 5 ms at p50 to first byte and first transcript.
//
// ~3.5 min on 2 cores with the defaults:
//   npx tsx bench/upstream-streaming.ts [--rounds 3] [--tts-samples 20] [--stt-samples 5] [--leave-samples 6]
import type { ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { openDatabase } from '../server/db/database.ts';
import { newId } from '../server/db/ids.ts';
import { migrate } from '../server/db/migrate.ts';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { mapVoiceToEngine } from '../server/services/voices/engine-voices.ts';
import type { ConnectionTimes, PeerKind, Peers } from './lib/upstream-peers.ts';
import { median, percentile, table } from './lib/load.ts';
import { startBundled, startTs } from './lib/processes.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'tts-samples': { type: 'string', default: '20' },
    'stt-samples': { type: 'string', default: '5' },
    'leave-samples': { type: 'string', default: '6' },
  },
});
const ROUNDS = Number(values.rounds);
const TTS_SAMPLES = Number(values['tts-samples']);
const STT_SAMPLES = Number(values['stt-samples']);
const LEAVE_SAMPLES = Number(values['leave-samples']);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
/** This process's clock on the peers' scale (performance.timeOrigin + performance.now(), then the measured offset). */
const wallNow = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------------------------------------
// Processes and fixture

const procs: { child: ChildProcess }[] = [];
let dataDir = '';
let stopping = false;
const cleanup = () => {
  stopping = true;
  for (const p of procs) p.child.kill('SIGTERM');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
};
/** A process of the bench dying mid-run would only show as failed samples: stop at once instead. */
function watch(name: string, p: { child: ChildProcess }): void {
  procs.push(p);
  p.child.once('exit', (code, signal) => {
    if (stopping) return;
    console.error(`\n${name} exited (${signal ?? code}) during the run`);
    cleanup();
    process.exit(1);
  });
}
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

const peersProc = await startTs('bench/lib/upstream-peers.ts');
watch('the peers (bench/lib/upstream-peers.ts)', peersProc);
const controlAgent = new Agent({ connections: 4, keepAliveTimeout: 60_000 });
async function control<T>(path: string, method: 'GET' | 'POST' = 'GET'): Promise<{ status: number; body: T }> {
  const res = await request(`${peersProc.url}${path}`, { method, dispatcher: controlAgent });
  return { status: res.statusCode, body: (await res.body.json()) as T };
}
const peers = (await control<Peers>('/peers')).body;
const openaiSpeech = await startTs('bench/voice-upstream-server.ts', { BENCH_VOICE: 'tts' });
watch('the openai speech server (bench/voice-upstream-server.ts)', openaiSpeech);

const TTS_MODELS = { deepgram: 'bench-deepgram-tts', cartesia: 'bench-cartesia-tts', elevenlabs: 'bench-elevenlabs-tts', openai: 'bench-openai-tts' } as const;
const STT_MODELS = {
  deepgram: 'bench-deepgram-stt',
  cartesia: 'bench-cartesia-stt',
  'openai-realtime': 'bench-realtime-stt',
  openai: 'bench-openai-stt',
} as const;
/** The engine voice of each TTS model (the peers take any id). */
const ENGINE_VOICES = { deepgram: 'aura-2-thalia-en', cartesia: 'bench-cartesia-voice', elevenlabs: 'JBFqnCBsd6RMkjVDRZzb', openai: 'alloy' } as const;
const KEY_ENVS = {
  deepgram: 'BENCH_DEEPGRAM_KEY',
  cartesia: 'BENCH_CARTESIA_KEY',
  elevenlabs: 'BENCH_ELEVENLABS_KEY',
  realtime: 'BENCH_REALTIME_KEY',
  openai: 'BENCH_OPENAI_KEY',
} as const;

/** A throw-away SQLite database: one org and key, the eight models on the peers, a platform voice per TTS model. */
async function fixture() {
  dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-upstreams-'));
  const databaseUrl = `file:${join(dataDir, 'svc.db')}`;
  await migrate(databaseUrl);
  const db = openDatabase(databaseUrl);
  const org = await createOrg(db, { name: 'bench', creditsMicros: 1_000_000_000_000n });
  const key = await createApiKey(db.prisma, { orgId: org.id, name: 'bench', rateLimitRpm: 1_000_000_000 });
  const tts = { picoPerChar: 1_000_000n };
  const stt = { picoPerSecond: 100_000_000n };
  const up = (url: string, protocol: string, upstreamModel: string, apiKeyEnv: string, settings?: Record<string, unknown>) => ({
    url,
    protocol,
    upstreamModel,
    apiKeyEnv,
    ...(settings ? { settings } : {}),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: TTS_MODELS.deepgram,
    modality: 'tts',
    prices: tts,
    upstream: up(peers.deepgram.url, 'deepgram', 'aura-2', KEY_ENVS.deepgram),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: TTS_MODELS.cartesia,
    modality: 'tts',
    prices: tts,
    upstream: up(peers.cartesia.url, 'cartesia', 'sonic-3', KEY_ENVS.cartesia),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: TTS_MODELS.elevenlabs,
    modality: 'tts',
    prices: tts,
    upstream: up(peers.elevenlabs.url, 'elevenlabs', 'eleven_flash_v2_5', KEY_ENVS.elevenlabs),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: TTS_MODELS.openai,
    modality: 'tts',
    prices: tts,
    upstream: up(openaiSpeech.url, 'openai', 'bench-tts', KEY_ENVS.openai),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: STT_MODELS.deepgram,
    modality: 'stt',
    prices: stt,
    upstream: up(peers.deepgram.url, 'deepgram', 'nova-3', KEY_ENVS.deepgram),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: STT_MODELS.cartesia,
    modality: 'stt',
    prices: stt,
    upstream: up(peers.cartesia.url, 'cartesia', 'ink-whisper', KEY_ENVS.cartesia),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: STT_MODELS['openai-realtime'],
    modality: 'stt',
    prices: stt,
    upstream: up(peers.realtime.url, 'openai-realtime', 'gpt-4o-transcribe', KEY_ENVS.realtime, { dialect: 'ga' }),
  });
  await upsertModel(db.prisma, checkProtocol, {
    id: STT_MODELS.openai,
    modality: 'stt',
    prices: stt,
    upstream: up(peers.openai.url, 'openai', 'whisper-1', KEY_ENVS.openai),
  });
  // Platform voices (every org sees them).
  const voices = {} as Record<keyof typeof TTS_MODELS, string>;
  for (const p of Object.keys(TTS_MODELS) as (keyof typeof TTS_MODELS)[]) {
    const id = newId('voice');
    await db.prisma.voice.create({ data: { id, orgId: null, kind: 'library', name: `bench ${p}`, tags: [] } });
    await mapVoiceToEngine(db.prisma, { voiceId: id, modelId: TTS_MODELS[p], upstreamId: ENGINE_VOICES[p] });
    voices[p] = id;
  }
  await db.close();
  return { databaseUrl, key: key.key, voices };
}

const fx = await fixture();
const gateway = await startBundled('bench/gateway-server.ts', {
  SVC_DATA_DIR: dataDir,
  DATABASE_URL: fx.databaseUrl,
  SVC_MODELS_FILE: '/nonexistent',
  // No periodic health checks against the peers while measuring.
  SVC_HEALTH_CHECK_SECONDS: '3600',
  [KEY_ENVS.deepgram]: peers.deepgram.key,
  [KEY_ENVS.cartesia]: peers.cartesia.key,
  [KEY_ENVS.elevenlabs]: peers.elevenlabs.key,
  [KEY_ENVS.realtime]: peers.realtime.key,
  [KEY_ENVS.openai]: peers.openai.key,
});
watch('the gateway (bench/gateway-server.ts)', gateway);
const GW = gateway.url;
const GW_AUTH = { authorization: `Bearer ${fx.key}` };

// ---------------------------------------------------------------------------------------------
// Peer clock and connection records

let clockOffset = 0; // peer clock - this clock
let clockRtt = 0;
async function syncClock(): Promise<void> {
  let best = { rtt: Infinity, offset: 0 };
  for (let i = 0; i < 40; i++) {
    const t0 = wallNow();
    const { body } = await control<{ now: number }>('/clock');
    const t1 = wallNow();
    if (t1 - t0 < best.rtt) best = { rtt: t1 - t0, offset: body.now - (t0 + t1) / 2 };
  }
  clockOffset = best.offset;
  clockRtt = best.rtt;
}
const peerCount = async (kind: PeerKind) => (await control<{ count: number }>(`/count?kind=${kind}`)).body.count;
async function peerWait(kind: PeerKind, index: number, what: 'open' | 'close', timeoutMs = 5000): Promise<ConnectionTimes> {
  const { status, body } = await control<ConnectionTimes & { error?: string }>(`/wait?kind=${kind}&index=${index}&what=${what}&timeoutMs=${timeoutMs}`);
  if (status !== 200) throw new Error(body.error ?? `wait ${kind}#${index}: ${status}`);
  if (what === 'close' && body.closedAt === null) throw new Error(`the peer's ${kind} connection #${index} did not close within ${timeoutMs} ms`);
  return body;
}
/** Client left at `leftAt` (this clock): ms until the peer saw the engine connection close. */
async function closeAfter(kind: PeerKind, index: number, leftAt: number): Promise<{ ms: number; finishedFirst: boolean }> {
  const c = await peerWait(kind, index, 'close');
  const ms = c.closedAt! - clockOffset - leftAt;
  // Closed before the client left: the engine had finished its answer (nothing to cut).
  return { ms, finishedFirst: ms < 0 || c.early === false };
}

// ---------------------------------------------------------------------------------------------
// Samples, by metric and row

type Path = 'peer' | 'gateway';
interface Row {
  metric: string;
  label: string;
  /** [round][sample] */
  samples: Record<Path, number[][]>;
  notes: string[];
}
const rows = new Map<string, Row>();
const failures = new Map<string, number>();
let round = -1; // -1: warm-up, not recorded
function record(metric: string, label: string, path: Path, ms: number): void {
  if (round < 0) return;
  const key = `${metric}\u0000${label}`;
  let row = rows.get(key);
  if (!row) rows.set(key, (row = { metric, label, samples: { peer: [], gateway: [] }, notes: [] }));
  (row.samples[path][round] ??= []).push(ms);
}
function note(metric: string, label: string, text: string): void {
  if (round < 0) return;
  const row = rows.get(`${metric}\u0000${label}`);
  if (row && !row.notes.includes(text)) row.notes.push(text);
}
async function attempt(what: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    const key = `${what}: ${(e as Error).message}`;
    failures.set(key, (failures.get(key) ?? 0) + 1);
  }
}

// ---------------------------------------------------------------------------------------------
// (1) TTS first byte

const TEXT = 'Hello, thanks for calling Acme support. How can I help you today?';
const LONG_TEXT = 'Thanks for waiting. I found your order from last Tuesday and it should arrive on Friday before noon. '.repeat(60).slice(0, 5000);
const OTHER_RATE = 16000;
type TtsProtocol = keyof typeof TTS_MODELS;

interface HttpCall {
  url: string;
  headers: Record<string, string>;
  body: string;
}

function directSpeech(p: TtsProtocol, rate: number, text: string): HttpCall {
  const json = { 'content-type': 'application/json' };
  switch (p) {
    case 'deepgram': {
      const q = new URLSearchParams({ model: ENGINE_VOICES.deepgram, encoding: 'linear16', sample_rate: String(rate), container: 'none' });
      return { url: `${peers.deepgram.url}/v1/speak?${q}`, headers: { ...json, authorization: `Token ${peers.deepgram.key}` }, body: JSON.stringify({ text }) };
    }
    case 'cartesia':
      return {
        url: `${peers.cartesia.url}/tts/bytes`,
        headers: { ...json, authorization: `Bearer ${peers.cartesia.key}`, 'cartesia-version': '2026-03-01' },
        body: JSON.stringify({
          model_id: 'sonic-3',
          transcript: text,
          voice: { mode: 'id', id: ENGINE_VOICES.cartesia },
          output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: rate },
        }),
      };
    case 'elevenlabs':
      return {
        url: `${peers.elevenlabs.url}/v1/text-to-speech/${ENGINE_VOICES.elevenlabs}/stream?output_format=pcm_${rate}`,
        headers: { ...json, 'xi-api-key': peers.elevenlabs.key },
        body: JSON.stringify({ text, model_id: 'eleven_flash_v2_5' }),
      };
    case 'openai':
      return {
        url: `${openaiSpeech.url}/audio/speech`,
        headers: { ...json, authorization: `Bearer ${peers.openai.key}` },
        body: JSON.stringify({ model: 'bench-tts', input: text, voice: ENGINE_VOICES.openai, response_format: 'pcm' }),
      };
  }
}

function gatewaySpeech(p: TtsProtocol, rate: number, text: string): HttpCall {
  return {
    url: `${GW}/tts/bytes`,
    headers: { 'content-type': 'application/json', ...GW_AUTH },
    body: JSON.stringify({
      model_id: TTS_MODELS[p],
      transcript: text,
      voice: { mode: 'id', id: fx.voices[p] },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: rate },
      stream: true,
    }),
  };
}

const httpAgent = new Agent({ connections: 8, keepAliveTimeout: 60_000 });
/** ms from sending the request to the first body byte; the body is read to its end. */
async function firstByte(c: HttpCall): Promise<number> {
  const t0 = performance.now();
  const res = await request(c.url, { method: 'POST', headers: c.headers, body: c.body, dispatcher: httpAgent });
  let first = NaN;
  let bytes = 0;
  for await (const chunk of res.body) {
    if (Number.isNaN(first) && (chunk as Buffer).length > 0) first = performance.now() - t0;
    bytes += (chunk as Buffer).length;
  }
  if (res.statusCode !== 200 || bytes === 0) throw new Error(`POST ${new URL(c.url).pathname} answered ${res.statusCode} with ${bytes} bytes`);
  return first;
}

/** Each engine at its own rate (24 kHz: every protocol's default) and at OTHER_RATE; the peer asked directly for the same output where it can make it. */
const TTS_CASES: { p: TtsProtocol; rate: number; label: string }[] = (['deepgram', 'cartesia', 'elevenlabs', 'openai'] as const).flatMap((p) => [
  { p, rate: 24000, label: `${p} 24000 (engine's rate)` },
  { p, rate: OTHER_RATE, label: `${p} ${OTHER_RATE} (resampled by the gateway${p === 'openai' ? '; peer: 24000, its only pcm' : ''})` },
]);

async function ttsFirstBytes(samples: number): Promise<void> {
  for (let i = 0; i < samples; i++) {
    // Every case, peer and gateway back to back, in an order that rotates each sample.
    const order = TTS_CASES.flatMap((c) => [
      { c, path: 'peer' as Path },
      { c, path: 'gateway' as Path },
    ]);
    const start = (i * 3) % order.length;
    for (const { c, path } of [...order.slice(start), ...order.slice(0, start)]) {
      const peerRate = c.p === 'openai' ? 24000 : c.rate;
      await attempt(`tts ${c.label} ${path}`, async () =>
        record(
          'first audio byte (TTS, POST /tts/bytes stream:true)',
          c.label,
          path,
          await firstByte(path === 'peer' ? directSpeech(c.p, peerRate, TEXT) : gatewaySpeech(c.p, c.rate, TEXT)),
        ),
      );
    }
  }
}

/** One synthesis on a fresh connection, dropped right after its first body byte: when the client left (this clock). */
function leaveAfterFirstByte(c: HttpCall): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(c.url, { method: 'POST', headers: { ...c.headers, 'content-length': Buffer.byteLength(c.body) }, agent: false }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`POST ${new URL(c.url).pathname} answered ${res.statusCode}`));
      res.once('data', () => {
        const leftAt = wallNow();
        req.destroy();
        resolve(leftAt);
      });
    });
    req.on('error', (e) => (e.message === 'socket hang up' || (e as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(e)));
    req.end(c.body);
  });
}

const TTS_LEAVE_KINDS: Partial<Record<TtsProtocol, PeerKind>> = { deepgram: 'deepgram-speak', cartesia: 'cartesia-tts', elevenlabs: 'elevenlabs-tts' };
const LEAVE_METRIC = 'client leaving -> engine connection closed';

async function ttsLeaves(samples: number): Promise<void> {
  for (let i = 0; i < samples; i++) {
    for (const [p, kind] of Object.entries(TTS_LEAVE_KINDS) as [TtsProtocol, PeerKind][]) {
      const label = `${p} TTS (5,000 characters, left after the first byte)`;
      for (const path of (i % 2 ? ['gateway', 'peer'] : ['peer', 'gateway']) as Path[]) {
        await attempt(`leave ${label} ${path}`, async () => {
          const index = await peerCount(kind);
          const leftAt = await leaveAfterFirstByte(path === 'peer' ? directSpeech(p, 24000, LONG_TEXT) : gatewaySpeech(p, 24000, LONG_TEXT));
          const { ms, finishedFirst } = await closeAfter(kind, index, leftAt);
          if (finishedFirst) note(LEAVE_METRIC, label, `${path}: the engine had finished its answer before the client left (not counted)`);
          else record(LEAVE_METRIC, label, path, ms);
        });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// (2) Streaming STT

const FRAME_MS = 20;
const BURST_FRAMES = 15; // 0.3 s
const LEAD_FRAMES = 10; // 0.2 s of silence first: the gateway opens the engine at the first audio
const FINAL_TAIL_FRAMES = 5; // 0.1 s of silence before the finalize

/** 16-bit PCM frames of 20 ms: `lead` silent, `burst` of a 300 Hz tone at 0.45 of full scale, `tail` silent. */
function clipFrames(rate: number, lead: number, burst: number, tail: number): Buffer[] {
  const n = (rate * FRAME_MS) / 1000;
  const frames: Buffer[] = [];
  for (let f = 0; f < lead + burst + tail; f++) {
    const b = Buffer.alloc(n * 2);
    if (f >= lead && f < lead + burst) {
      for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(0.45 * 32767 * Math.sin((2 * Math.PI * 300 * ((f - lead) * n + i)) / rate)), i * 2);
    }
    frames.push(b);
  }
  return frames;
}

function wav(pcm: Buffer, rate: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + pcm.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

type Msg = Record<string, any>;
interface Received {
  at: number;
  msg: Msg;
}

/** A WebSocket client that keeps every text message with its arrival time. */
class Wire {
  readonly events: Received[] = [];
  private wake: (() => void) | null = null;
  closed = false;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const at = performance.now();
      let msg: Msg;
      try {
        msg = JSON.parse(data.toString()) as Msg;
      } catch {
        msg = { raw: data.toString() };
      }
      this.events.push({ at, msg });
      this.wake?.();
    });
    ws.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
    ws.on('error', () => {});
  }

  static open(url: string, headers: Record<string, string>): Promise<Wire> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      const wire = new Wire(ws);
      ws.once('open', () => resolve(wire));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`${new URL(url).pathname} refused the upgrade: ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }

  /** The first message from index `from` on that matches, waiting up to timeoutMs; null if none. */
  async find(match: (m: Msg) => boolean, timeoutMs: number, from = 0): Promise<Received | null> {
    const deadline = performance.now() + timeoutMs;
    for (let i = from; ;) {
      for (; i < this.events.length; i++) if (match(this.events[i]!.msg)) return this.events[i]!;
      const left = deadline - performance.now();
      if (this.closed || left <= 0) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          this.wake = null;
          resolve();
        };
      });
    }
  }
}

type SttProtocol = 'deepgram' | 'cartesia' | 'openai-realtime';
interface SttDirect {
  rate: number;
  kind: PeerKind;
  open(): Promise<Wire>;
  audio(w: Wire, frame: Buffer): void;
  finalize(w: Wire): void;
  interim(m: Msg): boolean;
  final(m: Msg): boolean;
  /** Index of the frame that makes the peer send its first transcript, given the leading silent frames. */
  trigger(lead: number): number;
}

const REALTIME_SILENCE_MS = 500; // the protocol's default silence_duration_ms, the peer's too
const STT: Record<SttProtocol, SttDirect> = {
  deepgram: {
    rate: 16000,
    kind: 'deepgram-listen',
    open: () => {
      // What gateway/upstreams/protocols/deepgram.ts asks for (engine turns on).
      const q = new URLSearchParams({
        model: 'nova-3',
        punctuate: 'true',
        smart_format: 'true',
        encoding: 'linear16',
        sample_rate: '16000',
        channels: '1',
        interim_results: 'true',
        vad_events: 'true',
        endpointing: '300',
        utterance_end_ms: '1000',
      });
      return Wire.open(`${peers.deepgram.url.replace(/^http/, 'ws')}/v1/listen?${q}`, { authorization: `Token ${peers.deepgram.key}` });
    },
    audio: (w, f) => w.ws.send(f),
    finalize: (w) => w.ws.send(JSON.stringify({ type: 'Finalize' })),
    interim: (m) => m.type === 'Results' && m.is_final === false && Boolean(m.channel?.alternatives?.[0]?.transcript),
    final: (m) => m.type === 'Results' && m.is_final === true,
    // A word's interim is sent when its burst ends: the first silent frame.
    trigger: (lead) => lead + BURST_FRAMES,
  },
  cartesia: {
    rate: 16000,
    kind: 'cartesia-stt',
    open: () =>
      Wire.open(`${peers.cartesia.url.replace(/^http/, 'ws')}/stt/websocket?model=ink-whisper&encoding=pcm_s16le&sample_rate=16000`, {
        authorization: `Bearer ${peers.cartesia.key}`,
        'cartesia-version': '2026-03-01',
      }),
    audio: (w, f) => w.ws.send(f),
    finalize: (w) => w.ws.send('finalize'),
    interim: (m) => m.type === 'transcript' && m.is_final === false && typeof m.text === 'string' && m.text.trim() !== '',
    final: (m) => m.type === 'transcript' && m.is_final === true,
    // An interim as soon as a burst starts.
    trigger: (lead) => lead,
  },
  'openai-realtime': {
    rate: 24000,
    kind: 'realtime',
    open: async () => {
      const w = await Wire.open(`${peers.realtime.url.replace(/^http/, 'ws')}/realtime?intent=transcription`, {
        authorization: `Bearer ${peers.realtime.key}`,
      });
      // What the protocol's GA dialect sends (openai-realtime/dialects.ts), server VAD on.
      w.ws.send(
        JSON.stringify({
          type: 'session.update',
          session: {
            type: 'transcription',
            audio: {
              input: {
                format: { type: 'audio/pcm', rate: 24000 },
                transcription: { model: 'gpt-4o-transcribe' },
                turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: REALTIME_SILENCE_MS },
              },
            },
          },
        }),
      );
      if (!(await w.find((m) => m.type === 'session.updated', 5000))) throw new Error('the realtime peer did not confirm the session');
      return w;
    },
    audio: (w, f) => w.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: f.toString('base64') })),
    finalize: (w) => w.ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' })),
    interim: (m) => m.type === 'conversation.item.input_audio_transcription.delta',
    final: (m) => m.type === 'conversation.item.input_audio_transcription.completed',
    // Server VAD ends the turn at the frame that completes 500 ms of silence after the burst.
    trigger: (lead) => lead + BURST_FRAMES + REALTIME_SILENCE_MS / FRAME_MS - 1,
  },
};

const gwInterim = (m: Msg) => m.type === 'transcript' && m.is_final === false;
const gwFinal = (m: Msg) => m.type === 'transcript' && m.is_final === true;

async function openGatewaySession(model: string, rate: number): Promise<Wire> {
  const q = new URLSearchParams({ model, sample_rate: String(rate), encoding: 'pcm_s16le' });
  const w = await Wire.open(`${GW.replace(/^http/, 'ws')}/stt/websocket?${q}`, GW_AUTH);
  const started = await w.find((m) => m.type === 'session.started' || m.type === 'error', 5000);
  if (started?.msg.type !== 'session.started') throw new Error(`the gateway did not start the session: ${JSON.stringify(started?.msg ?? 'timeout')}`);
  return w;
}

/** Sends frames in real time (one every 20 ms), until `stop()`; returns when each was sent. */
async function stream(frames: Buffer[], send: (f: Buffer) => void, stop: () => boolean = () => false): Promise<number[]> {
  const sentAt: number[] = [];
  const start = performance.now();
  for (let i = 0; i < frames.length; i++) {
    await sleep(start + i * FRAME_MS - performance.now());
    if (stop()) break;
    sentAt.push(performance.now());
    send(frames[i]!);
  }
  return sentAt;
}

const FIRST_METRIC = 'first transcript (streaming STT, first interim)';
const FINAL_METRIC = 'final transcript after finalize (streaming STT)';

/** One session: first interim from its trigger frame; then the client leaves and the peer's close is timed. */
async function firstTranscript(p: SttProtocol, path: Path, lead: number, label: string, measureLeave: boolean): Promise<void> {
  const d = STT[p];
  const index = await peerCount(d.kind);
  const w = path === 'peer' ? await d.open() : await openGatewaySession(STT_MODELS[p], d.rate);
  try {
    const trigger = d.trigger(lead);
    const frames = clipFrames(d.rate, lead, BURST_FRAMES, trigger - lead - BURST_FRAMES + 15);
    const match = path === 'peer' ? d.interim : gwInterim;
    let got: Received | null = null;
    const found = w.find(match, frames.length * FRAME_MS + 3000).then((e) => (got = e));
    const sentAt = await stream(frames, path === 'peer' ? (f) => d.audio(w, f) : (f) => w.ws.send(f), () => got !== null);
    const e = await found;
    if (!e) throw new Error(`no interim transcript (${w.events.map((x) => x.msg.type).join(',')})`);
    if (sentAt.length <= trigger) throw new Error(`the interim came before frame ${trigger} was sent (after ${sentAt.length} frames)`);
    record(FIRST_METRIC, label, path, e.at - sentAt[trigger]!);
    if (measureLeave) {
      const leftAt = wallNow();
      w.ws.terminate();
      const { ms, finishedFirst } = await closeAfter(d.kind, index, leftAt);
      if (finishedFirst) note(LEAVE_METRIC, `${p} STT socket`, `${path}: the engine closed before the client left (not counted)`);
      else record(LEAVE_METRIC, `${p} STT socket`, path, ms);
    }
  } finally {
    w.ws.terminate();
  }
}

/** One session: the burst, 0.1 s of silence, finalize right after the last frame; time to the final transcript. */
async function finalAfterFinalize(p: SttProtocol, path: Path): Promise<void> {
  const d = STT[p];
  const w = path === 'peer' ? await d.open() : await openGatewaySession(STT_MODELS[p], d.rate);
  try {
    const frames = clipFrames(d.rate, LEAD_FRAMES, BURST_FRAMES, FINAL_TAIL_FRAMES);
    await stream(frames, path === 'peer' ? (f) => d.audio(w, f) : (f) => w.ws.send(f));
    const from = w.events.length;
    const t0 = performance.now();
    if (path === 'peer') d.finalize(w);
    else w.ws.send(JSON.stringify({ type: 'finalize' }));
    const e = await w.find(path === 'peer' ? d.final : gwFinal, 5000, from);
    if (!e)
      throw new Error(
        `no final transcript after finalize (${w.events
          .slice(from)
          .map((x) => x.msg.type)
          .join(',')})`,
      );
    record(FINAL_METRIC, p, path, e.at - t0);
  } finally {
    w.ws.terminate();
  }
}

// openai: a batch engine the gateway streams (segmented-streaming.ts).
const OPENAI_RATE = 16000;
const openaiClip = Buffer.concat(clipFrames(OPENAI_RATE, LEAD_FRAMES, BURST_FRAMES, FINAL_TAIL_FRAMES));
/** The multipart body the gateway's openai protocol sends for this audio (openai.ts transcription). */
const openaiForm = await (async () => {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(wav(openaiClip, OPENAI_RATE))], { type: 'audio/wav' }), 'audio.wav');
  form.set('model', 'whisper-1');
  form.set('response_format', 'verbose_json');
  form.append('timestamp_granularities[]', 'word');
  const encoded = new Response(form);
  return { contentType: encoded.headers.get('content-type')!, body: Buffer.from(await encoded.arrayBuffer()) };
})();
const openaiTranscriptionCall = () => ({
  url: `${peers.openai.url}/audio/transcriptions`,
  headers: { 'content-type': openaiForm.contentType, authorization: `Bearer ${peers.openai.key}` },
});

async function openaiFinal(path: Path): Promise<void> {
  if (path === 'peer') {
    const c = openaiTranscriptionCall();
    const t0 = performance.now();
    const res = await request(c.url, { method: 'POST', headers: c.headers, body: openaiForm.body, dispatcher: httpAgent });
    const body = (await res.body.json()) as { text?: string };
    if (res.statusCode !== 200 || !body.text) throw new Error(`POST /audio/transcriptions answered ${res.statusCode}: ${JSON.stringify(body)}`);
    record(FINAL_METRIC, 'openai (batch engine, segmented by the gateway)', path, performance.now() - t0);
    return;
  }
  const w = await openGatewaySession(STT_MODELS.openai, OPENAI_RATE);
  try {
    await stream(clipFrames(OPENAI_RATE, LEAD_FRAMES, BURST_FRAMES, FINAL_TAIL_FRAMES), (f) => w.ws.send(f));
    const from = w.events.length;
    const t0 = performance.now();
    w.ws.send(JSON.stringify({ type: 'finalize' }));
    const e = await w.find(gwFinal, 5000, from);
    if (!e)
      throw new Error(
        `no final transcript after finalize (${w.events
          .slice(from)
          .map((x) => x.msg.type)
          .join(',')})`,
      );
    record(FINAL_METRIC, 'openai (batch engine, segmented by the gateway)', path, e.at - t0);
  } finally {
    w.ws.terminate();
  }
}

/** The peer holds the transcription; the client leaves once the peer has it: until the peer sees that request's connection close. */
async function openaiLeave(path: Path): Promise<void> {
  const label = 'openai STT (final transcription request in flight)';
  const index = await peerCount('openai-transcription');
  let leftAt: number;
  if (path === 'peer') {
    const c = openaiTranscriptionCall();
    const req = httpRequest(c.url, { method: 'POST', headers: { ...c.headers, 'content-length': openaiForm.body.length }, agent: false });
    req.on('error', () => {});
    req.end(openaiForm.body);
    await peerWait('openai-transcription', index, 'open');
    leftAt = wallNow();
    req.destroy();
  } else {
    const w = await openGatewaySession(STT_MODELS.openai, OPENAI_RATE);
    await stream(clipFrames(OPENAI_RATE, LEAD_FRAMES, BURST_FRAMES, FINAL_TAIL_FRAMES), (f) => w.ws.send(f));
    w.ws.send(JSON.stringify({ type: 'finalize' }));
    await peerWait('openai-transcription', index, 'open');
    leftAt = wallNow();
    w.ws.terminate();
  }
  const { ms, finishedFirst } = await closeAfter('openai-transcription', index, leftAt);
  if (finishedFirst) note(LEAVE_METRIC, label, `${path}: the engine answered before the client left (not counted)`);
  else record(LEAVE_METRIC, label, path, ms);
}

const REALTIME_ALIGNED = 'openai-realtime (ga; trigger at an odd frame)';
const REALTIME_SPLIT = 'openai-realtime (ga; trigger at an even frame)';

async function sttRound(samples: number, leaves: number): Promise<void> {
  for (let i = 0; i < samples; i++) {
    const paths: Path[] = i % 2 ? ['gateway', 'peer'] : ['peer', 'gateway'];
    for (const path of paths) {
      await attempt(`first deepgram ${path}`, () => firstTranscript('deepgram', path, LEAD_FRAMES, 'deepgram', true));
      await attempt(`first cartesia ${path}`, () => firstTranscript('cartesia', path, LEAD_FRAMES, 'cartesia', true));
      // Realtime's trigger with 10 lead frames is frame 49; with 9 it is frame 48 (see the header).
      await attempt(`first realtime ${path}`, () => firstTranscript('openai-realtime', path, LEAD_FRAMES, REALTIME_ALIGNED, true));
      await attempt(`first realtime-split ${path}`, () => firstTranscript('openai-realtime', path, LEAD_FRAMES - 1, REALTIME_SPLIT, false));
      for (const p of ['deepgram', 'cartesia', 'openai-realtime'] as const) await attempt(`final ${p} ${path}`, () => finalAfterFinalize(p, path));
      await attempt(`final openai ${path}`, () => openaiFinal(path));
    }
  }
  await control('/openai-hold?on=1', 'POST');
  try {
    for (let i = 0; i < leaves; i++)
      for (const path of (i % 2 ? ['gateway', 'peer'] : ['peer', 'gateway']) as Path[]) await attempt(`leave openai ${path}`, () => openaiLeave(path));
  } finally {
    await control('/openai-hold?on=0', 'POST');
  }
}

// ---------------------------------------------------------------------------------------------
// Run

const started = new Date();
const command = `npx tsx bench/upstream-streaming.ts ${process.argv.slice(2).join(' ')}`.trim();
try {
  await syncClock();
  // Warm-up (JIT, connection pools, SQLite pages), not recorded.
  await ttsFirstBytes(3);
  await ttsLeaves(1);
  await sttRound(1, 1);
  const offsets: number[] = [];
  for (round = 0; round < ROUNDS; round++) {
    await syncClock();
    offsets.push(clockOffset);
    process.stderr.write(`round ${round + 1}/${ROUNDS}: tts...`);
    await ttsFirstBytes(TTS_SAMPLES);
    process.stderr.write(' tts leaving...');
    await ttsLeaves(LEAVE_SAMPLES);
    process.stderr.write(' stt...');
    await sttRound(STT_SAMPLES, LEAVE_SAMPLES);
    process.stderr.write(' done\n');
  }

  console.log(`\n# Gateway-added latency per upstream protocol (bench/upstream-streaming.ts)\n`);
  console.log(`- date: ${started.toISOString()}`);
  console.log(`- command: \`${command}\``);
  console.log(
    `- machine: ${availableParallelism()} cores (${cpus()[0]?.model ?? 'unknown cpu'}), load average at the end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; Node ${process.version}`,
  );
  console.log('- gateway: key auth, rate limit, credit reservation, debits (SQLite); processes: this client, the gateway, the peers, the openai speech server');
  console.log(
    `- ${ROUNDS} rounds after a warm-up; per round: ${TTS_SAMPLES} first-byte samples per case, ${STT_SAMPLES} STT sessions per case and path, ${LEAVE_SAMPLES} client-leaving samples per case and path`,
  );
  console.log(
    `- peer clock offset ${offsets.map((o) => o.toFixed(3)).join(' / ')} ms (min RTT ${clockRtt.toFixed(3)} ms): client-leaving times are +/- half that RTT`,
  );
  console.log(`- p50/p90: over all samples of all rounds; added p50: median over rounds of (gateway p50 - peer p50); x: median of per-round p50 ratios`);
  const metrics = [...new Set([...rows.values()].map((r) => r.metric))];
  for (const metric of metrics) {
    const withTarget = metric !== LEAVE_METRIC && metric !== FINAL_METRIC;
    console.log(`\n## ${metric}${withTarget ? ' (target: added <= 5 ms at p50)' : ''}\n`);
    const out: Record<string, string | number>[] = [];
    const notes: string[] = [];
    for (const r of [...rows.values()].filter((x) => x.metric === metric)) {
      const all = (path: Path) => r.samples[path].flat().sort((a, b) => a - b);
      const peer = all('peer');
      const gw = all('gateway');
      const rounds = Math.min(r.samples.peer.length, r.samples.gateway.length);
      const perRound = (f: (p: number[], g: number[]) => number) =>
        median(
          Array.from({ length: rounds }, (_, k) =>
            f(
              [...(r.samples.peer[k] ?? [])].sort((a, b) => a - b),
              [...(r.samples.gateway[k] ?? [])].sort((a, b) => a - b),
            ),
          ).filter(Number.isFinite),
        );
      const added = perRound((p, g) => median(g) - median(p));
      const ratio = perRound((p, g) => median(g) / median(p));
      const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
      out.push({
        protocol: r.label,
        'peer alone p50 / p90 ms': peer.length ? `${fmt(median(peer))} / ${fmt(percentile(peer, 90))}` : '-',
        'through gateway p50 / p90 ms': gw.length ? `${fmt(median(gw))} / ${fmt(percentile(gw, 90))}` : '-',
        'added p50 ms': fmt(added),
        x: Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : '-',
        n: `${peer.length} / ${gw.length}`,
        ...(withTarget ? { '<= 5 ms': Number.isFinite(added) ? (added <= 5 ? 'yes' : 'NO') : '-' } : {}),
      });
      for (const n of r.notes) notes.push(`${r.label}: ${n}`);
    }
    console.log(table(out));
    for (const n of notes) console.log(`- ${n}`);
  }
  if (failures.size) {
    console.log('\n## Failed samples (not counted)\n');
    for (const [what, n] of failures) console.log(`- ${n}x ${what}`);
  }
} finally {
  await Promise.allSettled([httpAgent.close(), controlAgent.close()]);
  cleanup();
}
