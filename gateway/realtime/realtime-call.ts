// One WebRTC call of POST /v1/realtime/calls (OpenAI's WebRTC transport; docs/realtime.md
// "WebRTC"): a peer connection answered from the client's offer, bound to the same
// RealtimeSession a WebSocket drives. The session starts when the client's `oai-events` data
// channel opens, and its events go there as JSON (and to the call's control sockets, `GET
// /v1/realtime?call_id=`), all but the answer's audio: that is Opus on the audio track, paced by
// the gateway (AudioPlayout), which is how it knows what was heard when the user speaks over it.
// The caller's Opus is decoded to pcm16 at 24 kHz and appended to the session as
// input_audio_buffer.append would. A call whose connection never completes ends after the
// connect timeout, its place and credit given back; a connection that fails, a hang-up, the
// session's end (idle, revocation, shutdown, credit) end it the same way, once.
import { randomBytes } from 'node:crypto';
import type { MediaStreamTrack, RTCDataChannel, RTCPeerConnection, RtpPacket } from 'werift';
import type { WebSocket } from 'ws';
import type { Timer } from '../../server/clock.ts';
import type { GatewayContext } from '../context.ts';
import type { SendOptions } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { AudioPlayout } from '../webrtc/audio-playout.ts';
import { DataChannelLink } from '../webrtc/data-channel-link.ts';
import { OpusReceiver, OpusSender } from '../webrtc/opus-rtp.ts';
import type { AnsweredPeer } from '../webrtc/peer-connection.ts';
import type { WebRtcLibs } from '../webrtc/webrtc-libs.ts';
import { startRealtimeSession, type RealtimeAdmission, type RealtimeStart } from './open-realtime.ts';
import type { RealtimeSession } from './realtime-session.ts';
import type { ServerEvent } from './server-events.ts';
import { encodeServerEvent, readClientMessage } from './wire.ts';

/** The data channel OpenAI's clients open for the events. */
export const EVENTS_CHANNEL = 'oai-events';
/** Control sockets one call may have (a server joining the call's events). */
export const MAX_CONTROL_SOCKETS = 4;
/** How long an ending call waits for its last events (the error that ended it) to leave before the connection closes. */
const LAST_EVENTS_GRACE_MS = 2000;

export interface CallSetup {
  ctx: GatewayContext;
  libs: WebRtcLibs;
  peer: AnsweredPeer;
  admission: RealtimeAdmission;
  start: RealtimeStart;
  /** The call ended (its request-log row is finished, it leaves the registry). */
  onEnd: (call: RealtimeCall) => void;
}

export class RealtimeCall {
  readonly id = `rtc_${randomBytes(16).toString('hex')}`;
  readonly orgId: string;
  /** The SDP answer to the client's offer. */
  readonly answerSdp: string;
  private readonly pc: RTCPeerConnection;
  private readonly playout: AudioPlayout;
  private readonly receiver: OpusReceiver;
  private readonly sender: OpusSender;
  private readonly controls = new Set<WebSocketLink>();
  private channel: RTCDataChannel | null = null;
  private link: DataChannelLink | null = null;
  private session: RealtimeSession | null = null;
  private connectTimer: Timer | null;
  private disconnectTimer: Timer | null = null;
  private ended = false;
  private readonly closeGauge: () => void;
  /** Resolves once the call has ended and its connection is closed. */
  readonly closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(private readonly setup: CallSetup) {
    const { ctx, peer, libs } = setup;
    this.orgId = setup.start.auth.orgId;
    this.pc = peer.pc;
    this.answerSdp = peer.answerSdp;
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    this.closeGauge = ctx.metrics.webSocketOpened('/v1/realtime/calls');
    this.sender = new OpusSender(libs, (packet: RtpPacket) => void peer.audio.sender.sendRtp(packet).catch(() => {}));
    this.receiver = new OpusReceiver(libs);
    this.playout = new AudioPlayout({
      frame: (pcm, gapFrames, marker) => this.sender.frame(pcm, gapFrames, marker),
      started: (responseId) => this.broadcast({ type: 'output_audio_buffer.started', response_id: responseId }),
      stopped: (responseId) => this.broadcast({ type: 'output_audio_buffer.stopped', response_id: responseId }),
      overflow: () => this.end(1008, 'outgoing_buffer_full'),
    });
    // The remote track was made while the offer was applied; a later one (renegotiation) too.
    const listen = (track: MediaStreamTrack) => track.onReceiveRtp.subscribe((rtp) => this.audioIn(rtp));
    for (const track of peer.audio.receiver.tracks) listen(track);
    peer.audio.onTrack.subscribe(listen);
    this.pc.onDataChannel.subscribe((channel) => this.channelOpened(channel));
    this.pc.connectionStateChange.subscribe((state) => this.connectionState(state));
    // A connection that never completes (ICE or DTLS) gives its place and credit back.
    this.connectTimer = ctx.clock.after(ctx.config.webrtc.connectTimeoutMs, () => {
      if (!this.session) this.end(1000, 'connect_timeout');
    });
    ctx.lifecycle.streamsEnded.addEventListener('abort', this.onShutdown, { once: true });
  }

  /** A shutdown ends a call that has not connected; a connected one ends with its session (1001). */
  private readonly onShutdown = (): void => {
    if (!this.session) this.end(1001, 'shutdown');
  };

  get isEnded(): boolean {
    return this.ended;
  }

  /** Joins a server's control socket to the call's events (GET /v1/realtime?call_id=): it sees what the data channel sees and may send events. */
  attachControl(socket: WebSocket): void {
    const { ctx } = this.setup;
    const link: WebSocketLink = new WebSocketLink(socket, ctx.clock, {
      message: (data, isBinary) => {
        if (this.session) this.session.receive(readClientMessage(data, isBinary));
        else
          link.send(
            JSON.stringify(
              encodeServerEvent(
                {
                  type: 'error',
                  error: {
                    type: 'invalid_request_error',
                    code: 'invalid_request',
                    message: 'The call has not connected yet: events are taken once its data channel is open.',
                    param: null,
                    event_id: null,
                  },
                },
                false,
              ),
            ),
          );
      },
      closed: () => this.controls.delete(link),
    });
    this.controls.add(link);
    ctx.lifecycle.trackSocket(socket);
  }

  get controlCount(): number {
    return this.controls.size;
  }

  /** Ends the call (hang-up, the session's end, a failed connection); runs once. */
  end(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.connectTimer?.cancel();
    this.disconnectTimer?.cancel();
    this.setup.ctx.lifecycle.streamsEnded.removeEventListener('abort', this.onShutdown);
    this.playout.close();
    if (this.session) this.session.transportClosed();
    else {
      this.setup.admission.hold.release();
      this.setup.start.log.debug({ callId: this.id, reason }, 'webrtc call ended before it connected');
    }
    this.setup.admission.ticket.release();
    for (const control of this.controls) control.close(code, reason);
    this.closeGauge();
    this.setup.onEnd(this);
    void this.closeConnection();
  }

  /** The last events out (bounded wait), then the data channel and the connection closed. */
  private async closeConnection(): Promise<void> {
    const channel = this.channel;
    if (channel && channel.readyState === 'open' && channel.bufferedAmount > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, LAST_EVENTS_GRACE_MS);
        timer.unref();
        channel.bufferedAmountLowThreshold = 0;
        channel.bufferedAmountLow.once(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    try {
      channel?.close();
    } catch {
      // already closing
    }
    await this.pc.close().catch(() => {});
    this.receiver.close();
    this.sender.close();
    this.resolveClosed();
  }

  private connectionState(state: string): void {
    if (state === 'failed' || state === 'closed') return this.end(1000, `connection_${state}`);
    if (state === 'disconnected') {
      // ICE may recover (consent freshness, a network change) within the connect timeout.
      this.disconnectTimer ??= this.setup.ctx.clock.after(this.setup.ctx.config.webrtc.connectTimeoutMs, () => this.end(1000, 'connection_lost'));
    } else if (state === 'connected') {
      this.disconnectTimer?.cancel();
      this.disconnectTimer = null;
    }
  }

  /** The client's data channel: `oai-events` starts the session; any other is closed. */
  private channelOpened(channel: RTCDataChannel): void {
    if (this.ended || channel.label !== EVENTS_CHANNEL || this.channel) {
      channel.close();
      return;
    }
    this.channel = channel;
    const { ctx, admission, start } = this.setup;
    this.link = new DataChannelLink(channel, ctx.clock, {
      message: (data, isBinary) => this.session?.receive(readClientMessage(data, isBinary)),
      tooLarge: (bytes) =>
        this.session?.sendError({ code: 'invalid_message', message: `A message of ${bytes} bytes: at most ${this.link!.limits.maxIncomingBytes} a message.` }),
      ended: (code, reason) => this.end(code, reason),
    });
    this.connectTimer?.cancel();
    this.connectTimer = null;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the outbox's `open` getter reads the call's state
    const call = this;
    const outbox = {
      send: (event: ServerEvent, options?: SendOptions) => this.fromSession(event, options),
      drained: () => this.playout.drained(),
      close: (code: number, reason: string) => this.end(code, reason),
      get open() {
        return !call.ended;
      },
    };
    this.session = startRealtimeSession(ctx, admission, outbox, { ...start, playout: this.playout });
  }

  /** What the session sends: its audio to the track, everything else to the data channel and the control sockets. */
  private fromSession(event: ServerEvent, options?: SendOptions): void {
    if (this.ended) return;
    if (event.type === 'response.output_audio.delta') return this.playout.push(event.response_id, event.item_id, Buffer.from(event.delta, 'base64'));
    if (event.type === 'error' && this.link && !this.link.allowErrorEvent()) return;
    this.broadcast(event, options);
    if (event.type === 'response.done') this.playout.responseDone(event.response.id);
  }

  private broadcast(event: ServerEvent, options?: SendOptions): void {
    const text = JSON.stringify(encodeServerEvent(event, false));
    this.link?.send(text, options);
    for (const control of this.controls) control.send(text, options);
  }

  private audioIn(rtp: RtpPacket): void {
    if (!this.session || this.ended) return;
    const pcm = this.receiver.receive(rtp);
    if (pcm.length === 0) return;
    this.session.receive({ event: { type: 'input_audio_buffer.append', audio: pcm.toString('base64') }, size: pcm.length });
  }
}
