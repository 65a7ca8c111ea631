// A phone call's media stream bridged to a realtime session (docs/phone.md). The carrier's
// socket is a WebSocketLink like any session's (pings, a bounded outgoing buffer, at most 100
// error events in 10 s); the session is the same RealtimeSession /v1/realtime runs, configured
// for the call: μ-law at 8 kHz both ways (the carrier's own format, so nothing is resampled)
// and server VAD, whose end of turn asks for an answer and whose start interrupts one.
//
// Caller audio → input_audio_buffer.append. The answer's audio → 20 ms `media` frames with
// marks (playback.ts). The caller speaking over an answer (the session's barge-in asks the
// transport to stop its playout, output-playout.ts) → `clear`, and the session cuts the answer
// where the echoed marks say the caller stopped hearing it. `stop` or the socket's close ends the session. What the carrier
// sends that is not its protocol is an error event of the session's outbox: never sent to the
// carrier (it has no use for one), logged, and counted against the link's allowance.
import type { FastifyBaseLogger } from 'fastify';
import { isServiceError } from '../../server/services/errors.ts';
import type { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import type { HeardAudio, OutputPlayout } from '../realtime/output-playout.ts';
import type { ClientMessage } from '../realtime/wire.ts';
import type { Outbox } from '../sessions/outbox.ts';
import type { WebSocketLink } from '../sessions/websocket-link.ts';
import type { CarrierDialect } from './carrier-dialects.ts';
import { Playback, type PlayOut } from './playback.ts';

/** The session a call opens with: the carrier's audio format both ways, turns found by the gateway. */
export const PHONE_SESSION = {
  type: 'realtime',
  output_modalities: ['audio'],
  audio: {
    input: { format: { type: 'audio/pcmu' }, turn_detection: { type: 'server_vad', create_response: true, interrupt_response: true } },
    output: { format: { type: 'audio/pcmu' } },
  },
} as const;

/** Responses whose audio the caller cut, remembered so that their late deltas are not played (a few suffice). */
const MAX_SILENCED = 8;

export type OpenCallSession = (outbox: Outbox<ServerEvent>, playout: OutputPlayout) => RealtimeSession;

export class PhoneBridge {
  private readonly playback = new Playback();
  private readonly outbox: Outbox<ServerEvent>;
  private readonly session: RealtimeSession;
  private streamId: string | null = null;
  /** The conversation's response now running, if any. */
  private activeResponse: string | null = null;
  private readonly silenced = new Set<string>();
  /** The response of each answer being played (its deltas say), for what a barge-in reports. */
  private readonly responseOf = new Map<string, string>();

  constructor(
    private readonly link: WebSocketLink,
    private readonly dialect: CarrierDialect,
    open: OpenCallSession,
    private readonly log: FastifyBaseLogger,
  ) {
    this.outbox = link.outbox<ServerEvent>((event) => this.toCarrier(event));
    this.session = open(this.outbox, { audioFormat: 'g711_ulaw', stop: () => this.stopPlayback() });
    this.session.receive({ event: { type: 'session.update', session: structuredClone(PHONE_SESSION) as Record<string, unknown> }, size: 0 });
  }

  /** One message from the carrier. */
  message(data: Buffer, isBinary: boolean): void {
    if (isBinary) return this.refuse('invalid_message', `Send ${this.dialect.name} media-stream events as JSON text messages.`);
    let value: unknown;
    try {
      value = JSON.parse(data.toString('utf8'));
    } catch {
      return this.refuse('invalid_json', 'Each message must be a JSON object.');
    }
    let event;
    try {
      event = this.dialect.read(value);
    } catch (e) {
      if (!isServiceError(e)) throw e;
      return this.refuse(e.code, e.message, e.param);
    }
    switch (event.kind) {
      case 'connected':
        return;
      case 'start':
        if (this.streamId !== null) return this.refuse('invalid_request', 'start: the stream has started already.', 'event');
        if (!event.mulaw8k)
          return this.session.close(1003, 'unsupported_audio_format', {
            code: 'unsupported_audio_format',
            message: `The call's audio is ${event.format}; stream μ-law (PCMU) at 8000 Hz, mono.`,
          });
        this.streamId = event.streamId;
        this.log.info({ carrier: this.dialect.name, streamId: event.streamId, callId: event.callId }, 'phone call started');
        return;
      case 'media': {
        if (this.streamId === null) return this.refuse('invalid_request', 'media: the stream has not started (no start event).', 'event');
        if (!event.inbound) return;
        const append: ClientMessage = { event: { type: 'input_audio_buffer.append', audio: event.payload }, size: data.length };
        return this.session.receive(append);
      }
      case 'mark':
        return this.playback.played(event.name);
      case 'dtmf':
        return;
      case 'stop':
        return this.link.close(1000, 'stop');
      case 'carrier_error':
        this.log.warn({ carrier: this.dialect.name, streamId: this.streamId, detail: event.detail }, 'the carrier reports a media-stream error');
        return;
    }
  }

  /** The socket closed, whoever closed it. */
  closed(): void {
    this.session.transportClosed();
  }

  /** What of a session event reaches the carrier: the answers' audio with its marks, and a clear on barge-in. */
  private toCarrier(event: ServerEvent): object[] {
    switch (event.type) {
      case 'response.created':
        this.activeResponse = event.response.id;
        return [];
      case 'response.done':
        if (this.activeResponse === event.response.id) this.activeResponse = null;
        return [];
      case 'response.output_audio.delta':
        if (this.silenced.has(event.response_id)) return [];
        this.responseOf.set(event.item_id, event.response_id);
        if (this.responseOf.size > MAX_SILENCED) this.responseOf.delete(this.responseOf.keys().next().value!);
        return this.carrier(this.playback.audio(event.item_id, Buffer.from(event.delta, 'base64')));
      case 'response.output_audio.done':
        if (this.silenced.has(event.response_id)) return [];
        return this.carrier(this.playback.end(event.item_id));
      case 'error':
        this.log.warn({ carrier: this.dialect.name, streamId: this.streamId, code: event.error.code, message: event.error.message }, 'phone call error');
        return [];
      default:
        return [];
    }
  }

  /**
   * The caller spoke over the answer (the session's barge-in): the carrier drops what it has
   * queued, nothing more of the running answer is sent, and the session is told how much of
   * which answer the caller heard, as the echoed marks say (it cuts the item there).
   */
  private stopPlayback(): HeardAudio | null {
    if (this.activeResponse) this.silence(this.activeResponse);
    const itemId = this.playback.playing();
    if (itemId === null || this.streamId === null) return null;
    const heard = { itemId, responseId: this.responseOf.get(itemId) ?? '', playedMs: this.playback.heardMs(itemId) };
    this.playback.clear();
    this.link.send(JSON.stringify(this.dialect.clear(this.streamId)));
    return heard;
  }

  private carrier(out: PlayOut[]): object[] {
    const streamId = this.streamId;
    if (streamId === null) return [];
    return out.map((o) => (o.kind === 'media' ? this.dialect.media(streamId, o.audio.toString('base64')) : this.dialect.mark(streamId, o.name)));
  }

  private silence(responseId: string): void {
    this.silenced.add(responseId);
    if (this.silenced.size > MAX_SILENCED) this.silenced.delete(this.silenced.values().next().value!);
  }

  /** Something the carrier sent that is not its protocol: an error event (logged, counted by the link), and the call goes on. */
  private refuse(code: string, message: string, param: string | null = null): void {
    this.outbox.send({ type: 'error', error: { type: 'invalid_request_error', code, message, param, event_id: null } });
  }
}
