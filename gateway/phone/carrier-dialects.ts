// The media-stream protocols of phone carriers, each read into one set of events and written
// from one set of commands (phone-bridge.ts bridges them to a realtime session). A dialect is
// the carrier's message shapes, its audio formats and how it wants the answers' audio cut;
// what the call does is the bridge's.
//
// Twilio Media Streams, bidirectional (<Connect><Stream>), from
// https://www.twilio.com/docs/voice/media-streams/websocket-messages: from Twilio `connected`,
// `start` {streamSid, callSid, tracks, customParameters, mediaFormat {encoding "audio/x-mulaw",
// sampleRate 8000, channels 1}}, `media` {track, chunk, timestamp, payload: base64 μ-law},
// `mark` {name} (a mark we sent, its audio played), `dtmf` {digit}, `stop`; to Twilio `media`
// {streamSid, media {payload}}, `mark` {streamSid, mark {name}}, `clear` {streamSid}.
//
// Telnyx media streaming, bidirectional RTP mode (stream_bidirectional_mode "rtp", codec PCMU),
// from https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket:
// the same events with snake_case fields (`stream_id` at the top level, `start.call_control_id`,
// `start.media_format` {encoding "PCMU", sample_rate 8000, channels 1}, `custom_parameters`),
// `media.payload` a base64 RTP payload (no header), `error` frames; to Telnyx `media` {media
// {payload}}, `mark` {mark {name}}, `clear`.
//
// Plivo audio streams (<Stream bidirectional="true">), from
// https://www.plivo.com/docs/voice/audio-streaming/audio-streaming (Stream Event Protocol) and
// https://www.plivo.com/docs/voice/xml/audiostream: from Plivo `start` {start {callId,
// streamId, accountId, tracks, mediaFormat {encoding "audio/x-mulaw" | "audio/x-l16",
// sampleRate 8000 | 16000}}, extra_headers: the XML's extraHeaders as one string}, `media`
// {streamId, media {track, timestamp, chunk, payload}}, `dtmf` {dtmf {track, digit}},
// `playedStream` {streamId, name} (a checkpoint's audio played), `clearedAudio`; no `stop` (the
// stream ends with the socket). To Plivo `playAudio` {media {contentType, sampleRate, payload}}
// in the stream's own format, `checkpoint` {streamId, name}, `clearAudio` {streamId}; after a
// clearAudio the checkpoints still queued are never acknowledged. L16 is little-endian.
//
// Exotel's Voicebot applet (bidirectional), from
// https://developer.exotel.com/docs/agentstream/websocket-protocol and
// https://developer.exotel.com/docs/agentstream/stream-voicebot-applet: Twilio's events with
// snake_case fields: `connected`, `start` {stream_sid, start {stream_sid, call_sid, account_sid,
// from, to, custom_parameters (the applet URL's query parameters), media_format {encoding
// "audio/x-raw", sample_rate "8000" | "16000" | "24000", bit_rate "16"}}}, `media` {stream_sid,
// media {chunk, timestamp, payload: base64 16-bit little-endian PCM ("raw/slin"), ~100 ms}},
// `dtmf` {dtmf {digit, duration}}, `mark` {mark {name}}, `stop`; to Exotel `media` {stream_sid,
// media {payload}} in chunks of at least 3.2 KB and a multiple of 320 bytes, `mark` {stream_sid,
// mark {name}}, `clear` {stream_sid}. (ExoML's StartStream may stream μ-law at 8 kHz instead.)
//
// Vonage's Voice API WebSocket (an NCCO `connect` to a `websocket` endpoint), from
// https://developer.vonage.com/en/voice/voice-api/concepts/websockets: the first message is
// JSON text, {"event": "websocket:connected", "content-type": "audio/l16;rate=16000" (or 8000,
// 24000), and the NCCO endpoint's `headers` as top-level fields}; then the caller's audio as
// binary messages of 16-bit little-endian PCM, 20 ms each (640 bytes at 16 kHz), and JSON text
// events among them: `websocket:dtmf` {digit, duration}, `websocket:notify` {payload} (the
// audio sent before a `notify` has played), `websocket:cleared`; others may come and are not
// ours to refuse. To Vonage: binary 20 ms frames of the same format (Vonage buffers them, a
// bounded number: 1,024 frames in the older guide, 3,072 in the newer), {"action": "notify",
// "payload": {…}} (our marks) and {"action": "clear"} (drops the buffered audio).
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { paramOf } from '../../server/services/parse-input.ts';
import { MULAW_8K, type LineFormat } from './line-audio.ts';

export type CarrierName = 'twilio' | 'telnyx' | 'plivo' | 'exotel' | 'vonage';

export type CarrierEvent =
  | { kind: 'connected' }
  | {
      kind: 'start';
      streamId: string;
      callId: string | null;
      /** null: a format the gateway does not take (the call is closed with 1003). */
      format: LineFormat | null;
      /** The format as the carrier named it, for the refusal. */
      formatName: string;
      /** The stream's custom parameters (Twilio's <Parameter>, Plivo's extraHeaders…): string values only. */
      parameters: Record<string, string>;
    }
  /** `inbound`: the caller's audio (a carrier may also send the call's own outbound track). */
  | { kind: 'media'; audio: Buffer; inbound: boolean }
  | { kind: 'mark'; name: string }
  /** The carrier acknowledges a clear. */
  | { kind: 'cleared' }
  | { kind: 'dtmf'; digit: string }
  | { kind: 'stop' }
  /** The carrier reports an error (Telnyx); the call goes on unless it stops. */
  | { kind: 'carrier_error'; detail: string }
  /** An event of the carrier's that the call has no use for (Vonage sends others than it lists). */
  | { kind: 'other' };

export interface CarrierDialect {
  name: CarrierName;
  /** The formats it takes, in words, for the refusal of another. */
  formats: string;
  /** One message as the carrier sent it (parsed JSON); a ServiceError naming the field when it is not one. */
  read(message: unknown): CarrierEvent;
  /** A binary message (Vonage's audio); absent: the carrier sends none, and one is refused. */
  readBinary?(data: Buffer): CarrierEvent;
  /** Audio per media message sent to the carrier, in ms. */
  frameMs: number;
  /** The last message of an answer is padded with silence to whole 20 ms (carriers that play only whole frames). */
  padded: boolean;
  /** At most this much audio sent that the carrier has not played (its buffer is bounded); absent: the socket's bound only. */
  maxAheadMs?: number;
  /** An answer's audio: a JSON message, or a binary one (a Buffer). */
  media(streamId: string, audio: Buffer, format: LineFormat): object | Buffer;
  mark(streamId: string, name: string): object;
  clear(streamId: string): object;
}

/** A 20 ms frame is 160 to 960 bytes; a carrier's frames are small, and nothing it sends need be larger than this. */
const MAX_PAYLOAD_CHARS = 64 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const payload = z
  .string()
  .max(MAX_PAYLOAD_CHARS, `must be at most ${MAX_PAYLOAD_CHARS} characters`)
  .regex(BASE64, 'must be base64')
  .transform((p) => Buffer.from(p, 'base64'));
const id = z.string().min(1).max(256);
const name = z.string().max(256);
const rate = z.union([z.number(), z.string().max(16).transform(Number)]);
/** Custom parameters as an object: its string values (the others are no parameter of ours). */
const parameters = z
  .record(z.string().max(256), z.unknown())
  .optional()
  .transform((o) => Object.fromEntries(Object.entries(o ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string')));

function reader<S extends z.ZodType>(
  schema: S,
  toEvent: (m: z.output<S>) => CarrierEvent,
  carrier: string,
  events: string,
): (message: unknown) => CarrierEvent {
  return (message) => {
    const parsed = schema.safeParse(message);
    if (parsed.success) return toEvent(parsed.data);
    const issue = parsed.error.issues[0]!;
    const param = paramOf(issue.path);
    if (param === 'event') throw new ServiceError('invalid_request', `event: not a ${carrier} media-stream event (${events}).`, 'event');
    throw new ServiceError('invalid_request', `${param ?? 'message'}: ${issue.message}`, param);
  };
}

const TWILIO_LIKE_EVENTS = 'connected, start, media, mark, dtmf, stop';
const MULAW_ONLY = 'μ-law (PCMU) at 8000 Hz, mono';
const inboundTrack = (track: string | undefined) => (track ?? 'inbound') === 'inbound';

const TwilioMessage = z.discriminatedUnion('event', [
  z.object({ event: z.literal('connected') }),
  z.object({
    event: z.literal('start'),
    start: z.object({
      streamSid: id,
      callSid: id.optional(),
      customParameters: parameters,
      mediaFormat: z.object({ encoding: z.string().max(64), sampleRate: z.number(), channels: z.number().optional() }),
    }),
  }),
  z.object({ event: z.literal('media'), media: z.object({ track: z.string().max(32).optional(), payload }) }),
  z.object({ event: z.literal('mark'), mark: z.object({ name }) }),
  z.object({ event: z.literal('dtmf'), dtmf: z.object({ digit: z.string().max(8) }) }),
  z.object({ event: z.literal('stop') }),
]);

export const twilio: CarrierDialect = {
  name: 'twilio',
  formats: MULAW_ONLY,
  read: reader(
    TwilioMessage,
    (m): CarrierEvent => {
      switch (m.event) {
        case 'connected':
        case 'stop':
          return { kind: m.event };
        case 'start': {
          const f = m.start.mediaFormat;
          return {
            kind: 'start',
            streamId: m.start.streamSid,
            callId: m.start.callSid ?? null,
            format: f.encoding === 'audio/x-mulaw' && f.sampleRate === 8000 && (f.channels ?? 1) === 1 ? MULAW_8K : null,
            formatName: `${f.encoding} ${f.sampleRate} Hz`,
            parameters: m.start.customParameters,
          };
        }
        case 'media':
          return { kind: 'media', audio: m.media.payload, inbound: inboundTrack(m.media.track) };
        case 'mark':
          return { kind: 'mark', name: m.mark.name };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
      }
    },
    'Twilio',
    TWILIO_LIKE_EVENTS,
  ),
  frameMs: 20,
  padded: false,
  media: (streamSid, audio) => ({ event: 'media', streamSid, media: { payload: audio.toString('base64') } }),
  mark: (streamSid, n) => ({ event: 'mark', streamSid, mark: { name: n } }),
  clear: (streamSid) => ({ event: 'clear', streamSid }),
};

const TelnyxMessage = z.discriminatedUnion('event', [
  z.object({ event: z.literal('connected') }),
  z.object({
    event: z.literal('start'),
    stream_id: id,
    start: z.object({
      call_control_id: id.optional(),
      custom_parameters: parameters,
      media_format: z.object({ encoding: z.string().max(64), sample_rate: z.number(), channels: z.number().optional() }),
    }),
  }),
  z.object({ event: z.literal('media'), media: z.object({ track: z.string().max(32).optional(), payload }) }),
  z.object({ event: z.literal('mark'), mark: z.object({ name }) }),
  z.object({ event: z.literal('dtmf'), dtmf: z.object({ digit: z.string().max(8) }) }),
  z.object({ event: z.literal('stop') }),
  z.object({ event: z.literal('error'), payload: z.object({ code: z.unknown().optional(), title: z.string().max(256).optional() }).optional() }),
]);

export const telnyx: CarrierDialect = {
  name: 'telnyx',
  formats: MULAW_ONLY,
  read: reader(
    TelnyxMessage,
    (m): CarrierEvent => {
      switch (m.event) {
        case 'connected':
        case 'stop':
          return { kind: m.event };
        case 'start': {
          const f = m.start.media_format;
          return {
            kind: 'start',
            streamId: m.stream_id,
            callId: m.start.call_control_id ?? null,
            format: f.encoding === 'PCMU' && f.sample_rate === 8000 && (f.channels ?? 1) === 1 ? MULAW_8K : null,
            formatName: `${f.encoding} ${f.sample_rate} Hz`,
            parameters: m.start.custom_parameters,
          };
        }
        case 'media':
          return { kind: 'media', audio: m.media.payload, inbound: inboundTrack(m.media.track) };
        case 'mark':
          return { kind: 'mark', name: m.mark.name };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
        case 'error':
          return { kind: 'carrier_error', detail: `${String(m.payload?.code ?? '')} ${m.payload?.title ?? ''}`.trim() };
      }
    },
    'Telnyx',
    `${TWILIO_LIKE_EVENTS}, error`,
  ),
  frameMs: 20,
  padded: false,
  media: (_streamId, audio) => ({ event: 'media', media: { payload: audio.toString('base64') } }),
  mark: (_streamId, n) => ({ event: 'mark', mark: { name: n } }),
  clear: () => ({ event: 'clear' }),
};

/**
 * Plivo's extra_headers: the <Stream extraHeaders="a=1,b=2"> attribute as one string (its
 * reference shows `;` between pairs), or, from some accounts, a JSON object.
 */
const plivoHeaders = z
  .union([z.string().max(4096), z.record(z.string().max(256), z.unknown())])
  .optional()
  .transform((h): Record<string, string> => {
    if (h === undefined) return {};
    let value: unknown = h;
    if (typeof h === 'string' && h.trimStart().startsWith('{')) {
      try {
        value = JSON.parse(h);
      } catch {
        return {};
      }
    }
    if (typeof value !== 'string') return parameters.parse(value);
    const entries: [string, string][] = [];
    for (const pair of value.split(/[;,]/)) {
      const eq = pair.indexOf('=');
      if (eq > 0) entries.push([pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()]);
    }
    return Object.fromEntries(entries);
  });

const PlivoMessage = z.discriminatedUnion('event', [
  z.object({
    event: z.literal('start'),
    start: z.object({
      callId: id.optional(),
      streamId: id,
      mediaFormat: z.object({ encoding: z.string().max(64), sampleRate: rate }),
    }),
    extra_headers: plivoHeaders,
  }),
  z.object({ event: z.literal('media'), media: z.object({ track: z.string().max(32).optional(), payload }) }),
  z.object({ event: z.literal('playedStream'), name }),
  z.object({ event: z.literal('clearedAudio') }),
  z.object({ event: z.literal('dtmf'), dtmf: z.object({ digit: z.string().max(8) }) }),
]);

function plivoFormat(encoding: string, sampleRate: number): LineFormat | null {
  if (encoding === 'audio/x-mulaw' && sampleRate === 8000) return MULAW_8K;
  if (encoding === 'audio/x-l16' && (sampleRate === 8000 || sampleRate === 16000)) return { encoding: 'pcm_s16le', sampleRate };
  return null;
}

export const plivo: CarrierDialect = {
  name: 'plivo',
  formats: 'audio/x-mulaw at 8000 Hz, or audio/x-l16 at 8000 or 16000 Hz',
  read: reader(
    PlivoMessage,
    (m): CarrierEvent => {
      switch (m.event) {
        case 'start': {
          const f = m.start.mediaFormat;
          return {
            kind: 'start',
            streamId: m.start.streamId,
            callId: m.start.callId ?? null,
            format: plivoFormat(f.encoding, f.sampleRate),
            formatName: `${f.encoding} ${f.sampleRate} Hz`,
            parameters: m.extra_headers,
          };
        }
        case 'media':
          return { kind: 'media', audio: m.media.payload, inbound: inboundTrack(m.media.track) };
        case 'playedStream':
          return { kind: 'mark', name: m.name };
        case 'clearedAudio':
          return { kind: 'cleared' };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
      }
    },
    'Plivo',
    'start, media, dtmf, playedStream, clearedAudio',
  ),
  frameMs: 20,
  padded: false,
  media: (_streamId, audio, format) => ({
    event: 'playAudio',
    media: { contentType: format.encoding === 'pcm_mulaw' ? 'audio/x-mulaw' : 'audio/x-l16', sampleRate: format.sampleRate, payload: audio.toString('base64') },
  }),
  mark: (streamId, n) => ({ event: 'checkpoint', streamId, name: n }),
  clear: (streamId) => ({ event: 'clearAudio', streamId }),
};

const ExotelMessage = z.discriminatedUnion('event', [
  z.object({ event: z.literal('connected') }),
  z.object({
    event: z.literal('start'),
    start: z.object({
      stream_sid: id,
      call_sid: id.optional(),
      custom_parameters: parameters,
      media_format: z.object({ encoding: z.string().max(64), sample_rate: rate, bit_rate: rate.optional() }),
    }),
  }),
  z.object({ event: z.literal('media'), media: z.object({ payload }) }),
  z.object({ event: z.literal('mark'), mark: z.object({ name }) }),
  z.object({ event: z.literal('dtmf'), dtmf: z.object({ digit: z.string().max(8) }) }),
  z.object({ event: z.literal('stop') }),
]);

function exotelFormat(encoding: string, sampleRate: number, bitRate = 16): LineFormat | null {
  if (/mulaw|ulaw|pcmu/i.test(encoding)) return sampleRate === 8000 ? MULAW_8K : null;
  if (/raw|slin|l16/i.test(encoding) && bitRate === 16 && (sampleRate === 8000 || sampleRate === 16000 || sampleRate === 24000))
    return { encoding: 'pcm_s16le', sampleRate };
  return null;
}

export const exotel: CarrierDialect = {
  name: 'exotel',
  formats: '16-bit PCM (audio/x-raw) at 8000, 16000 or 24000 Hz, or μ-law at 8000 Hz',
  read: reader(
    ExotelMessage,
    (m): CarrierEvent => {
      switch (m.event) {
        case 'connected':
        case 'stop':
          return { kind: m.event };
        case 'start': {
          const f = m.start.media_format;
          return {
            kind: 'start',
            streamId: m.start.stream_sid,
            callId: m.start.call_sid ?? null,
            format: exotelFormat(f.encoding, f.sample_rate, f.bit_rate),
            formatName: `${f.encoding} ${f.sample_rate} Hz`,
            parameters: m.start.custom_parameters,
          };
        }
        case 'media':
          return { kind: 'media', audio: m.media.payload, inbound: true };
        case 'mark':
          return { kind: 'mark', name: m.mark.name };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
      }
    },
    'Exotel',
    TWILIO_LIKE_EVENTS,
  ),
  // Exotel plays chunks under 3.2 KB or not a multiple of 320 bytes with gaps: 200 ms is 3.2 KB at 8 kHz (more above).
  frameMs: 200,
  padded: true,
  media: (streamSid, audio) => ({ event: 'media', stream_sid: streamSid, media: { payload: audio.toString('base64') } }),
  mark: (streamSid, n) => ({ event: 'mark', stream_sid: streamSid, mark: { name: n } }),
  clear: (streamSid) => ({ event: 'clear', stream_sid: streamSid }),
};

const VONAGE_RATES = { 'audio/l16;rate=8000': 8000, 'audio/l16;rate=16000': 16000, 'audio/l16;rate=24000': 24000 } as const;

const VonageMessage = z.discriminatedUnion('event', [
  z.looseObject({ event: z.literal('websocket:connected'), 'content-type': z.string().max(64) }),
  z.object({ event: z.literal('websocket:dtmf'), digit: z.string().max(8).optional(), dtmf: z.object({ digit: z.string().max(8) }).optional() }),
  z.object({ event: z.literal('websocket:notify'), payload: z.object({ name: name.optional() }).optional() }),
  z.object({ event: z.literal('websocket:cleared') }),
]);
const VONAGE_EVENT = z.object({ event: z.string().max(64) });
const VONAGE_EVENTS = new Set(['websocket:connected', 'websocket:dtmf', 'websocket:notify', 'websocket:cleared']);

const readVonage = reader(
  VonageMessage,
  (m): CarrierEvent => {
    switch (m.event) {
      case 'websocket:connected': {
        const contentType = m['content-type'];
        const sampleRate = VONAGE_RATES[contentType.replace(/\s/g, '').toLowerCase() as keyof typeof VONAGE_RATES];
        const { event: _event, 'content-type': _type, ...headers } = m;
        return {
          kind: 'start',
          streamId: '',
          callId: null,
          format: sampleRate ? { encoding: 'pcm_s16le', sampleRate } : null,
          formatName: contentType,
          parameters: parameters.parse(headers),
        };
      }
      case 'websocket:dtmf': {
        const digit = m.digit ?? m.dtmf?.digit;
        return digit === undefined ? { kind: 'other' } : { kind: 'dtmf', digit };
      }
      case 'websocket:notify':
        // A notify that is not one of our marks (no name) says nothing of what was heard.
        return m.payload?.name === undefined ? { kind: 'other' } : { kind: 'mark', name: m.payload.name };
      case 'websocket:cleared':
        return { kind: 'cleared' };
    }
  },
  'Vonage',
  [...VONAGE_EVENTS].join(', '),
);

export const vonage: CarrierDialect = {
  name: 'vonage',
  formats: 'audio/l16;rate=16000, audio/l16;rate=8000 or audio/l16;rate=24000',
  read: (message) => {
    const event = VONAGE_EVENT.safeParse(message);
    // Vonage may send events it does not list: not ours to refuse.
    if (event.success && !VONAGE_EVENTS.has(event.data.event)) return { kind: 'other' };
    return readVonage(message);
  },
  readBinary: (data) => {
    if (data.length > MAX_PAYLOAD_CHARS)
      throw new ServiceError('invalid_request', `audio: a binary message must be at most ${MAX_PAYLOAD_CHARS} bytes.`, 'audio');
    return { kind: 'media', audio: data, inbound: true };
  },
  // Vonage plays only whole 20 ms messages (320 or 640 bytes), and buffers a bounded number of them: 10 s stays well inside.
  frameMs: 20,
  padded: true,
  maxAheadMs: 10_000,
  media: (_streamId, audio) => audio,
  mark: (_streamId, n) => ({ action: 'notify', payload: { name: n } }),
  clear: () => ({ action: 'clear' }),
};

export const CARRIER_DIALECTS: readonly CarrierDialect[] = [twilio, telnyx, plivo, exotel, vonage];
