// First audio on WS /tts/websocket for text arriving in LLM-sized pieces, against POST /tts/sse
// for the same full text, on one gateway process (bench/gateway-server.ts, bundled and run as
// `svc gateway` runs, on a fresh SQLite fixture: key auth, rate limit, reservations and debits on).
//
// - /tts/sse: the whole transcript in one request on a keep-alive connection (undici); time from
//   sending the request to the first complete `chunk` event (what bench/tts.ts measures).
// - /tts/websocket: one socket opened before the runs (as Cartesia advises: "set up the WebSocket
//   before the first generation"), a new context per run. The transcript is cut into pieces of
//   3-6 characters (a fixed pseudo-random split, like an LLM's tokens) sent one every --interval
//   ms with continue:true, then {transcript:"", continue:false}. Time from sending the piece that
//   completes the first sentence (the first text either route can speak: flite speaks sentence
//   by sentence, and the socket starts a span at a sentence end) to that context's first `chunk`.
//   Also shown: time from the first piece, i.e. with the LLM's own pacing included; and a second
//   socket case where the pieces after the first sentence wait until its first audio has come
//   (nothing else runs while the engine works, as for /tts/sse): on a loaded machine, the
//   difference between the two socket cases is the CPU the ongoing token stream (client and
//   gateway) takes from the engine, not time the route adds.
// Each run reads its stream to `done` before the next; the two routes alternate, the order
// rotating each run, after --warmup runs; raw pcm_s16le at the engine's own rate. Reported: p50
// and p90 of each, socket minus SSE (difference of p50s, and the median of the per-run paired
// differences), and the ratio of p50s. Target (issue #20): the socket within 5 ms of /tts/sse.
//
//   npx tsx bench/tts-websocket.ts [--runs 30] [--warmup 3] [--interval 20]
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { median, percentile, table } from './lib/load.ts';
import { startBundled } from './lib/processes.ts';
import { voiceFixture } from './lib/voice-fixture.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '30' }, warmup: { type: 'string', default: '3' }, interval: { type: 'string', default: '20' } },
});
const runs = Number(values.runs);
const warmup = Number(values.warmup);
const intervalMs = Number(values.interval);

const TEXT =
  'Thanks for calling Acme support, my name is Sam. I can check the status of an order, change a delivery address, or book a visit with a technician. What can I do for you today?';

/** The transcript as LLM-sized pieces: 3-6 characters each, the same split every run (seeded). */
function tokens(text: string, seed = 7): string[] {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const out: string[] = [];
  for (let at = 0; at < text.length;) {
    const n = 3 + Math.floor(next() * 4);
    out.push(text.slice(at, at + n));
    at += n;
  }
  return out;
}

interface Engine {
  name: string;
  model: string;
  voice: string;
  rate: number;
}
const ENGINES: Engine[] = [
  { name: 'flite', model: 'local-flite', voice: 'flite-slt', rate: 16000 },
  { name: 'espeak-ng', model: 'local-espeak', voice: 'espeak-en-us-m', rate: 22050 },
];

/** One /tts/sse stream read to its end: ms from the request to the first chunk event. */
async function sse(agent: Agent, origin: string, key: string, e: Engine): Promise<number> {
  const t0 = performance.now();
  const res = await request(`${origin}/tts/sse`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      model_id: e.model,
      transcript: TEXT,
      voice: { mode: 'id', id: e.voice },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: e.rate },
    }),
  });
  let first = NaN;
  let done = false;
  let buf = '';
  for await (const piece of res.body) {
    buf += (piece as Buffer).toString('latin1');
    let end: number;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (Number.isNaN(first) && event.startsWith('data: {"type":"chunk"')) first = performance.now() - t0;
      if (event.includes('"type":"done"')) done = true;
    }
  }
  if (res.statusCode !== 200 || !done) throw new Error(`/tts/sse answered ${res.statusCode} without a done event`);
  return first;
}

/** A persistent socket; each run is a context whose events are routed to it. */
class Socket {
  private readonly listeners = new Map<string, (e: { type: string; [k: string]: unknown }) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const e = JSON.parse(data.toString()) as { type: string; context_id?: string };
      if (e.context_id) this.listeners.get(e.context_id)?.(e);
    });
  }

  static open(origin: string, key: string): Promise<Socket> {
    const ws = new WebSocket(`${origin.replace(/^http/, 'ws')}/tts/websocket`, {
      headers: { authorization: `Bearer ${key}`, 'cartesia-version': '2025-04-16' },
    });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Socket(ws)));
      ws.once('error', reject);
    });
  }

  private seq = 0;

  /**
   * Sends the pieces on a new context; resolves at its done with the two first-audio times.
   * `holdRest`: the pieces after the first sentence wait for its first audio.
   */
  run(e: Engine, pieces: string[], completesFirst: number, holdRest: boolean): Promise<{ fromSentence: number; fromFirstPiece: number }> {
    const id = `run-${++this.seq}`;
    const base = {
      model_id: e.model,
      voice: { mode: 'id', id: e.voice },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: e.rate },
      language: 'en',
      context_id: id,
    };
    return new Promise((resolve, reject) => {
      let firstPieceAt = NaN;
      let sentenceAt = NaN;
      let firstChunkAt = NaN;
      let timer: NodeJS.Timeout | undefined;
      let resume: (() => void) | undefined;
      this.listeners.set(id, (ev) => {
        if (ev.type === 'chunk' && Number.isNaN(firstChunkAt)) {
          firstChunkAt = performance.now();
          resume?.();
        }
        if (ev.type === 'error') {
          clearTimeout(timer);
          reject(new Error(`error event: ${String(ev.message)}`));
        }
        if (ev.type === 'done') {
          this.listeners.delete(id);
          clearTimeout(timer);
          if (Number.isNaN(sentenceAt) || Number.isNaN(firstChunkAt)) return reject(new Error('done before the first sentence was sent or without audio'));
          resolve({ fromSentence: firstChunkAt - sentenceAt, fromFirstPiece: firstChunkAt - firstPieceAt });
        }
      });
      // Paced from the start, so that a late timer does not delay every later piece.
      let start = performance.now();
      const send = (i: number) => {
        const now = performance.now();
        if (i < pieces.length) {
          this.ws.send(JSON.stringify({ ...base, transcript: pieces[i], continue: true }));
          if (i === 0) firstPieceAt = now;
          if (i === completesFirst) sentenceAt = now;
          if (holdRest && i === completesFirst) {
            resume = () => {
              start = performance.now() - (i + 1) * intervalMs;
              send(i + 1);
            };
            return;
          }
          timer = setTimeout(() => send(i + 1), Math.max(0, start + (i + 1) * intervalMs - performance.now()));
        } else {
          this.ws.send(JSON.stringify({ ...base, transcript: '', continue: false }));
        }
      };
      send(0);
    });
  }
}

const pieces = tokens(TEXT);
const firstSentenceEnd = TEXT.indexOf('.') + 1;
let cumulative = 0;
const completesFirst = pieces.findIndex((p) => (cumulative += p.length) >= firstSentenceEnd);

const fx = await voiceFixture();
const gateway = await startBundled('bench/gateway-server.ts', { ...fx.env, BENCH_GATEWAY_LOG_LEVEL: 'warn', LOG_LEVEL: 'warn' });
const cleanup = () => {
  gateway.child.kill('SIGTERM');
  fx.remove();
};
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

try {
  const agent = new Agent({ connections: 4, keepAliveTimeout: 30_000 });
  const socket = await Socket.open(gateway.url, fx.key);
  const rows: Record<string, string | number>[] = [];
  const verdicts: string[] = [];
  for (const e of ENGINES) {
    const sseMs: number[] = [];
    const wsMs: number[] = [];
    const wsFromStart: number[] = [];
    const wsHeld: number[] = [];
    for (let run = 0; run < warmup + runs; run++) {
      const steps = [
        async () => {
          const ms = await sse(agent, gateway.url, fx.key, e);
          if (run >= warmup) sseMs.push(ms);
        },
        async () => {
          const r = await socket.run(e, pieces, completesFirst, false);
          if (run >= warmup) {
            wsMs.push(r.fromSentence);
            wsFromStart.push(r.fromFirstPiece);
          }
        },
        async () => {
          const r = await socket.run(e, pieces, completesFirst, true);
          if (run >= warmup) wsHeld.push(r.fromSentence);
        },
      ];
      for (let i = 0; i < steps.length; i++) await steps[(i + run) % steps.length]!();
    }
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const paired = wsMs.map((x, i) => x - sseMs[i]!);
    const diff = median(wsMs) - median(sseMs);
    rows.push({
      engine: e.name,
      route: '/tts/sse (whole text)',
      'first audio from': 'request sent',
      'p50 ms': median(sseMs),
      'p90 ms': percentile(sorted(sseMs), 90),
      'socket - sse p50 ms': '',
      'paired diff p50 ms': '',
      'socket / sse p50': '',
    });
    rows.push({
      engine: e.name,
      route: '/tts/websocket (pieces)',
      'first audio from': 'piece completing sentence 1 sent',
      'p50 ms': median(wsMs),
      'p90 ms': percentile(sorted(wsMs), 90),
      'socket - sse p50 ms': diff,
      'paired diff p50 ms': median(paired),
      'socket / sse p50': median(wsMs) / median(sseMs),
    });
    rows.push({
      engine: e.name,
      route: '/tts/websocket (pieces, the rest held)',
      'first audio from': 'piece completing sentence 1 sent',
      'p50 ms': median(wsHeld),
      'p90 ms': percentile(sorted(wsHeld), 90),
      'socket - sse p50 ms': median(wsHeld) - median(sseMs),
      'paired diff p50 ms': median(wsHeld.map((x, i) => x - sseMs[i]!)),
      'socket / sse p50': median(wsHeld) / median(sseMs),
    });
    rows.push({
      engine: e.name,
      route: '/tts/websocket (pieces)',
      'first audio from': 'first piece sent (LLM pacing included)',
      'p50 ms': median(wsFromStart),
      'p90 ms': percentile(sorted(wsFromStart), 90),
      'socket - sse p50 ms': '',
      'paired diff p50 ms': '',
      'socket / sse p50': '',
    });
    verdicts.push(
      `${e.name}: the socket's first audio is ${diff.toFixed(2)} ms ${diff >= 0 ? 'after' : 'before'} /tts/sse's at the median (target: within 5 ms): ${diff <= 5 ? 'met' : 'NOT met'}`,
    );
  }
  socket.ws.close();
  await agent.close();
  console.log(
    `\nFirst audio, ${runs} runs per route after ${warmup} warm-up, alternating; ${TEXT.length}-char transcript; socket: ${pieces.length} pieces of 3-6 chars, one every ${intervalMs} ms, sentence 1 complete at piece ${completesFirst + 1}; load average ${loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log(table(rows));
  console.log('\n' + verdicts.join('\n'));
} finally {
  cleanup();
}
