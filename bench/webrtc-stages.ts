// Where a WebRTC call's turn spends the time the WebSocket's does not (issue #35), stage by stage
// for the same answer, on one clock: the machine's monotonic clock, which the gateway (the probes
// of bench/lib/probed-gateway.ts) and this client share, so that each stage is told apart from
// the next whatever else the machine runs. bench/realtime.ts's set-up (local-stt, local-flite, a
// scripted LLM "Sure, I can help with that."), one WS /v1/realtime session and one WebRTC call
// (bench/lib/webrtc-call.ts) with the same settings, turns alternating; a turn is
// bench/realtime.ts's (a flite question at real time, then silence until the answer is heard).
//
// What bench/realtime.ts calls transport-added (the client's end of speech → first audible
// sample, less the gateway's own svc.turn_latency.first_audible_ms) is split in two:
// - the way in, from E (the client sends the frame holding the question's last voiced sample)
//   to the end of speech as the gateway counts it (TurnLog: the end the detector found, at the
//   time its audio arrived), where the gateway's clock starts: the frame's way to the gateway's
//   session (WebRTC: the client's socket, the gateway's socket, the session's append) and where
//   the detector put the end of speech, in audio ms after the last voiced sample;
// - the way out, from H, the gateway's first audible sample (where its clock stops: a listener
//   playing the answer from when its first audio went to the transport) to when the client hears
//   it: when the audio holding it left (WS: the delta handed to the socket; WebRTC: the playout's
//   frame holding it, plus the sample's place in the frame), its way to the client (WebRTC: the
//   gateway's socket, the client's socket, the track), the codec's shift (where the first sample
//   above -50 dBFS lies in the decoded audio less where it lay in the pcm the gateway encoded) and
//   what a client playing from the answer's first packet hears. bench/realtime.ts's own figure
//   is beside it.
// Then the turn detector alone on the questions, offline (no clock at all): where it ends the
// turn on the pcm the WebSocket carries and on the same audio after the Opus round trip a WebRTC
// caller's audio makes (20 ms frames, libopus VOIP as browsers encode), on flite's speech cut to
// digital silence and over noise floors from -80 to -40 dBFS, as microphones have.
//
//   npx tsx bench/webrtc-stages.ts [--turns 8] [--warmup 1] [--preemptive] [--eagerness server_vad|high|auto|low]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import OpusScript from 'opusscript';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { AudibleWatch, firstAudibleSample } from '../gateway/audio/first-audible.ts';
import { TurnDetector } from '../gateway/stt/turn-detector.ts';
import { presetSettings } from '../gateway/stt/turn-params.ts';
import { openDatabase } from '../server/db/database.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { median, table } from './lib/load.ts';
import { EventSocket, FRAME_MS, noiseFloor, NOISE_FLOOR_DBFS, question, RATE, withAudio, type Event, type Question } from './lib/paced-turns.ts';
import { floatToS16, s16leBytes } from '../gateway/audio/pcm.ts';
import { startBundled, startTs } from './lib/processes.ts';
import { probeRtpOverUdp } from './lib/udp-probe.ts';
import { voiceFixture } from './lib/voice-fixture.ts';
import { WebRtcCall } from './lib/webrtc-call.ts';

const { values } = parseArgs({
  options: {
    turns: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '1' },
    preemptive: { type: 'boolean', default: false },
    eagerness: { type: 'string', default: 'server_vad' },
  },
});
const turns = Number(values.turns);
const warmup = Number(values.warmup);
const turnDetection =
  values.eagerness === 'server_vad' ? { type: 'server_vad', silence_duration_ms: 500 } : { type: 'semantic_vad', eagerness: values.eagerness };
const QUESTIONS = [
  'What time do you open tomorrow?',
  'Can I change my delivery address?',
  'Where is my package right now?',
  'How much is the premium plan?',
  'Is the store open on Sunday?',
  'Can you book a table for two?',
  'What will the weather be like?',
  'Do you ship to Canada?',
];
const LLM = 'bench-llm';
const SAMPLES_PER_MS = RATE / 1000;
const FRAME_SAMPLES = FRAME_MS * SAMPLES_PER_MS;
/** RTP ticks (48 kHz) per sample at 24 kHz. */
const TICKS_PER_SAMPLE = 2;
/** performance.now() on the monotonic clock the gateway's probes use (ms). */
const offset = Number(process.hrtime.bigint()) / 1e6 - performance.now();
const mono = (perfNow = performance.now()) => perfNow + offset;

/** The client's RTP packets at its socket (bench/lib/udp-probe.ts). */
const clientUdp: { way: 'out' | 'in'; ts: number; t: number }[] = [];
probeRtpOverUdp((way, ts) => clientUdp.push({ way, ts, t: mono() }));

const samplesOf = (pcm: Buffer) => new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
const crossing = (pcm: Buffer) => firstAudibleSample(samplesOf(pcm));

interface Received {
  t: number;
  pcm: Buffer;
  /** RTP timestamp (WebRTC). */
  ts?: number;
}
interface TurnRecord {
  path: 'ws' | 'rtc';
  q: Question;
  /** Frames sent on the path before this turn's first. */
  firstFrame: number;
  /** When each of the turn's frames was sent. */
  sent: number[];
  events: { t: number; e: Event }[];
  audio: Received[];
  responseId: string;
  firstAudibleMs: number;
}

/** Sends the question on a path, records what comes back; ends at svc.turn_latency for the answer (and on WebRTC its audio played out). */
function turn(
  path: 'ws' | 'rtc',
  q: Question,
  firstFrame: number,
  send: (frame: Buffer) => void,
  listen: (onEvent: ((e: Event, at: number) => void) | undefined, onAudio: ((r: Received) => void) | undefined) => void,
): Promise<TurnRecord> {
  const sent: number[] = [];
  return withAudio<TurnRecord>(
    (frame) => {
      send(frame);
      sent.push(mono());
    },
    q,
    path,
    (audio, settle) => {
      const rec: TurnRecord = { path, q, firstFrame, sent, events: [], audio: [], responseId: '', firstAudibleMs: NaN };
      const heard = new AudibleWatch();
      const received = (r: Received) => {
        rec.audio.push(r);
        if (heard.sentBytes(r.pcm, 'pcm_s16le', RATE, r.t) !== undefined) audio.stop();
      };
      let latency = false;
      let stopped = path === 'ws';
      listen((e, at) => {
        rec.events.push({ t: mono(at), e });
        if (e.type === 'error') return settle.reject(new Error(`${path}: ${JSON.stringify(e)}`));
        if (e.type === 'response.output_audio.delta') received({ t: mono(at), pcm: Buffer.from(e.delta as string, 'base64') });
        if (e.type === 'svc.turn_latency' && e.response_id && !Number.isNaN(audio.voicedSentAt) && !latency) {
          latency = true;
          rec.responseId = e.response_id as string;
          rec.firstAudibleMs = e.first_audible_ms as number;
        }
        if (e.type === 'output_audio_buffer.stopped' && latency && e.response_id === rec.responseId) stopped = true;
        if (!latency || !stopped) return;
        listen(undefined, undefined);
        settle.resolve(rec);
      }, received);
    },
  );
}

/** When a client playing `audio` from its first chunk, at receipt, hears its first audible sample. */
function heardAt(audio: Received[]): number {
  const w = new AudibleWatch();
  for (const r of audio) if (w.sentBytes(r.pcm, 'pcm_s16le', RATE, r.t) !== undefined) break;
  return w.heardAt ?? NaN;
}

type Stage = { stage: string; t: number; [k: string]: any };

/** One turn's stages (ms), named as the table's rows. */
function stagesOf(rec: TurnRecord, stages: Stage[]): Record<string, number> {
  const find = (f: (s: Stage) => boolean) => stages.find(f);
  const created = find((s) => s.stage === 'event' && s.type === 'response.created' && s.response === rec.responseId)!;
  const sid = created.sid as number;
  const lastVoiced = rec.q.lastVoicedSample;
  const lastFrame = rec.q.lastVoicedFrame;
  const E = rec.sent[lastFrame]!;
  const handled = find((s) => s.stage === 'append' && s.sid === sid && s.n === rec.firstFrame + lastFrame)!.t;
  const stop = find((s) => s.stage === 'speech-stopped' && s.sid === sid && s.t > handled)!;
  const H = find((s) => s.stage === 'gateway-audible' && s.response === rec.responseId)!.heardAt as number;
  const gotCreated = rec.events.find((x) => x.e.type === 'response.created' && (x.e.response as { id: string }).id === rec.responseId)!;
  // The answer's audio: what arrived after E (the gateway sends audio only while it answers, and the turn before had played out).
  const answer = rec.audio.filter((r) => r.t > E);
  const heard = heardAt(answer);
  const c: Record<string, number> = {};
  if (rec.path === 'rtc') {
    const ts = ((rec.firstFrame + lastFrame) * FRAME_SAMPLES * TICKS_PER_SAMPLE) >>> 0;
    const out = clientUdp.find((u) => u.way === 'out' && u.ts === ts && u.t >= E - 1)?.t ?? NaN;
    const inAt = find((s) => s.stage === 'udp-in' && s.ts === ts && s.t >= E - 1)?.t ?? NaN;
    Object.assign(c, {
      'in: E → client socket': out - E,
      'in: client socket → gateway socket': inAt - out,
      'in: gateway socket → append handled': handled - inAt,
    });
  }
  Object.assign(c, {
    'in: E → append handled': handled - E,
    'in: detector end − last voiced sample (audio ms)': stop.audioEndMs - (rec.firstFrame * FRAME_MS + lastVoiced / SAMPLES_PER_MS),
    'in: E → speech end (gateway clock starts)': stop.speechEnd - E,
  });
  if (rec.path === 'ws') {
    const deltas = stages.filter((s) => s.stage === 'event' && s.type === 'response.output_audio.delta' && s.response === rec.responseId);
    const k = deltas.findIndex((d) => d.crossing >= 0);
    const inChunk = deltas[k]!.crossing / SAMPLES_PER_MS;
    const arrived = rec.audio.filter((r) => r.t >= created.t)[k]!.t;
    Object.assign(c, {
      'out: H → audible chunk left': deltas[k]!.t + inChunk - H,
      'out: chunk left → at the client': arrived - deltas[k]!.t,
      'out: codec shift': 0,
    });
  } else {
    const frames = stages.filter((s) => s.stage === 'frame-out' && s.response === rec.responseId);
    const k = frames.findIndex((f) => f.crossing >= 0);
    const f = frames[k]!;
    const inFrame = f.crossing / SAMPLES_PER_MS;
    const out = find((s) => s.stage === 'udp-out' && s.ts === f.ts && s.t >= f.t0)?.t ?? NaN;
    const inAt = clientUdp.find((u) => u.way === 'in' && u.ts === f.ts && u.t >= f.t0)?.t ?? NaN;
    const packet = answer.find((r) => r.ts === f.ts)!;
    // Where the first audible sample lies, in samples from the answer's first frame: decoded against encoded.
    const first = frames[0]!.ts as number;
    const since = (ts: number) => ((ts - first) >>> 0) / TICKS_PER_SAMPLE;
    const decoded = answer.find((r) => crossing(r.pcm) >= 0)!;
    const shift = (since(decoded.ts!) + crossing(decoded.pcm) - (since(f.ts) + f.crossing)) / SAMPLES_PER_MS;
    Object.assign(c, {
      'out: first chunk queued → first frame sent': frames[0]!.t0 - find((s) => s.stage === 'playout-push' && s.response === rec.responseId)!.t,
      'out: H → audible chunk left': f.t0 + inFrame - H,
      'out: frame sent → gateway socket (Opus, SRTP)': out - f.t0,
      'out: gateway socket → client socket': inAt - out,
      'out: client socket → track': packet.t - inAt,
      'out: chunk left → at the client': packet.t - f.t0,
      'out: codec shift': shift,
      'out: first packet before response.created (ms)': Math.max(0, gotCreated.t - answer[0]!.t),
    });
  }
  // bench/realtime.ts before 2026-12-05 counted WebRTC audio only from response.created's arrival on the data channel.
  const gated = rec.path === 'rtc' ? heardAt(rec.audio.filter((r) => r.t >= gotCreated.t)) : heard;
  Object.assign(c, {
    'out: H → heard at the client': heard - H,
    'transport-added (bench/realtime.ts)': heard - E - rec.firstAudibleMs,
    'same, audio counted from response.created': gated - E - rec.firstAudibleMs,
  });
  return c;
}

/**
 * The turn detector (server_vad, 500 ms) on the questions one after another with a second of
 * silence after each, as one session hears them, `shift` samples into the stream (the questions
 * meet its 32 ms frames at another phase); `floorDbfs` under all of it (null: digital silence);
 * `opus`: through the Opus round trip a WebRTC caller's audio makes (20 ms frames, libopus VOIP
 * as browsers encode speech). Where it ends each turn: ms of audio after the last voiced sample.
 */
async function detectorEnds(texts: string[], floorDbfs: number | null, opus: boolean, shift: number): Promise<number[]> {
  const parts: Float32Array[] = [floorDbfs === null ? new Float32Array(shift) : noiseFloor(shift, floorDbfs, 3)];
  let length = shift;
  const lastVoiced: number[] = [];
  for (const [i, text] of texts.entries()) {
    const q = await question(text, { floorDbfs });
    const pcm = Float32Array.from(samplesOf(q.pcm), (x) => x / 32768);
    const after = floorDbfs === null ? new Float32Array(RATE) : noiseFloor(RATE, floorDbfs, 11 + i);
    lastVoiced.push(length + q.lastVoicedSample);
    parts.push(pcm, after);
    length += pcm.length + after.length;
  }
  const stream = new Float32Array(length);
  for (let at = 0, k = 0; k < parts.length; at += parts[k]!.length, k++) stream.set(parts[k]!, at);
  const detector = new TurnDetector(RATE, {
    ...presetSettings('balanced', { eager: true, fixedSilenceMs: 500 }),
    speechThreshold: 0.5,
    finalizeOnEagerEnd: true,
  });
  const encoder = new OpusScript(RATE, 1, OpusScript.Application.VOIP);
  const decoder = new OpusScript(RATE, 1);
  const ends: number[] = [];
  for (let at = 0; at + FRAME_SAMPLES <= length; at += FRAME_SAMPLES) {
    let frame: Float32Array = stream.subarray(at, at + FRAME_SAMPLES);
    if (opus) {
      const pcm = s16leBytes(floatToS16(frame));
      frame = Float32Array.from(samplesOf(decoder.decode(encoder.encode(pcm, FRAME_SAMPLES))), (x) => x / 32768);
    }
    const heardTo = at + FRAME_SAMPLES;
    for (const e of await detector.push(frame)) {
      const turn = ends.length;
      if (e.type === 'turn.end' && turn < lastVoiced.length && heardTo > lastVoiced[turn]!) ends.push((heardTo - lastVoiced[turn]!) / SAMPLES_PER_MS);
    }
  }
  detector.close();
  encoder.delete();
  decoder.delete();
  if (ends.length !== texts.length) throw new Error(`the detector ended ${ends.length} turns of ${texts.length}`);
  return ends;
}

// ---- the stack, as bench/realtime.ts sets it up

const questions = await Promise.all(QUESTIONS.map((text) => question(text)));
const upstream = await startTs('bench/upstream-server.ts', {
  BENCH_UPSTREAM_MODE: 'stream',
  BENCH_STREAM_CHUNKS: JSON.stringify(['Sure', ',', ' I can', ' help', ' with that', '.']),
  BENCH_STREAM_DELAY_MS: '0',
});
const fx = await voiceFixture();
{
  const db = openDatabase(fx.databaseUrl);
  await upsertModel(db.prisma, checkProtocol, {
    id: LLM,
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: upstream.url, protocol: 'openai' },
  });
  await db.close();
}
const stagesDir = mkdtempSync(join(tmpdir(), 'svc-bench-stages-'));
const stagesFile = join(stagesDir, 'stages.jsonl');
const gateway = await startBundled('bench/lib/probed-gateway.ts', { ...fx.env, SVC_HEALTH_CHECK_SECONDS: '3600', BENCH_STAGES_FILE: stagesFile });
const cleanup = () => {
  gateway.child.kill('SIGTERM');
  upstream.child.kill('SIGTERM');
  fx.remove();
  rmSync(stagesDir, { recursive: true, force: true });
};
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

const fmt = (x: number) => (Number.isNaN(x) ? '-' : x.toFixed(1));
const p50 = (xs: number[]) => {
  const ok = xs.filter((x) => !Number.isNaN(x));
  return ok.length ? median(ok) : NaN;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

try {
  const load = [loadavg()[0]!];
  const session = { type: 'realtime', svc_turn_latency: true, svc_preemptive_answers: values.preemptive, audio: { input: { turn_detection: turnDetection } } };
  const ws = await EventSocket.open(`${gateway.url.replace(/^http/, 'ws')}/v1/realtime?model=${LLM}`, { authorization: `Bearer ${fx.key}` });
  const updated = ws.socket.next('session.updated');
  ws.socket.ws.send(JSON.stringify({ type: 'session.update', session }));
  await updated;
  const rtc = await WebRtcCall.open(gateway.url, fx.key, { ...session, model: LLM });
  const frames = { ws: 0, rtc: 0 };
  const records: TurnRecord[] = [];
  for (let i = 0; i < 2 * (warmup + turns); i++) {
    const q = questions[Math.floor(i / 2) % questions.length]!;
    // ws, rtc, rtc, ws, ws, rtc, …: each path goes first as often as second.
    const path = (i + Math.floor(i / 2)) % 2 === 0 ? 'ws' : 'rtc';
    const firstFrame = frames[path];
    const rec =
      path === 'ws'
        ? await turn(
            'ws',
            q,
            firstFrame,
            (frame) => {
              frames.ws++;
              ws.socket.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: frame.toString('base64') }));
            },
            (onEvent) => (ws.socket.handler = onEvent),
          )
        : await turn(
            'rtc',
            q,
            firstFrame,
            (frame) => {
              frames.rtc++;
              rtc.call.frame(frame);
            },
            (onEvent, onAudio) => {
              rtc.call.handler = onEvent;
              rtc.call.onAudio = onAudio && ((pcm, at, ts) => onAudio({ t: mono(at), pcm, ts }));
            },
          );
    if (i >= 2 * warmup) records.push(rec);
    process.stderr.write('.');
  }
  ws.socket.ws.close();
  await rtc.call.close();
  load.push(loadavg()[0]!);

  const stages = readFileSync(stagesFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Stage);
  const columns = { ws: new Map<string, number[]>(), rtc: new Map<string, number[]>() };
  for (const rec of records)
    for (const [name, x] of Object.entries(stagesOf(rec, stages))) columns[rec.path].set(name, [...(columns[rec.path].get(name) ?? []), x]);
  const names = [...new Set([...columns.rtc.keys(), ...columns.ws.keys()])].sort((a, b) => Number(b.startsWith('in')) - Number(a.startsWith('in')));
  const row = (name: string) => ({ stage: name, 'WebSocket p50': fmt(p50(columns.ws.get(name) ?? [])), 'WebRTC p50': fmt(p50(columns.rtc.get(name) ?? [])) });

  // The detector offline: the questions at 8 phases against its frames, 64 turns per row.
  const detectorRows: Record<string, string>[] = [];
  for (const floor of [null, -80, NOISE_FLOOR_DBFS, -60, -50, -40]) {
    const ends = { pcm: [] as number[], opus: [] as number[] };
    for (let shift = 0; shift < FRAME_SAMPLES; shift += FRAME_SAMPLES / 8) {
      ends.pcm.push(...(await detectorEnds(QUESTIONS, floor, false, shift)));
      ends.opus.push(...(await detectorEnds(QUESTIONS, floor, true, shift)));
    }
    const paired = ends.opus.map((x, i) => x - ends.pcm[i]!);
    detectorRows.push({
      'under the speech':
        floor === null
          ? 'digital silence (flite, as the benchmarks sent until 2026-12-05)'
          : `a ${floor} dBFS noise floor${floor === NOISE_FLOOR_DBFS ? ' (as they send now)' : ''}`,
      'pcm, mean / p50': `${fmt(mean(ends.pcm))} / ${fmt(p50(ends.pcm))}`,
      'Opus round trip, mean / p50': `${fmt(mean(ends.opus))} / ${fmt(p50(ends.opus))}`,
      'Opus − pcm, paired mean / p50': `${fmt(mean(paired))} / ${fmt(p50(paired))}`,
    });
  }
  process.stderr.write('\n');

  console.log(
    `\nWebRTC against WebSocket, stage by stage, ${new Date().toISOString()}, \`npx tsx bench/webrtc-stages.ts${process.argv.length > 2 ? ' ' + process.argv.slice(2).join(' ') : ''}\`: ` +
      `${turns} turns a path after ${warmup} warm-up, alternating, ${values.eagerness}${values.preemptive ? ', preemptive answers' : ''}; ` +
      `load average (1 min) ${load.map((l) => l.toFixed(1)).join(' → ')} on ${availableParallelism()} cores. ms, p50 (each row's own median: the rows do not add up exactly)\n`,
  );
  console.log(table(names.map(row)));
  console.log('\nThe turn detector (server_vad 500 ms) offline, 8 questions at 8 phases: its end of turn, in audio ms after the last voiced sample\n');
  console.log(table(detectorRows));
} finally {
  cleanup();
}
process.exit();
