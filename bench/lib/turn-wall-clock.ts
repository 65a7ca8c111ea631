// The end of turn as a client sees it (bench/turn-detection.ts --wall-clock): one gateway process
// (bench/gateway-server.ts, bundled, a fresh SQLite fixture), `local-stt` on WS /stt/websocket
// (turn_source=gateway), flite speech (the corpus's plain sentences, voice slt, trimmed of its
// silence) after 0.5 s of silence, streamed at real time in 20 ms pcm16 frames paced by the clock,
// then silence until the turn's finals are in. E is when the frame holding the last voiced sample
// was sent; per turn: E → `turn.end` (the detector's decision, as the client receives it) and
// E → `turn.finalized` (the turn's final transcript is in: before issue #32, turn.end came only
// then). A turn.end before E (a cut-off) is counted, not measured.
//
// Where E → turn.end goes: the session's audio, exactly as sent, is fed again afterwards to a
// detector in this process (same settings, same 20 ms frames), which finds the frame each turn
// ended at. E → that frame's sending is the detector's own time on these very clips and this
// very framing (audio time: whole 20 ms frames); from that frame's sending to the client's receipt
// of turn.end is what the gateway adds (the socket both ways, the session's queue, the Silero
// worker, the event's delivery).
import WebSocket from 'ws';
import { floatToS16, s16leBytes } from '../../gateway/audio/pcm.ts';
import { TurnDetector, turnSettings, type TurnDetection } from '../../gateway/stt/turn-detector.ts';
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
  /** E → the frame the detector ended the turn at, in audio time (the same clips, replayed). */
  audioP50: number;
  /** From sending the frame the turn ended at to receiving turn.end. */
  gatewayP50: number;
  gatewayP90: number;
  /** Turns whose replayed end was not at the same place as the gateway's (not measured). */
  unmatched: number;
}

/** What a session sent, frame by frame, and when each turn.end came. */
interface SessionLog {
  frames: Buffer[];
  sentAt: number[];
  /** Per turn.end received: its receipt time and the index of the last frame sent before it. */
  ends: { at: number; afterFrame: number }[];
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
function turn(ws: WebSocket, c: Clip, log: SessionLog): Promise<{ end: number; final: number; cutOffs: number; lastVoiced: number }> {
  const silence = Buffer.alloc(FRAME_SAMPLES * 2);
  return new Promise((resolve, reject) => {
    let voicedAt = NaN;
    let endAt = NaN;
    let cutOffs = 0;
    let timer: NodeJS.Timeout | undefined;
    const start = performance.now();
    let lastVoiced = -1;
    const finish = (err?: Error, result?: { end: number; final: number; cutOffs: number }) => {
      clearTimeout(timer);
      ws.off('message', onMessage);
      if (err) reject(err);
      else resolve({ ...result!, lastVoiced });
    };
    const onMessage = (data: WebSocket.RawData, isBinary: boolean) => {
      const at = performance.now();
      if (isBinary) return;
      const e = JSON.parse(data.toString()) as { type: string };
      if (e.type === 'error') return finish(new Error(`error event: ${JSON.stringify(e)}`));
      if (e.type === 'turn.end') {
        log.ends.push({ at, afterFrame: log.frames.length - 1 });
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
      const frame = at < c.pcm.length ? c.pcm.subarray(at, at + FRAME_SAMPLES * 2) : silence;
      ws.send(frame);
      log.frames.push(frame);
      log.sentAt.push(performance.now());
      if (i === c.lastVoicedFrame) {
        voicedAt = performance.now();
        lastVoiced = log.frames.length - 1;
      }
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
      const log: SessionLog = { frames: [], sentAt: [], ends: [] };
      /** Per measured turn: the frame holding its last voiced sample. */
      const measured: number[] = [];
      for (let i = 0; i < warmup + turns; i++) {
        const r = await turn(ws, clips[i % clips.length]!, log);
        process.stderr.write('.');
        if (i < warmup) continue;
        if (!Number.isNaN(r.end)) ends.push(r.end);
        if (!Number.isNaN(r.final)) finals.push(r.final);
        if (!Number.isNaN(r.end)) measured.push(r.lastVoiced);
        cutOffs += r.cutOffs;
      }
      ws.close();
      const split = await replay(log, preset, measured);
      const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
      rows.push({
        preset,
        turns,
        endP50: median(ends),
        endP90: percentile(sorted(ends), 90),
        finalP50: median(finals),
        finalP90: percentile(sorted(finals), 90),
        cutOffs,
        audioP50: median(split.audio),
        gatewayP50: median(split.gateway),
        gatewayP90: percentile(sorted(split.gateway), 90),
        unmatched: split.unmatched,
      });
    }
    process.stderr.write('\n');
    return rows;
  } finally {
    gateway.child.kill('SIGTERM');
    fx.remove();
  }
}

/**
 * The session's audio fed again to a detector here: for each measured turn (the frame holding its
 * last voiced sample), the frame the replayed detector ended it at; the gateway's turn.end must
 * have come after that frame was sent (else the two detectors disagree: counted, not measured).
 */
async function replay(log: SessionLog, preset: TurnDetection, measured: number[]): Promise<{ audio: number[]; gateway: number[]; unmatched: number }> {
  const detector = new TurnDetector(CORPUS_RATE, turnSettings(preset));
  const endFrames: number[] = [];
  try {
    for (const [i, frame] of log.frames.entries()) {
      const samples = new Float32Array(frame.length / 2);
      for (let k = 0; k < samples.length; k++) samples[k] = frame.readInt16LE(2 * k) / 32768;
      for (const e of await detector.push(samples)) if (e.type === 'turn.end') endFrames.push(i);
    }
  } finally {
    detector.close();
  }
  const audio: number[] = [];
  const gateway: number[] = [];
  let unmatched = 0;
  for (const voiced of measured) {
    // The first end found after the turn's last voiced frame, here and at the gateway.
    const here = endFrames.find((f) => f >= voiced);
    const there = log.ends.find((e) => e.afterFrame >= voiced);
    // The gateway's turn.end arrives after the frame that made it was sent, before the next turn's audio.
    if (here === undefined || !there || there.afterFrame < here || there.afterFrame > here + 10) {
      unmatched++;
      continue;
    }
    audio.push((here - voiced) * FRAME_MS);
    gateway.push(there.at - log.sentAt[here]!);
  }
  return { audio, gateway, unmatched };
}
