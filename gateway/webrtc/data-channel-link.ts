// A session's events over a WebRTC data channel (OpenAI's `oai-events`), bounded as a
// WebSocketLink is (gateway/sessions/websocket-link.ts, the same limits): a peer that stops
// reading cannot make the gateway queue without bound (past `dropAboveBytes` unread, droppable
// events are dropped; past `closeAboveBytes` the call ends, outgoing_buffer_full), a peer that
// draws more than `maxErrorEvents` error events within `errorWindowMs` ends it
// (too_many_invalid_messages), a message larger than the session takes is an error event, and
// nothing is read after an abuse end. A data channel has no close code: the link reports the
// end (`ended(code, reason)`, 1008 for abuse) and the call closes the connection and tells its
// control sockets with that code.
//
// Nor can a peer hold the event loop: werift hands on every message as its last piece arrives,
// and a gap filled (a lost packet sent again) completes all that came after it at once, up to
// the channel's 1 MiB window. Past `readBytesPerTurn` handed on, the link waits a turn of the
// loop (gateway/upstreams/loop-turns.ts), the messages that arrive meanwhile waiting in order.
// werift cannot be paused, so what waits is bounded: past `maxWaitingBytes` the call ends
// (incoming_buffer_full). One turn reads at most 32 packets of a connection's socket (libuv's
// reads per turn, ~38 KB), less than a turn hands on: the bound holds a burst, never a peer.
import type { RTCDataChannel } from 'werift';
import type { Clock } from '../../server/clock.ts';
import type { SendOptions } from '../sessions/outbox.ts';
import { DEFAULT_LINK_LIMITS, OUTGOING_BUFFER_FULL, TOO_MANY_INVALID_MESSAGES, type WebSocketLinkLimits } from '../sessions/websocket-link.ts';
import { ReadTurns } from '../upstreams/loop-turns.ts';

export type DataChannelLimits = Pick<WebSocketLinkLimits, 'dropAboveBytes' | 'closeAboveBytes' | 'maxErrorEvents' | 'errorWindowMs' | 'readBytesPerTurn'> & {
  /** A message from the peer larger than this is answered with an error event, unread (the WebSocket's 1 MiB). */
  maxIncomingBytes: number;
  /** Bytes of messages waiting for their turn above which the call ends (1008 incoming_buffer_full). */
  maxWaitingBytes: number;
};

export const DEFAULT_DATA_CHANNEL_LIMITS: DataChannelLimits = {
  dropAboveBytes: DEFAULT_LINK_LIMITS.dropAboveBytes,
  closeAboveBytes: DEFAULT_LINK_LIMITS.closeAboveBytes,
  maxErrorEvents: DEFAULT_LINK_LIMITS.maxErrorEvents,
  errorWindowMs: DEFAULT_LINK_LIMITS.errorWindowMs,
  readBytesPerTurn: DEFAULT_LINK_LIMITS.readBytesPerTurn,
  maxIncomingBytes: 1024 * 1024,
  // Twice the most a burst brings: the 1 MiB window completed at once, and a 1 MiB message.
  maxWaitingBytes: 4 * 1024 * 1024,
};

export const INCOMING_BUFFER_FULL = 'incoming_buffer_full';

export interface DataChannelHandlers {
  message(data: Buffer, isBinary: boolean): void;
  /** A message too large to read: answered with an error event by the caller. */
  tooLarge(bytes: number): void;
  /** The link ended the call for abuse (1008 and why), or the channel closed (1000, 'closed'); runs once. */
  ended(code: number, reason: string): void;
}

export class DataChannelLink {
  private ending = false;
  private errorWindowStart = Number.NEGATIVE_INFINITY;
  private errorsInWindow = 0;
  /** The peer's messages, in turns of the event loop (an oversize one's error event in its place among them). */
  private readonly reading: ReadTurns;
  /** Events dropped because the peer was not reading (for metrics and tests). */
  dropped = 0;

  constructor(
    private readonly channel: RTCDataChannel,
    private readonly clock: Clock,
    private readonly handlers: DataChannelHandlers,
    readonly limits: DataChannelLimits = DEFAULT_DATA_CHANNEL_LIMITS,
  ) {
    this.reading = new ReadTurns((data, isBinary) => handlers.message(data, isBinary), null, limits.readBytesPerTurn);
    channel.onMessage.subscribe((data) => {
      if (this.ending) return;
      const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      if (bytes > limits.maxIncomingBytes) return this.reading.after(() => handlers.tooLarge(bytes));
      this.reading.push(typeof data === 'string' ? Buffer.from(data) : data, typeof data !== 'string');
      if (this.reading.waitingBytes > limits.maxWaitingBytes) this.end(1008, INCOMING_BUFFER_FULL);
    });
    channel.stateChanged.subscribe((state) => {
      if (state === 'closed') this.end(1000, 'closed');
    });
  }

  get open(): boolean {
    return !this.ending && this.channel.readyState === 'open';
  }

  /** Turns of the event loop the link waited because the peer sent faster than `readBytesPerTurn` (for tests). */
  get turnsWaited(): number {
    return this.reading.turnsWaited;
  }

  /** Bytes sent and not yet taken by the peer. */
  get unreadBytes(): number {
    return this.channel.bufferedAmount;
  }

  /** Sends one text message within the buffer's bounds (false: not sent). */
  send(text: string, options?: SendOptions): boolean {
    if (!this.open) return false;
    const unread = this.channel.bufferedAmount;
    if (options?.droppable && unread > this.limits.dropAboveBytes) {
      this.dropped++;
      return false;
    }
    if (unread + Buffer.byteLength(text) > this.limits.closeAboveBytes) {
      this.end(1008, OUTGOING_BUFFER_FULL);
      return false;
    }
    this.channel.send(text);
    return true;
  }

  /** Counts one error event; false (and the call ended) past the allowance of the window. */
  allowErrorEvent(): boolean {
    const now = this.clock.now();
    if (now - this.errorWindowStart >= this.limits.errorWindowMs) {
      this.errorWindowStart = now;
      this.errorsInWindow = 0;
    }
    if (++this.errorsInWindow <= this.limits.maxErrorEvents) return true;
    this.end(1008, TOO_MANY_INVALID_MESSAGES);
    return false;
  }

  /** Stops reading and sending; the call is told once. */
  end(code: number, reason: string): void {
    if (this.ending) return;
    this.ending = true;
    this.reading.stop();
    this.handlers.ended(code, reason);
  }
}
