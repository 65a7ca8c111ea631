// The end of turn as a client sees it (bench/turn-detection.ts --wall-clock): one gateway process
// (bench/gateway-server.ts, bundled, a fresh SQLite fixture), `local-stt` on WS /stt/websocket
// (turn_source=gateway), flite speech (the corpus's plain sentences, voice slt, trimmed of its
// silence) after 0.5 s of silence, streamed at real time in 20 ms pcm16 frames paced by the clock,
// then silence until the turn's finals are in. E is when the frame holding the last voiced sample
// was sent; per turn: E → `turn.end` (the detector's decision, as the client receives it) and
// E → `turn.finalized` (the turn's final transcript is in: before issue #32, turn.end came only
// then). A turn.end before E (a cut-off) is counted, not measured.
import WebSocket from 'ws';
import { floatToS16, s16leBytes } from '../../gateway/audio/pcm.ts';
import type { TurnDetection } from '../../gateway/stt/turn-detector.ts';
import { trimSilence } from '../../test/support/stt-routes.ts';
import { CORPUS_RATE, PLAIN_SENTENCES, say } from '../../test/support/turn-corpus.ts';
import { median, percentile } from './load.ts';
import { startBundled } from './processes.ts';
import { voiceFixture } from './voice-fixture.ts';

const FRAME_MS = 20;
const FRAME_SAMPLES = (CORPUS_RATE * FRAME_MS) / 1000;
const LEAD_SECONDS = 0.5;
const TURN_TIMEOUT_MS = 30_000;

export interface WallClockRow {
  preset: TurnDetection;
  turns: number;
  endP50: number;
  endP90: number;
  finalP50: number;
  finalP90: number;
  cutOffs: number;
}

interface Clip {
  pcm: Buffer;
  lastVoicedFrame: number;
}

async function clip(text: string): Promise<Clip> {
  const speech = trimSilence(await say(text, 'flite:slt'), CORPUS_RATE);
  const lead = Math.round(LEAD_SECONDS * CORPUS_RATE);
  const end = lead + speech.length;
  const samples = new Float32Array(Math.ceil(end / FRAME_SAMPLES) * FRAME_SAMPLES);
  samples.set(speech, lead);
  return { pcm: s16leBytes(floatToS16(samples)), lastVoicedFrame: Math.floor((end - 1) / FRAME_SAMPLES) };
}

/** One turn on an open session: resolves with E → turn.end and E → turn.finalized (ms), or NaN with a cut-off count. */
function turn(ws: WebSocket, c: Clip): Promise<{ end: number; final: number; cutOffs: number }> {
  const silence = Buffer.alloc(FRAME_SAMPLES * 2);
  return new Promise((resolve, reject) => {
    let voicedAt = NaN;
    let endAt = NaN;
    let cutOffs = 0;
    let timer: NodeJS.Timeout | undefined;
    const start = performance.now();
    const finish = (err?: Error, result?: { end: number; final: number; cutOffs: number }) => {
      clearTimeout(timer);
      ws.off('message', onMessage);
      if (err) reject(err);
      else resolve(result!);
    };
    const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
      const at = performance.now();
      if (isBinary) return;
      const e = JSON.parse(data.toString()) as { type: string };
      if (e.type === 'error') return finish(new Error(`error event: ${JSON.stringify(e)}`));
      if (e.type === 'turn.end') {
        if (Number.isNaN(voicedAt)) cutOffs++;
        else if (Number.isNaN(endAt)) endAt = at;
      }
      if (e.type === 'turn.finalized' && !Number.isNaN(endAt)) finish(undefined, { end: endAt - voicedAt, final: at - voicedAt, cutOffs });
    };
    ws.on('message', onMessage);
    const tick = (i: number) => {
      // No end after E (a cut-off whose rest never made a turn of its own): counted, not measured.
      if (performance.now() - start > TURN_TIMEOUT_MS) return finish(undefined, { end: NaN, final: NaN, cutOffs: cutOffs + 1 });
      const at = i * FRAME_SAMPLES * 2;
      ws.send(at < c.pcm.length ? c.pcm.subarray(at, at + FRAME_SAMPLES * 2) : silence);
      if (i === c.lastVoicedFrame) voicedAt = performance.now();
      timer = setTimeout(() => tick(i + 1), Math.max(0, start + (i + 1) * FRAME_MS - performance.now()));
    };
    tick(0);
  });
}

/** Per preset, `turns` turns (after `warmup`) on one session each. */
export async function wallClockTurns(presets: TurnDetection[], turns: number, warmup: number): Promise<WallClockRow[]> {
  const clips = await Promise.all(PLAIN_SENTENCES.slice(0, 8).map(clip));
  const fx = await voiceFixture();
  const gateway = await startBundled('bench/gateway-server.ts', { ...fx.env, SVC_HEALTH_CHECK_SECONDS: '3600' });
  try {
    const rows: WallClockRow[] = [];
    for (const preset of presets) {
      const query = new URLSearchParams({
        model: 'local-stt',
        sample_rate: String(CORPUS_RATE),
        encoding: 'pcm_s16le',
        turn_source: 'gateway',
        turn_detection: preset,
      });
      const ws = new WebSocket(`${gateway.url.replace(/^http/, 'ws')}/stt/websocket?${query}`, { headers: { authorization: `Bearer ${fx.key}` } });
      await new Promise<void>((resolve, reject) => {
        ws.once('error', reject);
        ws.once('message', () => resolve());
      });
      const ends: number[] = [];
      const finals: number[] = [];
      let cutOffs = 0;
      for (let i = 0; i < warmup + turns; i++) {
        const r = await turn(ws, clips[i % clips.length]!);
        process.stderr.write('.');
        if (i < warmup) continue;
        if (!Number.isNaN(r.end)) ends.push(r.end);
        if (!Number.isNaN(r.final)) finals.push(r.final);
        cutOffs += r.cutOffs;
      }
      ws.close();
      const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
      rows.push({
        preset,
        turns,
        endP50: median(ends),
        endP90: percentile(sorted(ends), 90),
        finalP50: median(finals),
        finalP90: percentile(sorted(finals), 90),
        cutOffs,
      });
    }
    process.stderr.write('\n');
    return rows;
  } finally {
    gateway.child.kill('SIGTERM');
    fx.remove();
  }
}
