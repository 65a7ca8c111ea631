// TTS failover (gateway/tts/tts-failover.ts): the dead air a failing engine inserts in the audio a
// client hears, and the words lost or repeated. One model, a scripted Cartesia engine first and a
// scripted ElevenLabs engine second (test/support/scripted-*.ts, real HTTP servers), the gateway
// in this process (test/support/gateway-harness.ts, SQLite). Cartesia fails one sentence of a
// five-sentence text: at the start (the first sentence), in the middle (the third) or at the end
// (the last), by a reset, a 5xx, closing half-way or going silent half-way (then the gateway's
// SVC_TTS_STALL_SECONDS, as given, decides).
//
// The client streams POST /tts/bytes {stream: true, raw 24 kHz} and plays what it receives in real
// time from the first byte: the inserted silence is the largest wait of the player for audio
// (a chunk arriving after everything before it was played). Words lost or repeated: the texts the
// engines completed, put together, against the text (each sentence is one engine call).
// The scripted engines are paced like a cloud engine: first audio after --engine-first-audio-ms,
// then --realtime-factor times faster than real time (60 ms of speech a character).
//
//   npx tsx bench/failover-tts.ts [--runs 20] [--stall-seconds 0.25] [--realtime-factor 10] [--engine-first-audio-ms 100]
import { parseArgs } from 'node:util';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { mapVoiceToEngine } from '../server/services/voices/engine-voices.ts';
import { seedPlatformVoices } from '../server/services/voices/seed-platform-voices.ts';
import { startGateway } from '../test/support/gateway-harness.ts';
import { startScriptedCartesia, type TtsFault } from '../test/support/scripted-cartesia.ts';
import { startScriptedElevenLabs } from '../test/support/scripted-elevenlabs.ts';
import { failoverSpans } from '../gateway/tts/tts-failover.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    'stall-seconds': { type: 'string', default: '0.25' },
    'realtime-factor': { type: 'string', default: '10' },
    'engine-first-audio-ms': { type: 'string', default: '100' },
  },
});
const RUNS = Number(values.runs);
const STALL_SECONDS = Number(values['stall-seconds']);
const RATE = 24_000;
const TEXT =
  'Thanks for calling the clinic this morning. Your appointment is on Tuesday at ten. Please bring your insurance card with you. ' +
  'If you need to cancel, call us a day before. Have a lovely rest of your day.';
const SPANS = failoverSpans(TEXT);
const PLACES = { start: 0, middle: Math.floor(SPANS.length / 2), end: SPANS.length - 1 };
const FAULTS: TtsFault[] = ['reset', 'status_500', 'close_mid', 'stall_mid'];

process.env.BENCH_CARTESIA_KEY = 'sk_car_bench';
process.env.BENCH_ELEVEN_KEY = 'xi_bench';
const pace = { realtimeFactor: Number(values['realtime-factor']), firstAudioMs: Number(values['engine-first-audio-ms']) };
const cartesia = await startScriptedCartesia({ apiKey: 'sk_car_bench', msPerChar: 60, pace });
const eleven = await startScriptedElevenLabs({ apiKey: 'xi_bench', msPerCharacter: 60, pace });
const h = await startGateway({
  creditsMicros: 1_000_000_000n,
  env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_TTS_STALL_SECONDS: String(STALL_SECONDS), SVC_TTS_FIRST_AUDIO_SECONDS: String(STALL_SECONDS) },
});
const prisma = h.testDb.db.prisma;
await seedPlatformVoices(prisma);
const model = { id: 'duo', modality: 'tts' as const, prices: { picoPerChar: 1_000_000n } };
await upsertModel(prisma, checkProtocol, {
  ...model,
  upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'BENCH_CARTESIA_KEY', weight: 1_000_000 },
});
await upsertModel(prisma, checkProtocol, {
  ...model,
  upstream: { url: eleven.url, protocol: 'elevenlabs', upstreamModel: 'eleven_flash_v2_5', apiKeyEnv: 'BENCH_ELEVEN_KEY', weight: 1 },
});
await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo', upstreamId: 'bench-voice', upstreamUrl: cartesia.url });
await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo', upstreamId: 'JBFqnCBsd6RMkjVDRZzb', upstreamUrl: eleven.url });
const ctx = h.runtime.ctx;
await ctx.registry.refresh();

/** One request with Cartesia failing sentence `at` (or nothing): the largest wait of a real-time player, and the words' fate. */
interface Outcome {
  silenceMs: number;
  firstAudioMs: number;
  lost: number;
  repeated: number;
  /** The client's stream failed (an error status, or the body cut off). */
  error: string | null;
}

async function once(fault: TtsFault | null, at: number): Promise<Outcome> {
  try {
    return await request(fault, at);
  } catch (e) {
    return { silenceMs: 0, firstAudioMs: 0, lost: 0, repeated: 0, error: (e as Error).message };
  }
}

async function request(fault: TtsFault | null, at: number): Promise<Outcome> {
  for (const u of ctx.registry.resolve('duo', 'tts', null).upstreams) ctx.health.record(u, { ok: true });
  cartesia.spoken.length = 0;
  eleven.spoken.length = 0;
  let spent = false;
  cartesia.ttsFault = (text) => (fault && !spent && text === SPANS[at] ? ((spent = true), fault) : null);
  const sent = performance.now();
  const res = await fetch(`${h.url}/tts/bytes`, {
    method: 'POST',
    headers: h.headers,
    body: JSON.stringify({
      model_id: 'duo',
      transcript: TEXT,
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: RATE },
      stream: true,
    }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let start = 0;
  let playedUntil = 0; // when the audio received so far finishes playing
  let silenceMs = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const now = performance.now();
    if (start === 0) {
      start = now;
      playedUntil = now;
    }
    if (now > playedUntil) {
      silenceMs = Math.max(silenceMs, now - playedUntil);
      playedUntil = now;
    }
    playedUntil += (chunk.length / 2 / RATE) * 1000;
  }
  const done = [...cartesia.spoken, ...eleven.spoken];
  const lost = SPANS.filter((s) => !done.includes(s)).reduce((n, s) => n + s.split(/\s+/).filter(Boolean).length, 0);
  const repeated = done.length - new Set(done).size;
  return { silenceMs, firstAudioMs: start - sent, lost, repeated, error: null };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const rows: string[] = [];
const baseline: Outcome[] = [];
for (let i = 0; i < RUNS; i++) baseline.push(await once(null, 0));
const clean = baseline.filter((b) => !b.error);
const quiet = clean.map((b) => b.silenceMs);
const firstAudio = pct(
  clean.map((b) => b.firstAudioMs),
  50,
);
rows.push(`| no fault | – | ${pct(quiet, 50).toFixed(0)} | ${pct(quiet, 95).toFixed(0)} | ${firstAudio.toFixed(0)} | 0 | 0 | ${RUNS - clean.length} |`);
for (const fault of FAULTS) {
  for (const [place, at] of Object.entries(PLACES)) {
    const silences: number[] = [];
    const firsts: number[] = [];
    let lost = 0;
    let repeated = 0;
    let errors = 0;
    for (let i = 0; i < RUNS; i++) {
      const r = await once(fault, at);
      if (r.error) {
        errors++;
        console.error(`${fault} at ${place}: ${r.error}`);
        continue;
      }
      silences.push(r.silenceMs);
      firsts.push(r.firstAudioMs);
      lost += r.lost;
      repeated += r.repeated;
    }
    rows.push(
      `| ${fault} | ${place} | ${pct(silences, 50).toFixed(0)} | ${pct(silences, 95).toFixed(0)} | ${pct(firsts, 50).toFixed(0)} | ${lost} | ${repeated} | ${errors} |`,
    );
  }
}
console.log(
  `${new Date().toISOString().slice(0, 10)} — npx tsx bench/failover-tts.ts --runs ${RUNS} --stall-seconds ${STALL_SECONDS} --realtime-factor ${pace.realtimeFactor} --engine-first-audio-ms ${pace.firstAudioMs}`,
);
console.log(`${SPANS.length} sentences, ${[...TEXT].length} characters; ${RUNS} requests a case`);
console.log('| fault | where | largest silence p50 ms | p95 ms | first audio p50 ms | words lost | sentences repeated | client errors |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
await h.close();
await Promise.all([cartesia.close(), eleven.close()]);
