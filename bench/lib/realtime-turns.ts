// What the realtime benchmark's paths share (bench/realtime.ts): the questions spoken by flite at
// real time in 20 ms frames (E, the end of speech, is when the frame with the last voiced sample
// was sent), a socket of JSON events with their receipt times, a turn's figures, and the first
// audible sample of an answer: when a client that starts playing at the first audio it receives
// plays it.
import WebSocket from 'ws';
import { resample } from '../../gateway/audio/resample.ts';
import { floatToS16, s16leBytes } from '../../gateway/audio/pcm.ts';
import { CORPUS_RATE, say } from '../../test/support/turn-corpus.ts';

export const RATE = 24_000;
export const FRAME_MS = 20;
export const FRAME_BYTES = ((RATE * FRAME_MS) / 1000) * 2;
export const SILENCE = Buffer.alloc(FRAME_BYTES);
export const LEAD_SECONDS = 0.5;
/** From a turn's first frame: a turn not answered by then failed. */
export const TURN_TIMEOUT_MS = 20_000;

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
  turnDetection: number;
  llmFirstToken: number;
  ttsFirstAudio: number;
  /** realtime only */
  gatewayAdded: number;
  /** speech_stopped / turn.end → first audio */
  endToAudio: number;
  total: number;
  /** end of speech → the first audible sample plays (FirstAudible); NaN on the routes path */
  audible: number;
  /** speech_stopped → the first audible sample, less the gateway's first_audio_ms: what the transport adds; NaN on the routes path */
  audibleAdded: number;
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

/** A sample at least this loud (of full scale, about -40 dBFS) is audible. */
const AUDIBLE = 0.01 * 32768;

/**
 * When the first audible sample of an answer plays, for a client that starts playing at the
 * first audio it receives and plays on at the audio's rate: a chunk's sample plays at the start
 * plus its offset, or when its chunk arrives if that is later. Fed every chunk of one answer in
 * order, with its receipt time.
 */
export class FirstAudible {
  private start = NaN;
  private samples = 0;
  /** The first audible sample's play time; NaN until one came. */
  at = NaN;

  chunk(pcm: Buffer, receivedAt: number): void {
    if (!Number.isNaN(this.at)) return;
    if (Number.isNaN(this.start)) this.start = receivedAt;
    for (let i = 0; i + 1 < pcm.length; i += 2) {
      if (Math.abs(pcm.readInt16LE(i)) < AUDIBLE) continue;
      const offsetMs = ((this.samples + i / 2) * 1000) / RATE;
      this.at = Math.max(this.start + offsetMs, receivedAt);
      return;
    }
    this.samples += pcm.length / 2;
  }
}
