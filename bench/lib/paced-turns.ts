// The realtime bench's turns (bench/realtime.ts, and its WebRTC path bench/lib/webrtc-call.ts): a
// question spoken by flite, streamed at real time in 20 ms pcm16 frames at 24 kHz paced by the
// clock, then silence until stopped; a socket whose JSON events go to the current turn's handler
// with their receipt time; a turn's figures, whatever its path.
//
// Under the question and the silence after it, a microphone's noise floor (white, -70 dBFS, a quiet
// room's; local-stt hears the eight questions as it does without it): no microphone gives digital
// silence, and on flite's speech cut to digital silence the turn detector ends a turn ~20 ms later
// once the audio has been through Opus (a WebRTC caller's) than on the pcm itself, against ~5 ms,
// about the codec's delay, over a noise floor (bench/webrtc-stages.ts).
import WebSocket from 'ws';
import { resample } from '../../gateway/audio/resample.ts';
import { floatToS16, s16leBytes } from '../../gateway/audio/pcm.ts';
import { CORPUS_RATE, say } from '../../test/support/turn-corpus.ts';

export const RATE = 24_000;
export const FRAME_MS = 20;
const FRAME_SAMPLES = (RATE * FRAME_MS) / 1000;
const FRAME_BYTES = FRAME_SAMPLES * 2;
const LEAD_SECONDS = 0.5;
export const NOISE_FLOOR_DBFS = -70;

/** `n` samples of white noise at `dbfs` RMS (uniform, deterministic: the same run after run). */
export function noiseFloor(n: number, dbfs = NOISE_FLOOR_DBFS, seed = 1): Float32Array {
  const amplitude = 10 ** (dbfs / 20) * Math.sqrt(3);
  const out = new Float32Array(n);
  let state = seed;
  for (let i = 0; i < n; i++) {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
    out[i] = amplitude * ((state / 0x7fffffff) * 2 - 1);
  }
  return out;
}

/** A second of the noise floor, frame after frame after the question. */
const SILENCE = s16leBytes(floatToS16(noiseFloor(RATE, NOISE_FLOOR_DBFS, 7)));
/** From a turn's first frame: a turn not answered by then failed. */
const TURN_TIMEOUT_MS = 20_000;

export interface Question {
  text: string;
  /** The lead silence and the speech over the noise floor, pcm16 at 24 kHz, padded to whole frames. */
  pcm: Buffer;
  /** The last voiced sample (flite's speech trimmed of its silence), and the frame holding it. */
  lastVoicedSample: number;
  lastVoicedFrame: number;
}

/** `text` spoken by flite after LEAD_SECONDS of silence, over a noise floor at `floorDbfs` (null: digital silence). */
export async function question(text: string, { floorDbfs = NOISE_FLOOR_DBFS }: { floorDbfs?: number | null } = {}): Promise<Question> {
  const speech = resample(await say(text, 'flite:slt'), CORPUS_RATE, RATE);
  const lead = Math.round(LEAD_SECONDS * RATE);
  const end = lead + speech.length;
  const length = Math.ceil(end / FRAME_SAMPLES) * FRAME_SAMPLES;
  const samples = floorDbfs === null ? new Float32Array(length) : noiseFloor(length, floorDbfs);
  for (let i = 0; i < speech.length; i++) samples[lead + i]! += speech[i]!;
  return { text, pcm: s16leBytes(floatToS16(samples)), lastVoicedSample: end - 1, lastVoicedFrame: Math.floor((end - 1) / FRAME_SAMPLES) };
}

/** A question's frames then the noise floor, one frame every FRAME_MS by the clock (a late timer does not delay the frames after it), until stopped. */
export class PacedAudio {
  /** When the frame holding the last voiced sample was sent (E). */
  voicedSentAt = NaN;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(q: Question, send: (frame: Buffer) => void) {
    const start = performance.now();
    const tick = (i: number) => {
      if (this.stopped) return;
      const at = i * FRAME_BYTES;
      const after = ((i - q.pcm.length / FRAME_BYTES) * FRAME_BYTES) % SILENCE.length;
      send(at < q.pcm.length ? q.pcm.subarray(at, at + FRAME_BYTES) : SILENCE.subarray(after, after + FRAME_BYTES));
      if (i === q.lastVoicedFrame) this.voicedSentAt = performance.now();
      this.timer = setTimeout(() => tick(i + 1), Math.max(0, start + (i + 1) * FRAME_MS - performance.now()));
    };
    tick(0);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}

export type Event = { type: string; [k: string]: unknown };

/** A socket whose JSON events go to the current turn's handler, each with its receipt time (taken before parsing). */
export class EventSocket {
  handler: ((e: Event, at: number) => void) | undefined;
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      const at = performance.now();
      if (!isBinary) this.handler?.(JSON.parse(data.toString()) as Event, at);
    });
  }

  /** Resolves at the socket's first event (session.created, session.started), or at the open when `firstEvent` is false. */
  static open(url: string, headers: Record<string, string>, firstEvent = true): Promise<{ socket: EventSocket; first: Event | null }> {
    const ws = new WebSocket(url, { headers });
    return new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => reject(new Error(`${url}: upgrade refused with ${res.statusCode}`)));
      ws.once('error', reject);
      ws.once('open', () => {
        const socket = new EventSocket(ws);
        if (!firstEvent) return resolve({ socket, first: null });
        socket.handler = (e) => {
          socket.handler = undefined;
          resolve({ socket, first: e });
        };
      });
    });
  }

  /** The next event of `type` (an error event rejects). */
  next(type: string): Promise<Event> {
    return new Promise((resolve, reject) => {
      this.handler = (e) => {
        if (e.type === 'error') reject(new Error(`error event: ${JSON.stringify(e)}`));
        if (e.type !== type) return;
        this.handler = undefined;
        resolve(e);
      };
    });
  }
}

export interface Turn {
  /** E → the end of turn (speech_stopped / turn.end) */
  turnDetection: number;
  /** the end of turn → the turn's final transcript in (transcription.completed / turn.finalized) */
  transcriptFinal: number;
  llmFirstToken: number;
  ttsFirstAudio: number;
  /** realtime and WebRTC only */
  gatewayAdded: number;
  /** speech_stopped / turn.end → first audio */
  endToAudio: number;
  /** E → the first audio byte */
  total: number;
  /** E → the first audible sample, as a client playing the answer from its first byte at receipt hears it */
  audible: number;
  /** realtime and WebRTC only: the gateway's own end of speech → first audible sample (svc.turn_latency) */
  gatewayAudible: number;
  /** turn ends before the end of speech */
  cutOffs: number;
}

/** Runs a turn: resolves with its figures, or rejects (after `cleanup`) on an error event or the timeout. */
export function withAudio<T>(
  send: (frame: Buffer) => void,
  q: Question,
  what: string,
  body: (audio: PacedAudio, settle: { resolve(t: T): void; reject(e: Error): void }) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const audio = new PacedAudio(q, send);
    const timer = setTimeout(() => settle.reject(new Error(`${what}: no answer within ${TURN_TIMEOUT_MS} ms ("${q.text}")`)), TURN_TIMEOUT_MS);
    const settle = {
      resolve: (t: T) => {
        audio.stop();
        clearTimeout(timer);
        resolve(t);
      },
      reject: (e: Error) => {
        audio.stop();
        clearTimeout(timer);
        reject(e);
      },
    };
    body(audio, settle);
  });
}
