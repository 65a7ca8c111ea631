// A phone call's media stream bridged to a realtime session (docs/phone.md). The carrier's
// socket is a WebSocketLink like any session's (pings, a bounded outgoing buffer, at most 100
// error events in 10 s); the session is the same RealtimeSession /v1/realtime runs, configured
// for the call: the line's audio both ways (line-audio.ts: μ-law as it is, 16-bit PCM resampled
// to and from pcm16) and server VAD, whose end of turn asks for an answer and whose start
// interrupts one.
//
// The call opens at the carrier's `start` (Vonage: its first message), which says the stream's
// format and carries its custom parameters: the call is admitted then (`admit`: at once when the
// route admitted it before the upgrade, or from the phone token in the parameters), and only
// then does its session start. What the carrier sends while the call is being admitted waits
// (bounded) and is handled after; no start within START_TIMEOUT_MS closes the socket (1008).
//
// Caller audio → input_audio_buffer.append. The answer's audio → media frames with marks
// (playback.ts), JSON or binary (Vonage); with a carrier whose buffer is bounded (Vonage), the
// session's next audio waits (its outbox's drained()) while maxAheadMs of it is unplayed there. The caller speaking over an answer (the session's barge-in asks the transport
// to stop its playout, output-playout.ts) → `clear`, and the session cuts the answer where the
// echoed marks say the caller stopped hearing it. `stop` or the socket's close ends the session.
// What the carrier sends that is not its protocol is an error event of the session's outbox:
// never sent to the carrier (it has no use for one), logged, and counted against the link's
// allowance.
import type { FastifyBaseLogger } from 'fastify';
import type { Clock, Timer } from '../../server/clock.ts';
import { isServiceError } from '../../server/services/errors.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import type { HeardAudio, OutputPlayout } from '../realtime/output-playout.ts';
import type { ClientMessage } from '../realtime/wire.ts';
import type { Outbox } from '../sessions/outbox.ts';
import type { WebSocketLink } from '../sessions/websocket-link.ts';
import type { CarrierDialect, CarrierEvent } from './carrier-dialects.ts';
import { LineAudio, type LineFormat } from './line-audio.ts';
import { Playback, type PlayOut } from './playback.ts';

/** The custom parameter that carries a phone token when the stream URL does not (docs/phone.md). */
export const TOKEN_PARAMETER = 'svc_token';

/** How long a carrier has, once connected, to send its start. */
export const START_TIMEOUT_MS = 5_000;
/** What may wait while the call is admitted (a DB round trip or two): 250 frames are 5 s of audio, well under 1 MiB. */
const MAX_WAITING_MESSAGES = 250;
const MAX_WAITING_BYTES = 1024 * 1024;
/** Responses whose audio the caller cut, remembered so that their late deltas are not played (a few suffice). */
const MAX_SILENCED = 8;

/** The session a call opens with; its audio formats are the line's, whatever an update says (OutputPlayout.audioFormat). */
export const PHONE_SESSION = {
  type: 'realtime',
  output_modalities: ['audio'],
  audio: { input: { turn_detection: { type: 'server_vad', create_response: true, interrupt_response: true } } },
} as const;

/** An admitted call: its session, started on the bridge's outbox. */
export interface CallAdmission {
  open(outbox: Outbox<ServerEvent>, playout: OutputPlayout): RealtimeSession;
}

/** Admits the call whose stream starts with these custom parameters; a ServiceError refuses it. */
export type AdmitCall = (parameters: Readonly<Record<string, string>>) => Promise<CallAdmission>;

export interface PhoneBridgeSetup {
  admit: AdmitCall;
  clock: Clock;
  log: FastifyBaseLogger;
}

interface Live {
  session: RealtimeSession;
  line: LineAudio;
  playback: Playback;
}

export class PhoneBridge {
  private readonly outbox: Outbox<ServerEvent>;
  private state: 'starting' | 'admitting' | 'live' | 'closed' = 'starting';
  private live: Live | null = null;
  private streamId = '';
  private readonly startTimer: Timer;
  private waiting: { data: Buffer; isBinary: boolean }[] = [];
  private waitingBytes = 0;
  /** The session's audio waiting for room at the carrier (carrierRoom): one at a time in practice. */
  private audioWaiters: (() => void)[] = [];
  /** The conversation's response now running, if any. */
  private activeResponse: string | null = null;
  private readonly silenced = new Set<string>();
  /** The response of each answer being played (its deltas say), for what a barge-in reports. */
  private readonly responseOf = new Map<string, string>();

  constructor(
    private readonly link: WebSocketLink,
    private readonly dialect: CarrierDialect,
    private readonly setup: PhoneBridgeSetup,
  ) {
    const outbox = link.outbox<ServerEvent>((event) => this.toCarrier(event));
    // The answers' audio also waits while the carrier holds as much as its buffer takes (Vonage).
    this.outbox = {
      send: (event, options) => outbox.send(event, options),
      drained: () => outbox.drained().then(() => this.carrierRoom()),
      close: (code, reason) => outbox.close(code, reason),
      get open() {
        return outbox.open;
      },
    };
    this.startTimer = setup.clock.after(START_TIMEOUT_MS, () => {
      if (this.state === 'starting') link.close(1008, 'start_timeout');
    });
  }

  /** One message from the carrier. */
  message(data: Buffer, isBinary: boolean): void {
    if (this.state === 'admitting') {
      if (this.waiting.length >= MAX_WAITING_MESSAGES || this.waitingBytes + data.length > MAX_WAITING_BYTES)
        return this.refuse('rate_limit_exceeded', 'The call is still being admitted; this message was dropped.');
      this.waiting.push({ data, isBinary });
      this.waitingBytes += data.length;
      return;
    }
    const event = this.read(data, isBinary);
    if (!event) return;
    switch (event.kind) {
      case 'connected':
      case 'cleared':
      case 'dtmf':
      case 'other':
        return;
      case 'start':
        if (this.state !== 'starting') return this.refuse('invalid_request', 'start: the stream has started already.', 'event');
        return this.start(event);
      case 'media': {
        if (!this.live) return this.refuse('invalid_request', 'media: the stream has not started (no start event).', 'event');
        if (!event.inbound) return;
        const audio = this.live.line.toSession(event.audio);
        const append: ClientMessage = { event: { type: 'input_audio_buffer.append', audio: audio.toString('base64') }, size: data.length };
        return this.live.session.receive(append);
      }
      case 'mark':
        this.live?.playback.played(event.name);
        return this.wakeAudio();
      case 'stop':
        return this.link.close(1000, 'stop');
      case 'carrier_error':
        this.setup.log.warn({ carrier: this.dialect.name, streamId: this.streamId, detail: event.detail }, 'the carrier reports a media-stream error');
        return;
    }
  }

  /** The socket closed, whoever closed it. */
  closed(): void {
    this.state = 'closed';
    this.wakeAudio();
    this.startTimer.cancel();
    this.waiting = [];
    this.waitingBytes = 0;
    this.live?.session.transportClosed();
    this.live?.line.close();
  }

  private read(data: Buffer, isBinary: boolean): CarrierEvent | null {
    if (isBinary && !this.dialect.readBinary) {
      this.refuse('invalid_message', `Send ${this.dialect.name} media-stream events as JSON text messages.`);
      return null;
    }
    let value: unknown;
    if (!isBinary)
      try {
        value = JSON.parse(data.toString('utf8'));
      } catch {
        this.refuse('invalid_json', 'Each message must be a JSON object.');
        return null;
      }
    try {
      return isBinary ? this.dialect.readBinary!(data) : this.dialect.read(value);
    } catch (e) {
      if (!isServiceError(e)) throw e;
      this.refuse(e.code, e.message, e.param);
      return null;
    }
  }

  /** The stream starts: a format the gateway takes, then the call's admission, then its session. */
  private start(event: Extract<CarrierEvent, { kind: 'start' }>): void {
    this.startTimer.cancel();
    const format = event.format;
    if (!format) {
      this.setup.log.info({ carrier: this.dialect.name, format: event.formatName, takes: this.dialect.formats }, 'phone call refused: its audio format');
      return this.link.close(1003, 'unsupported_audio_format');
    }
    this.state = 'admitting';
    this.streamId = event.streamId;
    this.setup
      .admit(event.parameters)
      .then((admission) => this.open(admission, format, event))
      .catch((e: unknown) => this.refused(e));
  }

  private open(admission: CallAdmission, format: LineFormat, event: Extract<CarrierEvent, { kind: 'start' }>): void {
    // Gone while it was admitted: the route gives the admission back when the socket closes.
    if (this.state !== 'admitting') return;
    const line = new LineAudio(format);
    const playback = new Playback(line.framing(this.dialect.frameMs, this.dialect.padded));
    const session = admission.open(this.outbox, { audioFormat: line.sessionFormat, stop: () => this.stopPlayback() });
    this.live = { session, line, playback };
    this.state = 'live';
    session.receive({ event: { type: 'session.update', session: structuredClone(PHONE_SESSION) as Record<string, unknown> }, size: 0 });
    this.setup.log.info({ carrier: this.dialect.name, streamId: event.streamId, callId: event.callId, format: event.formatName }, 'phone call started');
    const waiting = this.waiting;
    this.waiting = [];
    this.waitingBytes = 0;
    for (const m of waiting) this.message(m.data, m.isBinary);
  }

  /** The call was not admitted (or its session did not start): the socket closes with why (1008 for what the caller or its key can change). */
  private refused(e: unknown): void {
    if (this.state === 'closed') return;
    this.waiting = [];
    if (!isServiceError(e)) {
      this.setup.log.warn({ err: e, carrier: this.dialect.name }, 'phone call admission failed');
      return this.link.close(1011, 'server_error');
    }
    this.setup.log.info({ carrier: this.dialect.name, code: e.code }, 'phone call refused');
    this.link.close(ERROR_TABLE[e.code].status >= 500 ? 1011 : 1008, e.code);
  }

  /** What of a session event reaches the carrier: the answers' audio with its marks, and a clear on barge-in. */
  private toCarrier(event: ServerEvent): (object | Buffer)[] {
    const live = this.live;
    switch (event.type) {
      case 'response.created':
        this.activeResponse = event.response.id;
        return [];
      case 'response.done':
        if (this.activeResponse === event.response.id) this.activeResponse = null;
        return [];
      case 'response.output_audio.delta': {
        if (!live || this.silenced.has(event.response_id)) return [];
        this.responseOf.set(event.item_id, event.response_id);
        if (this.responseOf.size > MAX_SILENCED) this.responseOf.delete(this.responseOf.keys().next().value!);
        const audio = live.line.toLine(event.item_id, Buffer.from(event.delta, 'base64'));
        return this.carrier(live.playback.audio(event.item_id, audio));
      }
      case 'response.output_audio.done':
        if (!live || this.silenced.has(event.response_id)) return [];
        return this.carrier([...live.playback.audio(event.item_id, live.line.endLine(event.item_id)), ...live.playback.end(event.item_id)]);
      case 'error':
        this.setup.log.warn({ carrier: this.dialect.name, streamId: this.streamId, code: event.error.code, message: event.error.message }, 'phone call error');
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
    const live = this.live;
    if (!live) return null;
    live.line.dropLine();
    const itemId = live.playback.playing();
    if (itemId === null) return null;
    const heard = { itemId, responseId: this.responseOf.get(itemId) ?? '', playedMs: live.playback.heardMs(itemId) };
    live.playback.clear();
    this.link.send(JSON.stringify(this.dialect.clear(this.streamId)));
    this.wakeAudio();
    return heard;
  }

  private carrier(out: PlayOut[]): (object | Buffer)[] {
    const format = this.live!.line.format;
    return out.map((o) => (o.kind === 'media' ? this.dialect.media(this.streamId, o.audio, format) : this.dialect.mark(this.streamId, o.name)));
  }

  /** Resolves once the carrier holds less unplayed audio than `maxAheadMs` (at once without one, or once the call is over). */
  private async carrierRoom(): Promise<void> {
    const max = this.dialect.maxAheadMs;
    while (max !== undefined && this.state === 'live' && this.live!.playback.unplayedMs > max)
      await new Promise<void>((resolve) => this.audioWaiters.push(resolve));
  }

  /** An echoed mark, a clear or the end: audio that waited for room looks again. */
  private wakeAudio(): void {
    const waiters = this.audioWaiters;
    this.audioWaiters = [];
    for (const wake of waiters) wake();
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
