// Capacity of the local speech-to-text pool: N concurrent sessions each streaming flite speech in
// 100 ms chunks as fast as the pool takes them. Prints decoder memory, start-up time and the
// pool's real-time factor (CPU seconds per audio second, wall-clock, and per session).
//   npx tsx bench/stt-pool.ts [sessions=20] [seconds of audio each=20]
// Configured as the gateway is (server/config/env.ts): SVC_STT_WORKERS sets the number of worker
// threads (default: cores - 1), SVC_STT_SPARE_DECODERS and SVC_POCKETSPHINX_* the rest.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../server/config/env.ts';
import { configureRecognizer, createRecognizer, recognizerStats, shutdownRecognizers, type Recognizer } from '../gateway/upstreams/pocketsphinx/recognizer.ts';

configureRecognizer(loadConfig().engines.pocketsphinx);

const SESSIONS = Number(process.argv[2] ?? 20);
const SECONDS = Number(process.argv[3] ?? 20);

const dir = mkdtempSync(join(tmpdir(), 'svc-stt-bench-'));
const text =
  'please call me tomorrow morning about the meeting. the weather today is sunny with a light breeze. ' +
  'we need to order more paper for the office printer. turn off the lights when you leave the room.';
const clips = ['slt', 'rms', 'awb'].map((voice) => {
  const file = join(dir, `${voice}.wav`);
  execFileSync('flite', ['-voice', voice, '-t', text, '-o', file]);
  const b = readFileSync(file);
  return new Int16Array(b.buffer.slice(b.byteOffset + 44, b.byteOffset + b.length - ((b.length - 44) % 2)));
});
rmSync(dir, { recursive: true, force: true });

/** SECONDS of audio: the clips one after another, for session k starting at a different one. */
function audioFor(k: number): Int16Array {
  const out = new Int16Array(SECONDS * 16000);
  for (let o = 0, c = k; o < out.length; c++) {
    const clip = clips[c % clips.length]!;
    out.set(clip.subarray(0, out.length - o), o);
    o += clip.length;
  }
  return out;
}

const mb = (bytes: number) => `${Math.round(bytes / 1e6)} MB`;
const cpu0 = process.cpuUsage();
let t = performance.now();
const first = await createRecognizer({ sampleRate: 16000 });
console.log(`first recognizer (worker start + model load): ${Math.round(performance.now() - t)} ms`);
const base = await recognizerStats();
t = performance.now();
const recognizers: Recognizer[] = [first];
for (let k = 1; k < SESSIONS; k++) recognizers.push(await createRecognizer({ sampleRate: 16000 }));
console.log(`${SESSIONS - 1} more recognizers: ${Math.round((performance.now() - t) / (SESSIONS - 1))} ms each`);
const open = await recognizerStats();
const rss = (s: typeof open) => s.reduce((n, w) => n + w.rssBytes, 0);
const decoders = (s: typeof open) => s.reduce((n, w) => n + w.decoders, 0);
console.log(
  `workers ${open.length}; RSS ${mb(rss(base))} with ${decoders(base)} decoder(s), ${mb(rss(open))} with ${decoders(open)}: ` +
    `${mb((rss(open) - rss(base)) / (decoders(open) - decoders(base)))} per decoder`,
);

t = performance.now();
const latencies: number[] = [];
await Promise.all(
  recognizers.map(async (r, k) => {
    const pcm = audioFor(k);
    for (let i = 0; i < pcm.length; i += 1600) {
      const s = performance.now();
      await r.push(pcm.subarray(i, i + 1600));
      latencies.push(performance.now() - s);
      if (i % (16000 * 5) === 0 && i > 0) await r.finalize();
    }
    await r.finalize();
  }),
);
const wall = (performance.now() - t) / 1000;
const audio = SESSIONS * SECONDS;
const cpu = process.cpuUsage(cpu0);
latencies.sort((a, b) => a - b);
console.log(
  `${SESSIONS} sessions x ${SECONDS} s = ${audio} s of audio in ${wall.toFixed(1)} s wall: ` +
    `${(audio / wall).toFixed(1)} streams in real time; process CPU ${((cpu.user + cpu.system) / 1e6 / audio).toFixed(3)} s per audio second ` +
    `(includes model loads); push round trip p50 ${Math.round(latencies[latencies.length >> 1]!)} ms, p99 ${Math.round(latencies[Math.floor(latencies.length * 0.99)]!)} ms`,
);
for (const r of recognizers) r.close();
await shutdownRecognizers();
