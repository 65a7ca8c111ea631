// A phone carrier's side of a media stream, scripted: a real `ws` client that connects to the
// stream URL and speaks the carrier's protocol as its reference writes it, for the phone
// routes' tests (gateway/routes/phone.test.ts).
//
// Twilio Media Streams, bidirectional (<Connect><Stream>), from
// https://www.twilio.com/docs/voice/media-streams/websocket-messages: sends `connected`
// {protocol "Call", version "1.0.0"}, `start` {sequenceNumber, start {accountSid, streamSid,
// callSid, tracks ["inbound"], customParameters, mediaFormat {encoding "audio/x-mulaw",
// sampleRate 8000, channels 1}}, streamSid}, `media` {sequenceNumber, media {track "inbound",
// chunk, timestamp, payload: base64 μ-law}, streamSid} every 20 ms, `mark` {sequenceNumber,
// streamSid, mark {name}} once the audio sent before that mark has played (at once when none is
// queued), `dtmf`, `stop` {stop {accountSid, callSid}}; takes `media` {streamSid, media
// {payload}} (queued and played in order), `mark` {streamSid, mark {name}} and `clear`
// {streamSid} (the queued audio dropped, the marks still queued echoed at once).
//
// Telnyx media streaming (bidirectional RTP, PCMU), from
// https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket: the
// same exchange with snake_case fields (`sequence_number`, `stream_id` at the top level,
// `start.call_control_id`, `start.media_format` {encoding "PCMU", sample_rate 8000}), and its
// commands carry no stream id (`media` {media {payload}}, `mark` {mark {name}}, `clear`).
//
// Time on the call is the caller's: every 20 ms frame the peer sends plays 20 ms of what the
// gateway queued (as a carrier streams and plays in real time), so what the caller has heard,
// and which marks are echoed, follows from what the test sends, not from the wall clock.
import WebSocket from 'ws';
import { decodeSamples, encodeSamples } from '../../gateway/audio/sample-encoding.ts';
import { resample } from '../../gateway/audio/resample.ts';
import { parseWav } from '../../gateway/audio/wav.ts';
import { socketEvents, type SocketClose, type EventLog } from './socket-events.ts';

export type CarrierName = 'twilio' | 'telnyx';
/** What the gateway sent the carrier, as parsed JSON. */
export type CarrierCommand = { event: string; [k: string]: unknown };

const FRAME = 160; // 20 ms of μ-law at 8 kHz
const MULAW_SILENCE = 0xff;

interface Queued {
  audio?: Buffer;
  mark?: string;
}

export interface ScriptedCall {
  ws: WebSocket;
  streamId: string;
  /** Everything the gateway sent, in order. */
  commands: EventLog<CarrierCommand>;
  closed: Promise<SocketClose>;
  /** The caller's audio (μ-law 8 kHz) as 20 ms media frames; unless `play: false`, each frame plays 20 ms of what is queued. */
  send(ulaw: Buffer, options?: { play?: boolean }): void;
  /** `ms` of the caller's silence (playing as it goes). */
  silence(ms: number, options?: { play?: boolean }): void;
  /** Audio the gateway has sent, in ms (played or not). */
  readonly receivedMs: number;
  /** Audio played to the caller, in ms. */
  readonly playedMs: number;
  /** The audio played to the caller, μ-law. */
  readonly played: Buffer;
  /** Audio played when the last mark was echoed: what the echoed marks say the caller heard. */
  readonly playedAtLastMark: number;
  /** Names of the marks echoed, in order (those echoed by a clear included). */
  readonly echoed: string[];
  /** Commands that break the carrier's protocol (a wrong stream id, a payload that is not base64): a test expects none. */
  readonly violations: string[];
  raw(text: string): void;
  dtmf(digit: string): void;
  stop(): void;
}

/** A WAV file (any rate, mono or mixed down) as telephone audio: μ-law at 8 kHz. */
export function wavToMulaw8k(wav: Buffer): Buffer {
  const parsed = parseWav(wav, { channels: 'mix' });
  return encodeSamples(parsed.sampleRate === 8000 ? parsed.samples : resample(parsed.samples, parsed.sampleRate, 8000), 'pcm_mulaw');
}

/** μ-law audio as float samples (to transcribe what the caller heard). */
export const mulawSamples = (ulaw: Buffer): Float32Array => decodeSamples(ulaw, 'pcm_mulaw');

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Dials: connects to `url` (ws://…/phone/<carrier>/<token>) and sends the carrier's `connected` and `start`. */
export async function dial(url: string, carrier: CarrierName, options: { customParameters?: Record<string, string> } = {}): Promise<ScriptedCall> {
  const ws = new WebSocket(url);
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const streamId =
    carrier === 'twilio'
      ? `MZ${'0'.repeat(24)}${Math.floor(Math.random() * 1e8)
          .toString(16)
          .padStart(8, '0')}`
      : crypto.randomUUID();
  const callId = carrier === 'twilio' ? `CA${'1'.repeat(32)}` : 'v3:call-control-id';
  let sequence = 0;
  let chunk = 0;
  const json = (message: object) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
  };
  const stamp = (event: string, body: object) =>
    carrier === 'twilio'
      ? { event, sequenceNumber: String(++sequence), ...body, streamSid: streamId }
      : { event, sequence_number: String(++sequence), ...body, stream_id: streamId };

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
    json(stamp('mark', { mark: { name } }));
  };
  /** Plays up to `ms` of the queue; marks at its head are echoed as their turn comes. */
  const play = (ms: number) => {
    let bytes = ms * 8;
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
      playedMs += take / 8;
      bytes -= take;
      if (take === head.audio!.length) queue.shift();
      else head.audio = head.audio!.subarray(take);
    }
  };

  ws.on('message', (data, isBinary) => {
    if (isBinary) return void violations.push('a binary message');
    const command = JSON.parse(data.toString()) as CarrierCommand;
    const sid = carrier === 'twilio' ? command.streamSid : undefined;
    if (carrier === 'twilio' && sid !== streamId) violations.push(`${command.event} with streamSid ${String(sid)}`);
    if (command.event === 'media') {
      const payload = (command.media as { payload?: unknown } | undefined)?.payload;
      if (typeof payload !== 'string' || !BASE64.test(payload)) return void violations.push('media without a base64 payload');
      const audio = Buffer.from(payload, 'base64');
      receivedMs += audio.length / 8;
      queue.push({ audio });
    } else if (command.event === 'mark') {
      const name = (command.mark as { name?: unknown } | undefined)?.name;
      if (typeof name !== 'string') return void violations.push('mark without a name');
      // Nothing queued: the mark is echoed at once.
      if (queue.length === 0) echo(name);
      else queue.push({ mark: name });
    } else if (command.event === 'clear') {
      const marks = queue.filter((q) => q.mark !== undefined).map((q) => q.mark!);
      queue.length = 0;
      for (const m of marks) echo(m);
    } else violations.push(`unknown command ${command.event}`);
  });
  // After the peer's own listener: a test waiting on a command sees the peer's state with it counted.
  const { log, closed } = socketEvents<CarrierCommand>(ws, { describe: (c) => c.event });
  await opened;

  if (carrier === 'twilio') {
    json({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    json(
      stamp('start', {
        start: {
          accountSid: `AC${'2'.repeat(32)}`,
          streamSid: streamId,
          callSid: callId,
          tracks: ['inbound'],
          customParameters: options.customParameters ?? {},
          mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        },
      }),
    );
  } else {
    json({ event: 'connected', version: '1.0.0' });
    json(
      stamp('start', {
        start: {
          user_id: crypto.randomUUID(),
          call_control_id: callId,
          client_state: null,
          custom_parameters: options.customParameters ?? {},
          media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
        },
      }),
    );
  }

  const sendFrames = (ulaw: Buffer, { play: playing = true }: { play?: boolean } = {}) => {
    for (let at = 0; at < ulaw.length; at += FRAME) {
      const frame = ulaw.subarray(at, at + FRAME);
      chunk++;
      json(stamp('media', { media: { track: 'inbound', chunk: String(chunk), timestamp: String(chunk * 20), payload: frame.toString('base64') } }));
      if (playing) play(20);
    }
  };

  return {
    ws,
    streamId,
    commands: log,
    closed,
    send: sendFrames,
    silence: (ms, o) => sendFrames(Buffer.alloc(ms * 8, MULAW_SILENCE), o),
    get receivedMs() {
      return receivedMs;
    },
    get playedMs() {
      return playedMs;
    },
    get played() {
      return Buffer.concat(playedChunks);
    },
    get playedAtLastMark() {
      return playedAtLastMark;
    },
    echoed,
    violations,
    raw: (text) => ws.send(text),
    dtmf: (digit) => json(stamp('dtmf', { dtmf: { track: 'inbound_track', digit } })),
    stop: () =>
      json(stamp('stop', carrier === 'twilio' ? { stop: { accountSid: `AC${'2'.repeat(32)}`, callSid: callId } } : { stop: { call_control_id: callId } })),
  };
}
