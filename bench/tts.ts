// TTS benchmark against the real gateway process (bench/gateway-server.ts on a fresh SQLite
// fixture; the gateway seeds local-espeak / local-flite and the platform voices itself).
//
// (a) Gateway-added time to first audio. For each engine, over --runs sequential runs,
//     interleaved (engine alone, gateway at the engine's own rate, gateway at 24 kHz, then the
//     next engine; the order rotates every run), after 3 warm-up runs:
//       - engine alone, spawned by this script with exactly the gateway's arguments:
//           espeak-ng -v en-us -s 175 --stdout -b 1  (text on stdin): time from spawn to the
//             first stdout byte past the 44-byte WAV header;
//           flite -voice slt --setf duration_stretch=1.0000 -t "<first sentence>" -o file:
//             time from spawn until the process has exited (the first sentence's WAV is
//             written). The first sentence is the product's own split (flite.ts sentences()),
//             i.e. exactly what the gateway synthesises first.
//       - through the gateway: POST /tts/sse (keep-alive connection, key auth, rate limit,
//         voice profile lookup, debit all on), output raw pcm_s16le at the engine's native rate
//         (espeak 22050, flite 16000: no resampling) and at 24000 (resampling): time from
//         sending the request to the first complete `chunk` event. Each stream is read to its
//         `done` event before the next run starts, so nothing overlaps.
//     Reported: median and p90 of each, and gateway minus engine (difference of medians and
//     of p90s, plus the median of the per-run paired differences). Target: the gateway adds
//     <= 5 ms.
// (b) --concurrency simultaneous /tts/sse streams (espeak, a ~300-character text, raw 22050)
//     on one gateway, against the same stream alone (5 runs), and against espeak-ng itself
//     (1 process, and --concurrency processes at once, spawned by this script: what the
//     machine does without the gateway). Per stream: time to first chunk, largest gap between
//     chunk events (stdout reads for the engine alone), total duration, whether it ended with
//     `done`, and the minimum playback lead (audio received before each later chunk minus the
//     time since the first chunk: below 0, a player that starts at the first chunk would run
//     dry, i.e. an audible stall). --rounds bursts; the per-stream table is the last one.
// (c) Conversion throughput is bench/audio-pipeline.ts; not repeated here.
//
//   npx tsx bench/tts.ts [--runs 30] [--concurrency 50] [--rounds 3]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { sentences } from '../gateway/upstreams/local-tts/flite.ts';
import { median, percentile, table } from './lib/load.ts';
import { rssMb, startBundled } from './lib/processes.ts';
import { voiceFixture } from './lib/voice-fixture.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '30' }, concurrency: { type: 'string', default: '50' }, rounds: { type: 'string', default: '3' } },
});
const runs = Number(values.runs);
const concurrency = Number(values.concurrency);
const rounds = Number(values.rounds);
const WARMUP = 3;

const SHORT_TEXT =
  'Hello, thanks for calling Acme support. How can I help you today? I can check the status of an order, change a delivery address, or book a visit with a technician.';
const LONG_TEXT =
  'Thanks for waiting. I found your order from last Tuesday: two boxes of printer paper and a set of blue pens. ' +
  'It left our warehouse this morning and should arrive on Friday before noon. Would you like me to send the tracking link to your email, or is there anything else I can help with?';

interface Engine {
  name: string;
  model: string;
  voice: string;
  nativeRate: number;
  direct: () => Promise<number>;
}

const tmp = mkdtempSync(join(tmpdir(), 'svc-bench-tts-'));

/** espeak-ng alone: spawn -> first stdout byte past the 44-byte WAV header. */
function espeakDirect(text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('espeak-ng', ['-v', 'en-us', '-s', '175', '--stdout', '-b', '1'], { stdio: ['pipe', 'pipe', 'ignore'] });
    let bytes = 0;
    let first = NaN;
    child.stdout.on('data', (d: Buffer) => {
      bytes += d.length;
      if (Number.isNaN(first) && bytes > 44) first = performance.now() - t0;
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 && !Number.isNaN(first) ? resolve(first) : reject(new Error(`espeak-ng exited with ${code}`))));
    child.stdin.end(text);
  });
}

/** flite alone: spawn -> exit, i.e. the first sentence's WAV file is written. */
function fliteDirect(sentence: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('flite', ['-voice', 'slt', '--setf', 'duration_stretch=1.0000', '-t', sentence, '-o', join(tmp, 'first.wav')], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`flite exited with ${code}`))));
  });
}

interface StreamResult {
  status: number;
  /** ms from sending the request to the first complete chunk event. */
  firstChunk: number;
  /** ms between consecutive chunk events, largest. */
  maxGap: number;
  /** ms from sending the request to the end of the body. */
  total: number;
  chunks: number;
  audioSeconds: number;
  /** min over chunks of (audio received before it) - (its arrival - first chunk's arrival), s. */
  minLead: number;
  done: boolean;
  error: string | null;
}

/** One /tts/sse stream, read to the end; events are parsed just enough (type, data length). */
async function ttsStream(agent: Agent, origin: string, key: string, body: object, bytesPerSecond: number): Promise<StreamResult> {
  const r: StreamResult = { status: 0, firstChunk: NaN, maxGap: 0, total: NaN, chunks: 0, audioSeconds: 0, minLead: Infinity, done: false, error: null };
  const t0 = performance.now();
  let firstAt = NaN;
  let lastAt = NaN;
  try {
    const res = await request(origin + '/tts/sse', {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });
    r.status = res.statusCode;
    let buf = '';
    for await (const piece of res.body) {
      buf += (piece as Buffer).toString('latin1');
      let end: number;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const now = performance.now();
        if (event.startsWith('data: {"type":"chunk"')) {
          const from = event.indexOf('"data":"') + 8;
          const b64 = event.slice(from, event.indexOf('"', from));
          const bytes = (b64.length * 3) / 4 - (b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0);
          if (r.chunks === 0) {
            firstAt = now;
            r.firstChunk = now - t0;
          } else {
            r.maxGap = Math.max(r.maxGap, now - lastAt);
          }
          if (r.chunks > 0) r.minLead = Math.min(r.minLead, r.audioSeconds - (now - firstAt) / 1000);
          r.audioSeconds += bytes / bytesPerSecond;
          r.chunks++;
          lastAt = now;
        } else if (event.includes('"type":"done"')) {
          r.done = true;
        } else {
          r.error = event.slice(0, 300);
        }
      }
    }
  } catch (e) {
    r.error = (e as Error).message;
  }
  r.total = performance.now() - t0;
  return r;
}

/** espeak-ng alone, read like a stream (for the concurrency baseline): same fields as a gateway stream. */
function espeakStream(text: string): Promise<StreamResult> {
  return new Promise((resolve) => {
    const r: StreamResult = { status: 0, firstChunk: NaN, maxGap: 0, total: NaN, chunks: 0, audioSeconds: 0, minLead: Infinity, done: false, error: null };
    const t0 = performance.now();
    const child = spawn('espeak-ng', ['-v', 'en-us', '-s', '175', '--stdout', '-b', '1'], { stdio: ['pipe', 'pipe', 'ignore'] });
    let bytes = 0;
    let firstAt = NaN;
    let lastAt = NaN;
    child.stdout.on('data', (d: Buffer) => {
      const now = performance.now();
      const audio = Math.max(0, bytes + d.length - 44) - Math.max(0, bytes - 44);
      bytes += d.length;
      if (audio === 0) return;
      if (r.chunks === 0) {
        firstAt = now;
        r.firstChunk = now - t0;
      } else {
        r.maxGap = Math.max(r.maxGap, now - lastAt);
        r.minLead = Math.min(r.minLead, r.audioSeconds - (now - firstAt) / 1000);
      }
      r.audioSeconds += audio / (22050 * 2);
      r.chunks++;
      lastAt = now;
    });
    child.on('error', (e) => {
      r.error = e.message;
    });
    child.on('close', (code) => {
      r.total = performance.now() - t0;
      r.done = code === 0;
      r.status = code === 0 ? 200 : 0;
      resolve(r);
    });
    child.stdin.end(text);
  });
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
  const gateway = await startBundled('bench/gateway-server.ts', fx.env);
  procs.push(gateway);
  const agent = new Agent({ connections: concurrency + 8, keepAliveTimeout: 30_000 });

  // ---------- (a) time to first audio ----------
  const firstSentence = sentences(SHORT_TEXT)[0]!;
  const engines: Engine[] = [
    { name: 'espeak-ng', model: 'local-espeak', voice: 'espeak-en-us-m', nativeRate: 22050, direct: () => espeakDirect(SHORT_TEXT) },
    { name: 'flite', model: 'local-flite', voice: 'flite-slt', nativeRate: 16000, direct: () => fliteDirect(firstSentence) },
  ];
  type PathName = 'engine alone' | 'gateway native' | 'gateway 24 kHz';
  const samples = new Map<string, number[]>();
  const push = (engine: string, path: PathName, v: number) => {
    const k = `${engine}|${path}`;
    if (!samples.has(k)) samples.set(k, []);
    samples.get(k)!.push(v);
  };
  let failures = 0;
  const gw = async (e: Engine, rate: number) => {
    const s = await ttsStream(
      agent,
      gateway.url,
      fx.key,
      {
        model_id: e.model,
        transcript: SHORT_TEXT,
        voice: { mode: 'id', id: e.voice },
        output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: rate },
      },
      rate * 2,
    );
    if (s.status !== 200 || !s.done) {
      failures++;
      if (failures <= 3) console.error(`stream failed: ${s.status} ${s.error ?? 'no done event'}`);
    }
    return s.firstChunk;
  };
  for (let run = 0; run < WARMUP + runs; run++) {
    for (const e of engines) {
      const steps: [PathName, () => Promise<number>][] = [
        ['engine alone', e.direct],
        ['gateway native', () => gw(e, e.nativeRate)],
        ['gateway 24 kHz', () => gw(e, 24000)],
      ];
      for (let i = 0; i < steps.length; i++) {
        const [path, fn] = steps[(i + run) % steps.length]!;
        const ms = await fn();
        if (run >= WARMUP) push(e.name, path, ms);
      }
    }
  }
  const rowsA: Record<string, string | number>[] = [];
  const verdicts: string[] = [];
  for (const e of engines) {
    const base = samples.get(`${e.name}|engine alone`)!;
    const sb = [...base].sort((a, b) => a - b);
    rowsA.push({
      engine: e.name,
      path: 'engine alone',
      output: e.name === 'flite' ? 'first sentence WAV written' : 'first byte past header',
      'p50 ms': median(base),
      'p90 ms': percentile(sb, 90),
      'added p50 ms': '',
      'added p90 ms': '',
      'paired added p50 ms': '',
    });
    for (const path of ['gateway native', 'gateway 24 kHz'] as const) {
      const xs = samples.get(`${e.name}|${path}`)!;
      const sx = [...xs].sort((a, b) => a - b);
      const paired = xs.map((x, i) => x - base[i]!);
      const added = median(xs) - median(base);
      rowsA.push({
        engine: e.name,
        path,
        output: `raw s16 ${path === 'gateway native' ? e.nativeRate : 24000} Hz`,
        'p50 ms': median(xs),
        'p90 ms': percentile(sx, 90),
        'added p50 ms': added,
        'added p90 ms': percentile(sx, 90) - percentile(sb, 90),
        'paired added p50 ms': median(paired),
      });
      verdicts.push(`${e.name}, ${path}: adds ${added.toFixed(2)} ms at the median (target <= 5 ms): ${added <= 5 ? 'met' : 'NOT met'}`);
    }
  }
  console.log(
    `\nTTS time to first audio, ${runs} sequential runs per path after ${WARMUP} warm-up, interleaved; transcript ${SHORT_TEXT.length} chars; load average ${loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log(table(rowsA));
  console.log('\n' + verdicts.join('\n'));
  if (failures) console.log(`(${failures} gateway streams did not end with a done event)`);

  // ---------- (b) concurrent streams ----------
  const longBody = {
    model_id: 'local-espeak',
    transcript: LONG_TEXT,
    voice: { mode: 'id', id: 'espeak-en-us-m' },
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 22050 },
  };
  const BPS = 22050 * 2;
  const alone: StreamResult[] = [];
  for (let i = 0; i < 6; i++) {
    const s = await ttsStream(agent, gateway.url, fx.key, longBody, BPS);
    if (i > 0) alone.push(s); // the first is a warm-up
  }
  const summarize = (label: string, xs: StreamResult[], rss: string) => ({
    run: label,
    streams: xs.length,
    'done ok': xs.filter((s) => s.status === 200 && s.done).length,
    'first chunk p50 / max ms': `${median(xs.map((s) => s.firstChunk)).toFixed(1)} / ${Math.max(...xs.map((s) => s.firstChunk)).toFixed(1)}`,
    'largest gap p50 / max ms': `${median(xs.map((s) => s.maxGap)).toFixed(1)} / ${Math.max(...xs.map((s) => s.maxGap)).toFixed(1)}`,
    'total p50 / max ms': `${median(xs.map((s) => s.total)).toFixed(1)} / ${Math.max(...xs.map((s) => s.total)).toFixed(1)}`,
    'audio s': median(xs.map((s) => s.audioSeconds)).toFixed(2),
    'chunks p50': median(xs.map((s) => s.chunks)),
    'min lead s': Math.min(...xs.map((s) => s.minLead)).toFixed(2),
    'lead < 0': xs.filter((s) => s.minLead < 0).length,
    'gateway RSS MB': rss,
  });
  // The engine itself at the same concurrency, spawned from this (small) process: what the
  // machine can do without the gateway.
  const engineAlone: StreamResult[] = [];
  for (let i = 0; i < 6; i++) {
    const s = await espeakStream(LONG_TEXT);
    if (i > 0) engineAlone.push(s);
  }
  const engineBurst = await Promise.all(Array.from({ length: concurrency }, () => espeakStream(LONG_TEXT)));
  const rowsB: Record<string, string | number>[] = [
    summarize('espeak-ng alone, 1 process (5 runs)', engineAlone, '-'),
    summarize(`espeak-ng alone, ${concurrency} processes at once`, engineBurst, '-'),
    summarize('gateway, 1 stream alone (5 runs)', alone, rssMb(gateway.child.pid!).toFixed(0)),
  ];
  let lastBurst: StreamResult[] = [];
  for (let r = 0; r < rounds; r++) {
    const before = rssMb(gateway.child.pid!);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(gateway.child.pid!))), 50);
    lastBurst = await Promise.all(Array.from({ length: concurrency }, () => ttsStream(agent, gateway.url, fx.key, longBody, BPS)));
    clearInterval(sampler);
    rowsB.push(summarize(`gateway, ${concurrency} concurrent, round ${r + 1}`, lastBurst, `${before.toFixed(0)} -> peak ${peak.toFixed(0)}`));
  }
  console.log(
    `\nConcurrent /tts/sse streams, espeak-ng (local-espeak, espeak-en-us-m), ${LONG_TEXT.length}-char transcript, raw s16 22050 Hz; load average ${loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log(table(rowsB));
  console.log(`\nPer stream, last round of ${concurrency} (sorted by first chunk):\n`);
  console.log(
    table(
      [...lastBurst]
        .sort((a, b) => a.firstChunk - b.firstChunk)
        .map((s, i) => ({
          '#': i + 1,
          status: s.status,
          done: s.done ? 'yes' : `NO ${s.error ?? ''}`,
          'first chunk ms': s.firstChunk,
          'largest gap ms': s.maxGap,
          'total ms': s.total,
          chunks: s.chunks,
          'audio s': s.audioSeconds,
          'min lead s': s.minLead,
        })),
    ),
  );
  const aloneGap = median(alone.map((s) => s.maxGap));
  const burstGap = Math.max(...lastBurst.map((s) => s.maxGap));
  console.log(
    `\nlargest gap between chunks: alone ${aloneGap.toFixed(1)} ms (median of 5), with ${concurrency} concurrent at most ${burstGap.toFixed(1)} ms (last round); ` +
      `every gateway stream completed with done: ${rowsB.slice(3).every((r) => r['done ok'] === concurrency) ? 'yes' : 'NO'}`,
  );
  await agent.close();
} finally {
  cleanup();
}
