// A live session's WebSocket: messages in, events out, pings, and a bounded outgoing buffer.
// Every socket route binds its session through this one place. A peer that stops reading cannot
// make the gateway queue without bound: past `dropAboveBytes` unread, droppable events (those a
// later one supersedes) are dropped; past `closeAboveBytes` the socket is closed with 1008.
// Audio waits on `drained()` before it is sent, so it stays under the first mark.
import type { RawData, WebSocket } from 'ws';
import type { Clock, Timer } from '../../server/clock.ts';
import type { Outbox, SendOptions } from './outbox.ts';

export interface WebSocketLinkLimits {
  /** Unread bytes above which audio waits (drained()) before more is sent. */
  highWaterBytes: number;
  /** Unread bytes above which droppable events are dropped. */
  dropAboveBytes: number;
  /** Unread bytes above which the socket is closed (1008 outgoing_buffer_full). */
  closeAboveBytes: number;
  pingIntervalMs: number;
}

export const DEFAULT_LINK_LIMITS: WebSocketLinkLimits = {
  highWaterBytes: 1024 * 1024,
  dropAboveBytes: 2 * 1024 * 1024,
  closeAboveBytes: 4 * 1024 * 1024,
  pingIntervalMs: 20_000,
};

export interface WebSocketLinkHandlers {
  message(data: Buffer, isBinary: boolean): void;
  /** The socket closed (whoever closed it); runs once. */
  closed(): void;
}

export const OUTGOING_BUFFER_FULL = 'outgoing_buffer_full';

export class WebSocketLink {
  private readonly ping: Timer;
  private flushed: Promise<void> = Promise.resolve();
  private closing = false;
  /** Events dropped because the peer was not reading (for metrics and tests). */
  dropped = 0;

  constructor(
    private readonly socket: WebSocket,
    clock: Clock,
    handlers: WebSocketLinkHandlers,
    readonly limits: WebSocketLinkLimits = DEFAULT_LINK_LIMITS,
  ) {
    this.ping = clock.every(limits.pingIntervalMs, () => this.open && socket.ping());
    socket.on('message', (data: RawData, isBinary: boolean) => {
      if (this.closing) return;
      handlers.message(Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data), isBinary);
    });
    socket.once('close', () => {
      this.closing = true;
      this.ping.cancel();
      handlers.closed();
    });
    socket.on('error', () => {});
  }

  get open(): boolean {
    return !this.closing && this.socket.readyState === this.socket.OPEN;
  }

  /** Bytes sent and not yet taken by the peer. */
  get unreadBytes(): number {
    return this.socket.bufferedAmount;
  }

  /** Sends one text or binary message, within the buffer's bounds (false: not sent). */
  send(data: string | Buffer, options?: SendOptions): boolean {
    if (!this.open) return false;
    const unread = this.socket.bufferedAmount;
    if (options?.droppable && unread > this.limits.dropAboveBytes) {
      this.dropped++;
      return false;
    }
    if (unread + data.length > this.limits.closeAboveBytes) {
      this.close(1008, OUTGOING_BUFFER_FULL);
      return false;
    }
    if (unread + data.length < this.limits.highWaterBytes) this.socket.send(data, { binary: typeof data !== 'string' });
    // Above the high-water mark: the callback runs once this message (and all before it) is handed to the OS, or the socket closed.
    else this.flushed = new Promise<void>((resolve) => this.socket.send(data, { binary: typeof data !== 'string' }, () => resolve()));
    return true;
  }

  drained(): Promise<void> {
    return this.socket.bufferedAmount < this.limits.highWaterBytes ? Promise.resolve() : this.flushed;
  }

  close(code: number, reason: string): void {
    if (this.closing) return;
    this.closing = true;
    this.socket.close(code, reason.slice(0, 120));
  }

  /** This socket as a session's outbox of JSON events: `encode` turns one event into the messages that carry it. */
  outbox<E>(encode: (event: E) => readonly object[]): Outbox<E> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the outbox's `open` getter reads the link's
    const link = this;
    return {
      send(event, options) {
        for (const message of encode(event)) if (!link.send(JSON.stringify(message), options)) return;
      },
      drained: () => link.drained(),
      close: (code, reason) => link.close(code, reason),
      get open() {
        return link.open;
      },
    };
  }
}
