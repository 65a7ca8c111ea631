// Streaming STT benchmark (local-stt, pocketsphinx) against the real gateway process
// (bench/gateway-server.ts on a fresh SQLite fixture; the gateway seeds local-stt itself).
// Test speech is made with flite (16 kHz, several sentences).
//
// (a) Gateway-added latency, --rounds rounds, each a fresh recognizer / session on the same
//     ~10 s clip (three sentences, slt, no pause long enough to end a turn; the session uses
//     turn_detection=patient so no turn ends mid-clip):
//       - engine alone: createRecognizer({ sampleRate: 16000 }) in this process (its own
//         worker thread, as in the gateway), 100 ms chunks pushed back to back; per chunk the
//         time push() takes (post to the worker, decode, partial back) and the partial it
//         returned.
//       - through the gateway: GET /stt/websocket (model=local-stt, 16 kHz pcm_s16le); per
//         100 ms binary frame: send it, then wait for the next `transcript` event, or 150 ms
//         if none comes (the gateway only sends a partial when it changed); the next frame
//         is sent only then, so every frame meets an idle pipeline, as with back-to-back
//         pushes.
//     Decoders are never reused and the audio is identical, so both paths produce the same
//     sequence of partials. Compared are the frames whose partial changed in the direct run
//     and for which the gateway sent an event with that same text in response to that frame:
//     send -> event against push() time, medians, and the median of the per-frame paired
//     differences (same round). Both paths wait 1.5 s after opening before the first chunk:
//     a new decoder makes the worker load a spare one (~0.35 s of its CPU), which would
//     otherwise land on the first pushes of one path only. Target: the gateway adds <= 5 ms.
// (b) Concurrency: for each worker setting (the gateway's default SVC_STT_WORKERS = cores - 1,
//     then SVC_STT_WORKERS=2; one gateway process each) and each N in --sessions: N sessions
//     (turn_detection=balanced) are opened and all `session.started` awaited (plus 1 s for
//     the spare decoder); then each streams in real time (a 100 ms frame every 100 ms,
//     session k phase-shifted by k/N of a frame and starting k/N of the way into a ~20 s
//     clip of sentences from three flite voices with 1 s pauses, looped) for --seconds; then
//     sends {"type":"finalize"}. Lag per session: from the finalize (sent right after its
//     last frame) to `flush_done`, which the gateway sends once all audio before it is
//     decoded and the final transcript sent: the backlog the session had built up (an idle
//     recognizer answers in ~0.1 s). A session keeps up when that is <= 1 s. The wait is
//     capped at 10 s (keepalives sent meanwhile, else the gateway's 15 s idle timer closes
//     a session that is only waiting for its own backlog).
//     Also reported: the interim lag (audio sent so far minus the end time of the newest
//     word in each transcript event; it includes the recognizer's own delay before a word
//     shows up), sessions closed by the gateway, gateway RSS before and peak (rssMb), and the
//     largest N where every session kept up.
//
// Default run ~5 min on 2 cores; --seconds 30 for longer streams (~6 min).
//   npx tsx bench/stt.ts [--sessions 1,5,10,20] [--seconds 20] [--rounds 3] [--workers default,2]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { configureRecognizer, createRecognizer, shutdownRecognizers } from '../gateway/upstreams/pocketsphinx/recognizer.ts';
import { loadConfig } from '../server/config/env.ts';
import { median, percentile, table } from './lib/load.ts';
import { rssMb, startBundled } from './lib/processes.ts';
import { voiceFixture } from './lib/voice-fixture.ts';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '1,5,10,20' },
    seconds: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: 'default,2' },
  },
});
const sessionCounts = values.sessions.split(',').map(Number);
const streamSeconds = Number(values.seconds);
const rounds = Number(values.rounds);
const workerSettings = values.workers.split(',');

const RATE = 16000;
const FRAME = RATE / 10; // 100 ms
const KEEP_UP_MS = 1000;
/** How long a session waits for flush_done (sending keepalives meanwhile) before giving up. */
const FINALIZE_TIMEOUT_MS = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

// ---------- test speech ----------
const tmp = mkdtempSync(join(tmpdir(), 'svc-bench-stt-'));
function flite(voice: string, text: string): Int16Array {
  const file = join(tmp, 'speech.wav');
  execFileSync('flite', ['-voice', voice, '-t', text, '-o', file]);
  const b = readFileSync(file);
  if (b.readUInt32LE(24) !== RATE) throw new Error(`flite voice ${voice} is not ${RATE} Hz`);
  return new Int16Array(b.buffer.slice(b.byteOffset + 44, b.byteOffset + b.length - ((b.length - 44) % 2)));
}
/** Low-level noise (about -66 dBFS) instead of digital silence, as a microphone gives. */
function quiet(seconds: number, seed: number): Int16Array {
  const out = new Int16Array(Math.round(seconds * RATE));
  let x = seed;
  for (let i = 0; i < out.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = ((x >>> 16) % 33) - 16;
  }
  return out;
}
function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
const clipA = concat([
  quiet(0.3, 1),
  flite('slt', 'Hello, I would like to check on my order. It was supposed to arrive yesterday. Can you tell me where it is now and when it will be delivered?'),
  quiet(0.3, 2),
]);
const SENTENCES: [string, string][] = [
  ['slt', 'Please call me tomorrow morning about the meeting.'],
  ['rms', 'The weather today is sunny with a light breeze.'],
  ['awb', 'We need to order more paper for the office printer.'],
  ['slt', 'Turn off the lights when you leave the room.'],
  ['rms', 'My account number is four five six seven.'],
];
const PAUSE_S = 1.0;
const clipB = concat(SENTENCES.flatMap(([voice, text], i) => [flite(voice, text), quiet(PAUSE_S, 10 + i)]));

const frames = (pcm: Int16Array) => Array.from({ length: Math.ceil(pcm.length / FRAME) }, (_, i) => pcm.subarray(i * FRAME, (i + 1) * FRAME));
const bytesOf = (pcm: Int16Array) => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);

// ---------- gateway sessions ----------
interface Transcript {
  type: 'transcript';
  is_final: boolean;
  text: string;
  words: { word: string; start: number; end: number }[];
}
type Event = { type: string; [k: string]: unknown };

/** A WebSocket session with a queue of received events and a way to wait for the next one. */
class Session {
  readonly ws: WebSocket;
  private waiters: ((e: (Event & { at: number }) | null) => void)[] = [];
  private queued: (Event & { at: number })[] = [];
  closed: { code: number; reason: string } | null = null;
  onEvent: ((e: Event & { at: number }) => void) | null = null;

  constructor(url: string, key: string, turnDetection: string) {
    this.ws = new WebSocket(
      `${url.replace(/^http/, 'ws')}/stt/websocket?model=local-stt&sample_rate=${RATE}&encoding=pcm_s16le&turn_detection=${turnDetection}`,
      { headers: { authorization: `Bearer ${key}` } },
    );
    this.ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const e = { ...(JSON.parse(data.toString()) as Event), at: performance.now() };
      this.onEvent?.(e);
      const w = this.waiters.shift();
      if (w) w(e);
      else this.queued.push(e);
    });
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const w of this.waiters.splice(0)) w(null);
    });
    this.ws.on('error', () => {});
  }

  /** The next event (of `type`, if given; others are dropped), or null after timeoutMs / close. */
  async next(timeoutMs: number, type?: string): Promise<(Event & { at: number }) | null> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      let e = this.queued.shift() ?? null;
      if (!e) {
        if (this.closed) return null;
        const left = deadline - performance.now();
        if (left <= 0) return null;
        e = await new Promise<(Event & { at: number }) | null>((resolve) => {
          const timer = setTimeout(() => {
            this.waiters = this.waiters.filter((w) => w !== waiter);
            resolve(null);
          }, left);
          const waiter = (v: (Event & { at: number }) | null) => {
            clearTimeout(timer);
            resolve(v);
          };
          this.waiters.push(waiter);
        });
        if (!e) return null;
      }
      if (!type || e.type === type) return e;
    }
  }

  /** Drops events received so far (late ones must not be taken for the next frame's). */
  drain(): void {
    this.queued.length = 0;
  }

  async started(): Promise<void> {
    const e = await this.next(60_000, 'session.started');
    if (!e) throw new Error(`session did not start (${this.closed ? `closed ${this.closed.code} ${this.closed.reason}` : 'timeout'})`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'close' }));
    const done = new Promise<void>((r) => this.ws.once('close', () => r()));
    await Promise.race([done, sleep(5000)]);
    if (!this.closed) this.ws.terminate();
  }
}

const fx = await voiceFixture();
const procs: { child: { kill(sig: NodeJS.Signals): boolean } }[] = [];
const cleanup = () => {
  for (const p of procs) p.child.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
  fx.remove();
};
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

try {
  // ---------- (a) gateway-added latency ----------
  // The engine alone gets the recognizer settings the gateway's configuration gives it.
  configureRecognizer(loadConfig({ ...process.env, ...fx.env }).engines.pocketsphinx);
  let gateway = await startBundled('bench/gateway-server.ts', fx.env);
  procs.push(gateway);
  const framesA = frames(clipA);
  const direct: { ms: number[]; text: string[]; changed: boolean[] }[] = [];
  const viaGateway: { ms: number[]; text: (string | null)[] }[] = [];
  for (let round = 0; round < rounds + 1; round++) {
    // Round 0 is a warm-up (worker start, model load, JIT) for both paths.
    const r = await createRecognizer({ sampleRate: RATE });
    await sleep(1500);
    const d = { ms: [] as number[], text: [] as string[], changed: [] as boolean[] };
    let last = '';
    for (const f of framesA) {
      const t = performance.now();
      const h = await r.push(f);
      d.ms.push(performance.now() - t);
      d.text.push(h.text);
      d.changed.push(h.text !== '' && h.text !== last);
      if (h.text) last = h.text;
    }
    await r.finalize();
    r.close();

    const s = new Session(gateway.url, fx.key, 'patient');
    await s.started();
    await sleep(1500);
    const g = { ms: [] as number[], text: [] as (string | null)[] };
    for (const f of framesA) {
      s.drain();
      const t = performance.now();
      s.ws.send(bytesOf(f));
      const e = (await s.next(150, 'transcript')) as (Transcript & { at: number }) | null;
      g.ms.push(e ? e.at - t : NaN);
      g.text.push(e && !e.is_final ? e.text : null);
    }
    await s.close();
    if (round > 0) {
      direct.push(d);
      viaGateway.push(g);
    }
  }
  await shutdownRecognizers(); // this process's own worker
  const dMs: number[] = [];
  const gMs: number[] = [];
  const paired: number[] = [];
  let changedFrames = 0;
  let mismatched = 0;
  for (let round = 0; round < direct.length; round++) {
    const d = direct[round]!;
    const g = viaGateway[round]!;
    for (let i = 0; i < framesA.length; i++) {
      if (!d.changed[i]) continue;
      changedFrames++;
      if (g.text[i] !== d.text[i]) {
        mismatched++;
        continue;
      }
      dMs.push(d.ms[i]!);
      gMs.push(g.ms[i]!);
      paired.push(g.ms[i]! - d.ms[i]!);
    }
  }
  const allDirect = direct.flatMap((d) => d.ms).sort((a, b) => a - b);
  dMs.sort((a, b) => a - b);
  gMs.sort((a, b) => a - b);
  console.log(
    `\nSTT gateway-added latency: ${rounds} rounds after a warm-up, ${(clipA.length / RATE).toFixed(1)} s clip in ${framesA.length} frames of 100 ms; ` +
      `${dMs.length} of ${changedFrames} changed-partial frames compared (${mismatched} without the same partial from the gateway for that frame); load average ${loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log(
    table([
      {
        path: 'engine alone: push() round trip, all frames',
        frames: allDirect.length,
        'p50 ms': median(allDirect),
        'p90 ms': percentile(allDirect, 90),
        'max ms': allDirect.at(-1)!,
      },
      {
        path: 'engine alone: push() round trip, compared frames',
        frames: dMs.length,
        'p50 ms': median(dMs),
        'p90 ms': percentile(dMs, 90),
        'max ms': dMs.at(-1)!,
      },
      {
        path: 'gateway: frame sent -> transcript event, compared frames',
        frames: gMs.length,
        'p50 ms': median(gMs),
        'p90 ms': percentile(gMs, 90),
        'max ms': gMs.at(-1)!,
      },
    ]),
  );
  const addedA = median(gMs) - median(dMs);
  console.log(
    `\ngateway adds ${addedA.toFixed(2)} ms at the median (paired per frame: ${median(paired).toFixed(2)} ms, p90 ${percentile(
      [...paired].sort((a, b) => a - b),
      90,
    ).toFixed(2)} ms); target <= 5 ms: ${addedA <= 5 ? 'met' : 'NOT met'}`,
  );
  gateway.child.kill('SIGTERM');
  procs.length = 0;

  // ---------- (b) concurrency ----------
  const framesB = frames(clipB);
  const framesPerSession = Math.round(streamSeconds * 10);
  console.log(
    `\nSTT concurrency: N sessions each streaming in real time for ${streamSeconds} s (a ${(clipB.length / RATE).toFixed(1)} s clip of ${SENTENCES.length} sentences with ${PAUSE_S} s pauses, looped), then finalize; keeps up = flush_done within ${KEEP_UP_MS} ms of the finalize; ${availableParallelism()} cores\n`,
  );
  const rowsB: Record<string, string | number>[] = [];
  const verdicts: string[] = [];
  for (const workers of workerSettings) {
    const env = { ...fx.env, ...(workers === 'default' ? {} : { SVC_STT_WORKERS: workers }) };
    const workerLabel = workers === 'default' ? `default (${Math.max(1, availableParallelism() - 1)})` : workers;
    gateway = await startBundled('bench/gateway-server.ts', env);
    procs.push(gateway);
    const pid = gateway.child.pid!;
    let largestOk = 0;
    for (const n of sessionCounts) {
      const rssBefore = rssMb(pid);
      let peak = rssBefore;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 200);
      const sessions = Array.from({ length: n }, () => new Session(gateway.url, fx.key, 'balanced'));
      const openStart = performance.now();
      await Promise.all(sessions.map((s) => s.started()));
      const openMs = performance.now() - openStart;
      await sleep(1000); // the worker's spare decoder
      const interim: number[][] = sessions.map(() => []);
      const sent = sessions.map(() => 0);
      sessions.forEach((s, k) => {
        s.onEvent = (e) => {
          if (e.type !== 'transcript') return;
          const words = (e as unknown as Transcript).words;
          if (words.length) interim[k]!.push(sent[k]! / 10 - Math.max(...words.map((w) => w.end)));
        };
      });
      const t0 = performance.now() + 50;
      const lags = await Promise.all(
        sessions.map(async (s, k) => {
          const offset = Math.floor((k * framesB.length) / n);
          const phase = (k * 100) / n;
          for (let i = 0; i < framesPerSession && !s.closed; i++) {
            await sleep(t0 + phase + i * 100 - performance.now());
            s.ws.send(bytesOf(framesB[(offset + i) % framesB.length]!));
            sent[k]!++;
          }
          if (s.closed) return NaN;
          const t = performance.now();
          s.ws.send(JSON.stringify({ type: 'finalize' }));
          // A waiting client keeps the session alive (the gateway's idle timer counts client
          // messages only, also while it is still decoding a backlog).
          const keepalive = setInterval(() => s.ws.readyState === WebSocket.OPEN && s.ws.send(JSON.stringify({ type: 'keepalive' })), 5000);
          const e = await s.next(FINALIZE_TIMEOUT_MS, 'flush_done');
          clearInterval(keepalive);
          return e ? e.at - t : s.closed ? NaN : Infinity;
        }),
      );
      clearInterval(sampler);
      const closedEarly = new Map<string, number>();
      for (const s of sessions)
        if (s.closed) closedEarly.set(`${s.closed.code} ${s.closed.reason}`, (closedEarly.get(`${s.closed.code} ${s.closed.reason}`) ?? 0) + 1);
      await Promise.all(sessions.map((s) => s.close()));
      const ok = lags.filter((l) => l <= KEEP_UP_MS).length;
      if (ok === n) largestOk = Math.max(largestOk, n);
      const finite = lags.filter((l) => Number.isFinite(l));
      const late = lags.filter((l) => l === Infinity).length;
      const interimAll = interim.flat().sort((a, b) => a - b);
      rowsB.push({
        'STT workers': workerLabel,
        sessions: n,
        'keep up': `${ok}/${n}`,
        'finalize lag p50 / max ms': [
          finite.length ? `${median(finite).toFixed(0)} / ${Math.max(...finite).toFixed(0)}` : '',
          late ? `${late} over ${FINALIZE_TIMEOUT_MS / 1000} s` : '',
          n - finite.length - late ? `${n - finite.length - late} closed before` : '',
        ]
          .filter(Boolean)
          .join('; '),
        'interim lag p50 / p95 / max s': interimAll.length
          ? `${median(interimAll).toFixed(2)} / ${percentile(interimAll, 95).toFixed(2)} / ${interimAll.at(-1)!.toFixed(2)}`
          : '-',
        'open all ms': Math.round(openMs),
        'closed by gateway': closedEarly.size ? [...closedEarly].map(([r, c]) => `${c}x ${r}`).join(', ') : 0,
        'RSS before -> peak MB': `${rssBefore.toFixed(0)} -> ${peak.toFixed(0)}`,
        'load avg': loadavg()[0]!.toFixed(1),
      });
      console.error(`  workers ${workerLabel}, ${n} sessions: ${ok}/${n} kept up`);
      await sleep(1000);
    }
    verdicts.push(`STT workers ${workerLabel}: largest N where every session kept up: ${largestOk || 'none'} (of ${sessionCounts.join(', ')})`);
    gateway.child.kill('SIGTERM');
    procs.length = 0;
  }
  console.log(table(rowsB));
  console.log('\n' + verdicts.join('\n'));
} finally {
  cleanup();
}
