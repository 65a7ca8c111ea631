// A session's events over a WebRTC data channel (OpenAI's `oai-events`), bounded as a
// WebSocketLink is (gateway/sessions/websocket-link.ts, the same limits): a peer that stops
// reading cannot make the gateway queue without bound (past `dropAboveBytes` unread, droppable
// events are dropped; past `closeAboveBytes` the call ends, outgoing_buffer_full), a peer that
// draws more than `maxErrorEvents` error events within `errorWindowMs` ends it
// (too_many_invalid_messages), a message larger than the session takes is an error event, and
// nothing is read after an abuse end. A data channel has no close code: the link reports the
// end (`ended(code, reason)`, 1008 for abuse) and the call closes the connection and tells its
// control sockets with that code.
import type { RTCDataChannel } from 'werift';
import type { Clock } from '../../server/clock.ts';
import type { SendOptions } from '../sessions/outbox.ts';
import { DEFAULT_LINK_LIMITS, OUTGOING_BUFFER_FULL, TOO_MANY_INVALID_MESSAGES, type WebSocketLinkLimits } from '../sessions/websocket-link.ts';

export type DataChannelLimits = Pick<WebSocketLinkLimits, 'dropAboveBytes' | 'closeAboveBytes' | 'maxErrorEvents' | 'errorWindowMs'> & {
  /** A message from the peer larger than this is answered with an error event, unread (the WebSocket's 1 MiB). */
  maxIncomingBytes: number;
};

export const DEFAULT_DATA_CHANNEL_LIMITS: DataChannelLimits = {
  dropAboveBytes: DEFAULT_LINK_LIMITS.dropAboveBytes,
  closeAboveBytes: DEFAULT_LINK_LIMITS.closeAboveBytes,
  maxErrorEvents: DEFAULT_LINK_LIMITS.maxErrorEvents,
  errorWindowMs: DEFAULT_LINK_LIMITS.errorWindowMs,
  maxIncomingBytes: 1024 * 1024,
};

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
  /** Events dropped because the peer was not reading (for metrics and tests). */
  dropped = 0;

  constructor(
    private readonly channel: RTCDataChannel,
    private readonly clock: Clock,
    private readonly handlers: DataChannelHandlers,
    readonly limits: DataChannelLimits = DEFAULT_DATA_CHANNEL_LIMITS,
  ) {
    channel.onMessage.subscribe((data) => {
      if (this.ending) return;
      const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      if (bytes > limits.maxIncomingBytes) return handlers.tooLarge(bytes);
      handlers.message(typeof data === 'string' ? Buffer.from(data) : data, typeof data !== 'string');
    });
    channel.stateChanged.subscribe((state) => {
      if (state === 'closed') this.end(1000, 'closed');
    });
  }

  get open(): boolean {
    return !this.ending && this.channel.readyState === 'open';
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
    this.handlers.ended(code, reason);
  }
}
