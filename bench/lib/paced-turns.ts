// The realtime bench's turns (bench/realtime.ts, and its WebRTC path bench/lib/webrtc-call.ts): a
// question spoken by flite, streamed at real time in 20 ms pcm16 frames at 24 kHz paced by the
// clock, then silence until stopped; a socket whose JSON events go to the current turn's handler
// with their receipt time; a turn's figures, whatever its path.
import WebSocket from 'ws';
import { resample } from '../../gateway/audio/resample.ts';
import { floatToS16, s16leBytes } from '../../gateway/audio/pcm.ts';
import { CORPUS_RATE, say } from '../../test/support/turn-corpus.ts';

export const RATE = 24_000;
export const FRAME_MS = 20;
const FRAME_BYTES = ((RATE * FRAME_MS) / 1000) * 2;
const SILENCE = Buffer.alloc(FRAME_BYTES);
const LEAD_SECONDS = 0.5;
/** From a turn's first frame: a turn not answered by then failed. */
const TURN_TIMEOUT_MS = 20_000;

export interface Question {
  text: string;
  /** The lead silence and the speech, pcm16 at 24 kHz, padded to whole frames. */
  pcm: Buffer;
  /** The frame holding the last voiced sample. */
  lastVoicedFrame: number;
}

export async function question(text: string): Promise<Question> {
  const speech = resample(await say(text, 'flite:slt'), CORPUS_RATE, RATE);
  const lead = Math.round(LEAD_SECONDS * RATE);
  const end = lead + speech.length;
  const frameSamples = FRAME_BYTES / 2;
  const samples = new Float32Array(Math.ceil(end / frameSamples) * frameSamples);
  samples.set(speech, lead);
  return { text, pcm: s16leBytes(floatToS16(samples)), lastVoicedFrame: Math.floor((end - 1) / frameSamples) };
}

/** A question's frames then silence, one frame every FRAME_MS by the clock (a late timer does not delay the frames after it), until stopped. */
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
      send(at < q.pcm.length ? q.pcm.subarray(at, at + FRAME_BYTES) : SILENCE);
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
