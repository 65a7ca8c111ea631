// The media-stream protocols of phone carriers, each read into one set of events and written
// from one set of commands (phone-bridge.ts bridges them to a realtime session). A dialect is
// the carrier's message shapes only; what the call does is the bridge's.
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
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { paramOf } from '../../server/services/parse-input.ts';

export type CarrierName = 'twilio' | 'telnyx';

export type CarrierEvent =
  | { kind: 'connected' }
  | { kind: 'start'; streamId: string; callId: string | null; mulaw8k: boolean; format: string }
  /** `inbound`: the caller's audio (a carrier may also send the call's own outbound track). */
  | { kind: 'media'; payload: string; inbound: boolean }
  | { kind: 'mark'; name: string }
  | { kind: 'dtmf'; digit: string }
  | { kind: 'stop' }
  /** The carrier reports an error (Telnyx); the call goes on unless it stops. */
  | { kind: 'carrier_error'; detail: string };

export interface CarrierDialect {
  name: CarrierName;
  /** One message as the carrier sent it (parsed JSON); a ServiceError naming the field when it is not one. */
  read(message: unknown): CarrierEvent;
  media(streamId: string, payload: string): object;
  mark(streamId: string, name: string): object;
  clear(streamId: string): object;
}

/** A 20 ms frame is 160 bytes; a carrier's frames are small, and nothing it sends need be larger than this. */
const MAX_PAYLOAD_CHARS = 64 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const payload = z.string().max(MAX_PAYLOAD_CHARS, `must be at most ${MAX_PAYLOAD_CHARS} characters`).regex(BASE64, 'must be base64');
const id = z.string().min(1).max(256);
const name = z.string().max(256);

function reader<S extends z.ZodType>(schema: S, toEvent: (m: z.output<S>) => CarrierEvent, carrier: string): (message: unknown) => CarrierEvent {
  return (message) => {
    const parsed = schema.safeParse(message);
    if (parsed.success) return toEvent(parsed.data);
    const issue = parsed.error.issues[0]!;
    const param = paramOf(issue.path);
    if (param === 'event')
      throw new ServiceError('invalid_request', `event: not a ${carrier} media-stream event (connected, start, media, mark, dtmf, stop).`, 'event');
    throw new ServiceError('invalid_request', `${param ?? 'message'}: ${issue.message}`, param);
  };
}

const TwilioMessage = z.discriminatedUnion('event', [
  z.object({ event: z.literal('connected') }),
  z.object({
    event: z.literal('start'),
    start: z.object({
      streamSid: id,
      callSid: id.optional(),
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
            mulaw8k: f.encoding === 'audio/x-mulaw' && f.sampleRate === 8000 && (f.channels ?? 1) === 1,
            format: `${f.encoding} ${f.sampleRate} Hz`,
          };
        }
        case 'media':
          return { kind: 'media', payload: m.media.payload, inbound: (m.media.track ?? 'inbound') === 'inbound' };
        case 'mark':
          return { kind: 'mark', name: m.mark.name };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
      }
    },
    'Twilio',
  ),
  media: (streamSid, p) => ({ event: 'media', streamSid, media: { payload: p } }),
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
            mulaw8k: f.encoding === 'PCMU' && f.sample_rate === 8000 && (f.channels ?? 1) === 1,
            format: `${f.encoding} ${f.sample_rate} Hz`,
          };
        }
        case 'media':
          return { kind: 'media', payload: m.media.payload, inbound: (m.media.track ?? 'inbound') === 'inbound' };
        case 'mark':
          return { kind: 'mark', name: m.mark.name };
        case 'dtmf':
          return { kind: 'dtmf', digit: m.dtmf.digit };
        case 'error':
          return { kind: 'carrier_error', detail: `${String(m.payload?.code ?? '')} ${m.payload?.title ?? ''}`.trim() };
      }
    },
    'Telnyx',
  ),
  media: (_streamId, p) => ({ event: 'media', media: { payload: p } }),
  mark: (_streamId, n) => ({ event: 'mark', mark: { name: n } }),
  clear: () => ({ event: 'clear' }),
};

export const CARRIER_DIALECTS: readonly CarrierDialect[] = [twilio, telnyx];
