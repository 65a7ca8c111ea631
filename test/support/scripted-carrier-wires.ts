// What each scripted carrier (scripted-carrier.ts) sends and takes, from its public reference:
// its first messages, its media and DTMF messages, how it echoes a mark and answers a clear, and
// how it reads the gateway's commands (anything off its protocol is a violation the test sees).
import type { CarrierCommand } from './scripted-carrier.ts';

export type CarrierName = 'twilio' | 'telnyx' | 'plivo' | 'exotel' | 'vonage';

export interface WireFormat {
  encoding: 'pcm_mulaw' | 'pcm_s16le';
  sampleRate: number;
}

export interface CarrierWire {
  streamId: string;
  format: WireFormat;
  /** The caller's audio per media message, in ms. */
  frameMs: number;
  /** What the carrier sends once connected, before any audio. */
  opening(parameters: Record<string, string>): (string | Buffer)[];
  media(frame: Buffer): string | Buffer;
  dtmf(digit: string): string;
  /** null: the carrier has no stop message (the stream ends with the socket). */
  stop(): string | null;
  /** A mark's echo, once the audio queued before it has played. */
  played(name: string): string;
  /** On a clear: whether the marks still queued are echoed at once, and the clear's acknowledgement (null: none). */
  clear: { echoesMarks: boolean; ack: string | null };
  /** The most audio the carrier buffers unplayed, in ms (more is a violation); absent: no bound. */
  bufferMs?: number;
  /** One message of the gateway, read (null: a violation, pushed onto `violations`). */
  command(data: Buffer, isBinary: boolean, violations: string[]): CarrierCommand | null;
}

const MULAW_8K: WireFormat = { encoding: 'pcm_mulaw', sampleRate: 8000 };
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const hex = (digits: number) =>
  Array.from({ length: digits }, () =>
    Math.floor(Math.random() * 16)
      .toString(16)
      .toUpperCase(),
  ).join('');

/** A JSON text command (null and a violation otherwise). */
function json(data: Buffer, isBinary: boolean, violations: string[]): Record<string, unknown> | null {
  if (isBinary) {
    violations.push('a binary message');
    return null;
  }
  return JSON.parse(data.toString()) as Record<string, unknown>;
}

function audioOf(payload: unknown, violations: string[]): Buffer | null {
  if (typeof payload === 'string' && BASE64.test(payload)) return Buffer.from(payload, 'base64');
  violations.push('media without a base64 payload');
  return null;
}

const field = (o: unknown, key: string): unknown => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[key] : undefined);

/**
 * Twilio's commands and Telnyx's: `media` {media {payload}}, `mark` {mark {name}}, `clear`;
 * `idField`: the stream id each must carry (Twilio's streamSid), none for Telnyx.
 */
function twilioLikeCommand(
  idField: string | null,
  streamId: string,
  checkAudio: (audio: Buffer, violations: string[]) => void = () => {},
): CarrierWire['command'] {
  return (data, isBinary, violations) => {
    const c = json(data, isBinary, violations);
    if (!c) return null;
    if (idField && c[idField] !== streamId) violations.push(`${String(c.event)} with ${idField} ${String(c[idField])}`);
    if (c.event === 'media') {
      const audio = audioOf(field(c.media, 'payload'), violations);
      if (audio) checkAudio(audio, violations);
      return audio && { kind: 'audio', audio, message: c };
    }
    if (c.event === 'mark') {
      const name = field(c.mark, 'name');
      if (typeof name === 'string') return { kind: 'mark', name, message: c };
      violations.push('mark without a name');
      return null;
    }
    if (c.event === 'clear') return { kind: 'clear', message: c };
    violations.push(`unknown command ${String(c.event)}`);
    return null;
  };
}

/**
 * Twilio Media Streams, bidirectional (<Connect><Stream>), from
 * https://www.twilio.com/docs/voice/media-streams/websocket-messages: sends `connected`
 * {protocol "Call", version "1.0.0"}, `start` {sequenceNumber, start {accountSid, streamSid,
 * callSid, tracks ["inbound"], customParameters, mediaFormat {encoding "audio/x-mulaw",
 * sampleRate 8000, channels 1}}, streamSid}, `media` {sequenceNumber, media {track "inbound",
 * chunk, timestamp, payload: base64 μ-law}, streamSid} every 20 ms, `mark` {sequenceNumber,
 * streamSid, mark {name}} once the audio sent before that mark has played, `dtmf`, `stop`
 * {stop {accountSid, callSid}}; takes `media` {streamSid, media {payload}} (queued and played in
 * order), `mark` {streamSid, mark {name}} and `clear` {streamSid} (the queued audio dropped, the
 * marks still queued echoed at once).
 */
function twilio(): CarrierWire {
  const streamId = `MZ${hex(32)}`;
  const accountSid = `AC${'2'.repeat(32)}`;
  const callSid = `CA${'1'.repeat(32)}`;
  let sequence = 0;
  let chunk = 0;
  const stamp = (event: string, body: object) => JSON.stringify({ event, sequenceNumber: String(++sequence), ...body, streamSid: streamId });
  return {
    streamId,
    format: MULAW_8K,
    frameMs: 20,
    opening: (parameters) => [
      JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }),
      stamp('start', {
        start: {
          accountSid,
          streamSid: streamId,
          callSid,
          tracks: ['inbound'],
          customParameters: parameters,
          mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        },
      }),
    ],
    media: (frame) => {
      chunk++;
      return stamp('media', { media: { track: 'inbound', chunk: String(chunk), timestamp: String(chunk * 20), payload: frame.toString('base64') } });
    },
    dtmf: (digit) => stamp('dtmf', { dtmf: { track: 'inbound_track', digit } }),
    stop: () => stamp('stop', { stop: { accountSid, callSid } }),
    played: (name) => stamp('mark', { mark: { name } }),
    clear: { echoesMarks: true, ack: null },
    command: twilioLikeCommand('streamSid', streamId),
  };
}

/**
 * Telnyx media streaming (bidirectional RTP, PCMU), from
 * https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket: the
 * same exchange with snake_case fields (`sequence_number`, `stream_id` at the top level,
 * `start.call_control_id`, `start.custom_parameters`, `start.media_format` {encoding "PCMU",
 * sample_rate 8000}), and its commands carry no stream id (`media` {media {payload}}, `mark`
 * {mark {name}}, `clear`).
 */
function telnyx(): CarrierWire {
  const streamId = crypto.randomUUID();
  const callId = 'v3:call-control-id';
  let sequence = 0;
  let chunk = 0;
  const stamp = (event: string, body: object) => JSON.stringify({ event, sequence_number: String(++sequence), ...body, stream_id: streamId });
  return {
    streamId,
    format: MULAW_8K,
    frameMs: 20,
    opening: (parameters) => [
      JSON.stringify({ event: 'connected', version: '1.0.0' }),
      stamp('start', {
        start: {
          user_id: crypto.randomUUID(),
          call_control_id: callId,
          client_state: null,
          custom_parameters: parameters,
          media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
        },
      }),
    ],
    media: (frame) => {
      chunk++;
      return stamp('media', { media: { track: 'inbound', chunk: String(chunk), timestamp: String(chunk * 20), payload: frame.toString('base64') } });
    },
    dtmf: (digit) => stamp('dtmf', { dtmf: { digit } }),
    stop: () => stamp('stop', { stop: { call_control_id: callId } }),
    played: (name) => stamp('mark', { mark: { name } }),
    clear: { echoesMarks: true, ack: null },
    command: twilioLikeCommand(null, streamId),
  };
}

/**
 * Plivo audio streams (<Stream bidirectional="true" contentType="…">), from
 * https://www.plivo.com/docs/voice/audio-streaming/audio-streaming (Stream Event Protocol) and
 * https://www.plivo.com/docs/voice/xml/the-stream-element/checkpoint-event: sends `start`
 * {sequenceNumber, start {callId, streamId, accountId, tracks, mediaFormat {encoding
 * "audio/x-mulaw" | "audio/x-l16", sampleRate}}, extra_headers "k=v;k=v"}, `media`
 * {sequenceNumber, streamId, media {track, timestamp, chunk, payload}} every 20 ms, `dtmf`,
 * `playedStream` {streamId, name} once the audio before a checkpoint has played; no `stop` (the
 * stream ends with the socket). Takes `playAudio` {media {contentType, sampleRate, payload}} in
 * the stream's own format, `checkpoint` {streamId, name}, `clearAudio` {streamId}: the buffered
 * audio dropped, the checkpoints still queued never acknowledged, and `clearedAudio` sent.
 * Default format audio/x-l16 at 8000 Hz (the <Stream> element's default contentType).
 */
function plivo(format: WireFormat = { encoding: 'pcm_s16le', sampleRate: 8000 }): CarrierWire {
  const streamId = crypto.randomUUID();
  const callId = crypto.randomUUID();
  const contentType = format.encoding === 'pcm_mulaw' ? 'audio/x-mulaw' : 'audio/x-l16';
  let sequence = 0;
  let chunk = 0;
  const stamp = (event: string, body: object) => JSON.stringify({ event, sequenceNumber: ++sequence, streamId, ...body });
  return {
    streamId,
    format,
    frameMs: 20,
    opening: (parameters) => [
      JSON.stringify({
        event: 'start',
        sequenceNumber: ++sequence,
        start: {
          callId,
          streamId,
          accountId: 'MAXXXXXXXXXXXXXXXXXX',
          tracks: ['inbound'],
          mediaFormat: { encoding: contentType, sampleRate: format.sampleRate },
        },
        extra_headers: Object.entries(parameters)
          .map(([k, v]) => `${k}=${v}`)
          .join(';'),
      }),
    ],
    media: (frame) => {
      chunk++;
      return stamp('media', { media: { track: 'inbound', timestamp: String(1_705_312_200_000 + chunk * 20), chunk, payload: frame.toString('base64') } });
    },
    dtmf: (digit) => stamp('dtmf', { dtmf: { track: 'inbound', digit, timestamp: String(1_705_312_200_000) } }),
    stop: () => null,
    played: (name) => stamp('playedStream', { name }),
    clear: { echoesMarks: false, ack: JSON.stringify({ event: 'clearedAudio', sequenceNumber: 0, streamId }) },
    command: (data, isBinary, violations) => {
      const c = json(data, isBinary, violations);
      if (!c) return null;
      if (c.event === 'playAudio') {
        if (field(c.media, 'contentType') !== contentType || Number(field(c.media, 'sampleRate')) !== format.sampleRate)
          violations.push(`playAudio of ${String(field(c.media, 'contentType'))} at ${String(field(c.media, 'sampleRate'))} Hz on a ${contentType} stream`);
        const audio = audioOf(field(c.media, 'payload'), violations);
        return audio && { kind: 'audio', audio, message: c };
      }
      if (c.streamId !== streamId) violations.push(`${String(c.event)} with streamId ${String(c.streamId)}`);
      if (c.event === 'checkpoint' && typeof c.name === 'string') return { kind: 'mark', name: c.name, message: c };
      if (c.event === 'clearAudio') return { kind: 'clear', message: c };
      violations.push(`unknown command ${String(c.event)}`);
      return null;
    },
  };
}

/**
 * Exotel's Voicebot applet (bidirectional), from
 * https://developer.exotel.com/docs/agentstream/websocket-protocol and
 * https://developer.exotel.com/docs/agentstream/stream-voicebot-applet: sends `connected`, `start`
 * {sequence_number, stream_sid, start {stream_sid, call_sid, account_sid, from, to,
 * custom_parameters, media_format {encoding "audio/x-raw", sample_rate "8000", bit_rate "16"}}},
 * `media` {sequence_number, stream_sid, media {chunk, timestamp, payload: base64 16-bit
 * little-endian PCM}} every ~100 ms, `dtmf` {dtmf {digit, duration}}, `mark` {stream_sid, mark
 * {name}} once the audio before it has played, `stop` {stop {call_sid, account_sid, reason}}.
 * Takes `media` {stream_sid, media {payload}} (chunks of 3.2 KB to 100 KB, each a multiple of
 * 320 bytes, or it plays with gaps: the wire counts a ragged one as a violation), `mark` {stream_sid, mark {name}}, `clear` {stream_sid}. The
 * reference does not say what becomes of the marks queued at a clear: echoed, as Twilio does.
 */
function exotel(format: WireFormat = { encoding: 'pcm_s16le', sampleRate: 8000 }): CarrierWire {
  const streamId = hex(32).toLowerCase();
  const callSid = hex(32).toLowerCase();
  let sequence = 0;
  let chunk = 0;
  const stamp = (event: string, body: object) => JSON.stringify({ event, sequence_number: String(++sequence), stream_sid: streamId, ...body });
  return {
    streamId,
    format,
    frameMs: 100,
    opening: (parameters) => [
      JSON.stringify({ event: 'connected' }),
      stamp('start', {
        start: {
          stream_sid: streamId,
          call_sid: callSid,
          account_sid: 'exotel-account',
          from: '+919876543210',
          to: '+918047491899',
          custom_parameters: parameters,
          media_format: { encoding: format.encoding === 'pcm_mulaw' ? 'audio/x-mulaw' : 'audio/x-raw', sample_rate: String(format.sampleRate), bit_rate: '16' },
        },
      }),
    ],
    media: (frame) => {
      chunk++;
      return stamp('media', { media: { chunk: String(chunk), timestamp: String(chunk * 100), payload: frame.toString('base64') } });
    },
    dtmf: (digit) => stamp('dtmf', { dtmf: { digit, duration: '100' } }),
    stop: () => stamp('stop', { stop: { call_sid: callSid, account_sid: 'exotel-account', reason: 'callended' } }),
    played: (name) => stamp('mark', { mark: { name } }),
    clear: { echoesMarks: true, ack: null },
    command: twilioLikeCommand('stream_sid', streamId, (audio, violations) => {
      if (audio.length % 320 !== 0 || audio.length > 100_000) violations.push(`a media chunk of ${audio.length} bytes`);
    }),
  };
}

/**
 * Vonage's Voice API WebSocket (NCCO `connect` to a `websocket` endpoint), from
 * https://developer.vonage.com/en/voice/voice-api/concepts/websockets: sends first the JSON text
 * {"event": "websocket:connected", "content-type": "audio/l16;rate=16000", …the endpoint's
 * headers at the top level}, then the caller's audio as binary messages of 16-bit
 * little-endian PCM, 20 ms each, and JSON text events: `websocket:dtmf` {digit, duration},
 * `websocket:notify` {payload} once the audio sent before a notify has played,
 * `websocket:cleared` after a clear; no stop (the stream ends with the socket). Takes binary
 * 20 ms frames of the same format (320 or 640 bytes, nothing else; buffered, at most 1,024 in
 * the older guide: 20 s), {"action": "notify", "payload"} and {"action": "clear"}. The reference
 * does not say what becomes of the notifies queued at a clear: none is sent.
 */
function vonage(format: WireFormat = { encoding: 'pcm_s16le', sampleRate: 16000 }): CarrierWire {
  const frameBytes = (format.sampleRate / 50) * 2;
  return {
    streamId: '',
    format,
    frameMs: 20,
    opening: (parameters) => [JSON.stringify({ event: 'websocket:connected', 'content-type': `audio/l16;rate=${format.sampleRate}`, ...parameters })],
    media: (frame) => frame,
    dtmf: (digit) => JSON.stringify({ event: 'websocket:dtmf', digit, duration: 260 }),
    stop: () => null,
    played: (name) => JSON.stringify({ event: 'websocket:notify', payload: { name } }),
    clear: { echoesMarks: false, ack: JSON.stringify({ event: 'websocket:cleared' }) },
    bufferMs: 1024 * 20,
    command: (data, isBinary, violations) => {
      if (isBinary) {
        if (data.length === frameBytes) return { kind: 'audio', audio: Buffer.from(data), message: null };
        violations.push(`an audio message of ${data.length} bytes`);
        return null;
      }
      const c = JSON.parse(data.toString()) as Record<string, unknown>;
      if (c.action === 'notify' && typeof field(c.payload, 'name') === 'string') return { kind: 'mark', name: field(c.payload, 'name') as string, message: c };
      if (c.action === 'clear') return { kind: 'clear', message: c };
      violations.push(`unknown command ${JSON.stringify(c)}`);
      return null;
    },
  };
}

export const WIRES: Record<CarrierName, (format?: WireFormat) => CarrierWire> = { twilio, telnyx, plivo, exotel, vonage };
