// A phone carrier's side of a media stream, scripted: a real `ws` client that connects to the
// stream URL and speaks the carrier's protocol as its reference writes it, for the phone
// routes' tests (gateway/routes/phone.test.ts). What each carrier sends and takes is its wire
// (scripted-carrier-wires.ts, with the references); what every carrier does is here: it streams
// the caller's audio in frames, queues the audio the gateway sends, plays it, and echoes each
// mark once the audio queued before it has played (at once when none is queued). On a clear it
// drops the queued audio, and echoes the marks still queued (Twilio, Telnyx, Exotel) or drops
// them (Plivo; Vonage's notifies), acknowledging the clear where the carrier does.
//
// Time on the call is the caller's: every frame the peer sends plays as long a span of what the
// gateway queued (as a carrier streams and plays in real time), so what the caller has heard,
// and which marks are echoed, follows from what the test sends, not from the wall clock.
import WebSocket from 'ws';
import { decodeSamples, encodeSamples } from '../../gateway/audio/sample-encoding.ts';
import { resample } from '../../gateway/audio/resample.ts';
import { parseWav } from '../../gateway/audio/wav.ts';
import { socketEvents, type SocketClose, type EventLog } from './socket-events.ts';
import { WIRES, type CarrierName, type WireFormat } from './scripted-carrier-wires.ts';

export type { CarrierName, WireFormat } from './scripted-carrier-wires.ts';

/** What the gateway sent the carrier, read: audio to play, a mark, a clear; `message` is the JSON it came in (null: a binary frame). */
export type CarrierCommand =
  | { kind: 'audio'; audio: Buffer; message: Record<string, unknown> | null }
  | { kind: 'mark'; name: string; message: Record<string, unknown> }
  | { kind: 'clear'; message: Record<string, unknown> };

interface Queued {
  audio?: Buffer;
  mark?: string;
}

export interface DialOptions {
  /** The stream's format (the carrier's default otherwise). */
  format?: WireFormat;
  /** The stream's custom parameters (Twilio's <Parameter>, Plivo's extraHeaders, Vonage's headers…). */
  parameters?: Record<string, string>;
  /** false: the carrier connects and says nothing (no connected, no start). */
  start?: boolean;
}

export interface ScriptedCall {
  ws: WebSocket;
  streamId: string;
  format: WireFormat;
  /** Everything the gateway sent, read, in order. */
  commands: EventLog<CarrierCommand>;
  closed: Promise<SocketClose>;
  /** The caller's audio (in the stream's format) as media frames; unless `play: false`, each frame plays as long a span of what is queued. */
  send(audio: Buffer, options?: { play?: boolean }): void;
  /** `ms` of the caller's silence (playing as it goes). */
  silence(ms: number, options?: { play?: boolean }): void;
  /** Audio the gateway has sent, in ms (played or not). */
  readonly receivedMs: number;
  /** Audio played to the caller, in ms. */
  readonly playedMs: number;
  /** The audio played to the caller, as float samples at the stream's rate. */
  playedSamples(): Float32Array;
  /** Audio played when the last mark was echoed: what the echoed marks say the caller heard. */
  readonly playedAtLastMark: number;
  /** Names of the marks echoed, in order (those echoed by a clear included). */
  readonly echoed: string[];
  /** Commands that break the carrier's protocol (a wrong stream id, a payload that is not base64): a test expects none. */
  readonly violations: string[];
  raw(data: string | Buffer): void;
  dtmf(digit: string): void;
  /** The carrier ends the stream: its stop message, or (Plivo, Vonage) closing the socket. */
  stop(): void;
}

const encodingOf = (f: WireFormat) => (f.encoding === 'pcm_mulaw' ? 'pcm_mulaw' : 'pcm_s16le');
export const bytesPerMs = (f: WireFormat): number => ((f.encoding === 'pcm_mulaw' ? 1 : 2) * f.sampleRate) / 1000;

/** A WAV file (any rate, mono or mixed down) as the stream's audio, whole 20 ms frames (the last padded with silence). */
export function lineAudio(wav: Buffer, format: WireFormat): Buffer {
  const parsed = parseWav(wav, { channels: 'mix' });
  const samples = parsed.sampleRate === format.sampleRate ? parsed.samples : resample(parsed.samples, parsed.sampleRate, format.sampleRate);
  const bytes = encodeSamples(samples, encodingOf(format));
  const frame = 20 * bytesPerMs(format);
  return Buffer.concat([bytes, silenceOf(format, (frame - (bytes.length % frame)) % frame)]);
}

const silenceOf = (f: WireFormat, bytes: number) => Buffer.alloc(bytes, f.encoding === 'pcm_mulaw' ? 0xff : 0);

/** Dials: connects to `url` (ws://…/phone/<carrier>[/<token>]) and sends what the carrier sends first. */
export async function dial(url: string, carrier: CarrierName, options: DialOptions = {}): Promise<ScriptedCall> {
  const ws = new WebSocket(url);
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const wire = WIRES[carrier](options.format);
  const format = wire.format;
  const perMs = bytesPerMs(format);
  const send = (message: string | Buffer | null) => {
    if (message !== null && ws.readyState === ws.OPEN) ws.send(message);
  };

  const queue: Queued[] = [];
  const echoed: string[] = [];
  const violations: string[] = [];
  const playedChunks: Buffer[] = [];
  let receivedMs = 0;
  let playedMs = 0;
  let playedAtLastMark = 0;
  const echo = (name: string) => {
    echoed.push(name);
    playedAtLastMark = playedMs;
    send(wire.played(name));
  };
  /** Plays up to `ms` of the queue; marks at its head are echoed as their turn comes. */
  const play = (ms: number) => {
    let bytes = Math.round(ms * perMs);
    for (;;) {
      const head = queue[0];
      if (!head) return;
      if (head.mark !== undefined) {
        queue.shift();
        echo(head.mark);
        continue;
      }
      if (bytes === 0) return;
      const take = Math.min(bytes, head.audio!.length);
      playedChunks.push(head.audio!.subarray(0, take));
      playedMs += take / perMs;
      bytes -= take;
      if (take === head.audio!.length) queue.shift();
      else head.audio = head.audio!.subarray(take);
    }
  };

  ws.on('message', (data: Buffer, isBinary) => {
    const command = wire.command(data, isBinary, violations);
    if (!command) return;
    if (command.kind === 'audio') {
      receivedMs += command.audio.length / perMs;
      queue.push({ audio: command.audio });
      const queuedMs = queue.reduce((n, q) => n + (q.audio?.length ?? 0), 0) / perMs;
      if (wire.bufferMs !== undefined && queuedMs > wire.bufferMs) violations.push(`${queuedMs} ms of audio queued: more than the carrier buffers`);
    } else if (command.kind === 'mark') {
      // Nothing queued: the mark is echoed at once.
      if (queue.length === 0) echo(command.name);
      else queue.push({ mark: command.name });
    } else {
      const marks = queue.filter((q) => q.mark !== undefined).map((q) => q.mark!);
      queue.length = 0;
      if (wire.clear.echoesMarks) for (const m of marks) echo(m);
      send(wire.clear.ack);
    }
  });
  // After the peer's own listener: a test waiting on a command sees the peer's state with it counted.
  const { log, closed } = socketEvents<CarrierCommand>(ws, {
    parse: (data, isBinary) => wire.command(data as Buffer, isBinary, []) ?? undefined,
    describe: (c) => (c.kind === 'mark' ? `mark ${c.name}` : c.kind),
  });
  await opened;
  if (options.start !== false) for (const m of wire.opening(options.parameters ?? {})) send(m);

  const sendFrames = (audio: Buffer, { play: playing = true }: { play?: boolean } = {}) => {
    const frame = wire.frameMs * perMs;
    for (let at = 0; at < audio.length; at += frame) {
      const part = audio.subarray(at, at + frame);
      send(wire.media(part));
      if (playing) play(part.length / perMs);
    }
  };

  return {
    ws,
    streamId: wire.streamId,
    format,
    commands: log,
    closed,
    send: sendFrames,
    silence: (ms, o) => sendFrames(silenceOf(format, Math.round(ms * perMs)), o),
    get receivedMs() {
      return receivedMs;
    },
    get playedMs() {
      return playedMs;
    },
    playedSamples: () => decodeSamples(Buffer.concat(playedChunks), encodingOf(format)),
    get playedAtLastMark() {
      return playedAtLastMark;
    },
    echoed,
    violations,
    raw: (data) => ws.send(data),
    dtmf: (digit) => send(wire.dtmf(digit)),
    stop: () => {
      const stop = wire.stop();
      if (stop === null) ws.close(1000);
      else send(stop);
    },
  };
}
