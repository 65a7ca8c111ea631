// A live session's WebSocket: messages in, events out, pings, and a bounded outgoing buffer.
// Every socket route binds its session through this one place. A peer that stops reading cannot
// make the gateway queue without bound: past `dropAboveBytes` unread, droppable events (those a
// later one supersedes) are dropped; past `closeAboveBytes` the socket is closed with 1008.
// Audio waits on `drained()` before it is sent, so it stays under the first mark. A peer that
// draws more than `maxErrorEvents` error events within `errorWindowMs` (invalid messages, most
// often) is closed with 1008 too_many_invalid_messages. After either abuse close the link stops
// reading: frames the peer keeps sending are not parsed (ws would parse every one until the
// peer's close frame arrives), and the socket is ended `closeGraceMs` after the close frame is
// handed to the OS (ws ends it 30 s after the close whatever happens).
//
// Nor can a peer hold the event loop: ws hands on every message the socket has read, and one
// read of the kernel's buffer brings up to 2 MiB (libuv's 32 reads of 64 KiB), each large
// message read, unmasked, decoded and parsed on the loop. Past `readBytesPerTurn` handed on, the
// link pauses the socket and waits a turn of the loop (what ws had already read is queued, in
// order), so that other sockets and requests are served between one large message and the next:
// the rule of every reader of a peer (gateway/upstreams/loop-turns.ts).
import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';
import type { Clock, Timer } from '../../server/clock.ts';
import { BYTES_PER_TURN, messageBuffer, ReadTurns } from '../upstreams/loop-turns.ts';
import type { Outbox, SendOptions } from './outbox.ts';

export interface WebSocketLinkLimits {
  /** Unread bytes above which audio waits (drained()) before more is sent. */
  highWaterBytes: number;
  /** Unread bytes above which droppable events are dropped. */
  dropAboveBytes: number;
  /** Unread bytes above which the socket is closed (1008 outgoing_buffer_full). */
  closeAboveBytes: number;
  pingIntervalMs: number;
  /** Error events allowed within `errorWindowMs`; one more closes the socket (1008 too_many_invalid_messages). */
  maxErrorEvents: number;
  errorWindowMs: number;
  /** After an abuse close, how long the peer has to finish the close handshake before the socket is ended. */
  closeGraceMs: number;
  /** Message bytes handed on before the link waits a turn of the event loop (the socket paused meanwhile). */
  readBytesPerTurn: number;
}

export const DEFAULT_LINK_LIMITS: WebSocketLinkLimits = {
  highWaterBytes: 1024 * 1024,
  dropAboveBytes: 2 * 1024 * 1024,
  closeAboveBytes: 4 * 1024 * 1024,
  pingIntervalMs: 20_000,
  maxErrorEvents: 100,
  errorWindowMs: 10_000,
  closeGraceMs: 2_000,
  // One socket read's worth: a 1 MiB message waits a turn after it; an audio stream in real time never does.
  readBytesPerTurn: BYTES_PER_TURN,
};

export interface WebSocketLinkHandlers {
  message(data: Buffer, isBinary: boolean): void;
  /** The socket closed (whoever closed it); runs once. */
  closed(): void;
}

export const OUTGOING_BUFFER_FULL = 'outgoing_buffer_full';
export const TOO_MANY_INVALID_MESSAGES = 'too_many_invalid_messages';

export class WebSocketLink {
  private readonly ping: Timer;
  private flushed: Promise<void> = Promise.resolve();
  private closing = false;
  /** Closed for abuse: nothing more is read from the peer. */
  private stoppedReading = false;
  private errorWindowStart = Number.NEGATIVE_INFINITY;
  private errorsInWindow = 0;
  /** The peer's messages, in turns of the event loop: the socket is paused while the link waits one, and what ws had already read waits in order. */
  private readonly reading: ReadTurns;
  /** Events dropped because the peer was not reading (for metrics and tests). */
  dropped = 0;
  /** The TCP socket under the WebSocket. */
  private readonly wire: Socket;
  /** Corked until the end of this tick: the messages sent in one tick go to the OS in one write. */
  private corked = false;
  private readonly uncork = () => {
    this.corked = false;
    this.wire.uncork();
  };

  constructor(
    private readonly socket: WebSocket,
    private readonly clock: Clock,
    private readonly handlers: WebSocketLinkHandlers,
    readonly limits: WebSocketLinkLimits = DEFAULT_LINK_LIMITS,
  ) {
    this.wire = (socket as unknown as { _socket: Socket })._socket;
    this.ping = clock.every(limits.pingIntervalMs, () => this.open && socket.ping());
    // Once closing, what waits is dropped; the socket is read on after the wait, if only for the peer's close frame, unless closed for abuse.
    const source = {
      pause: () => socket.pause(),
      resume: () => {
        if (!this.stoppedReading) socket.resume();
      },
    };
    this.reading = new ReadTurns((data, isBinary) => handlers.message(data, isBinary), source, limits.readBytesPerTurn);
    socket.on('message', (data: RawData, isBinary: boolean) => this.reading.push(messageBuffer(data), isBinary));
    socket.once('close', () => {
      this.closing = true;
      this.reading.stop();
      this.ping.cancel();
      handlers.closed();
    });
    socket.on('error', () => {});
  }

  /** Turns of the event loop the link waited because the peer sent faster than `readBytesPerTurn` (for tests). */
  get turnsWaited(): number {
    return this.reading.turnsWaited;
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
      this.closeForAbuse(OUTGOING_BUFFER_FULL);
      return false;
    }
    // An event often goes out with others (a final transcript, the turn's end, its final text): one system call for them all.
    if (!this.corked) {
      this.corked = true;
      this.wire.cork();
      process.nextTick(this.uncork);
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
    this.reading.stop();
    this.socket.close(code, reason.slice(0, 120));
  }

  /** Counts one error event; false (and the socket closed) past the allowance of the window. */
  private allowErrorEvent(): boolean {
    const now = this.clock.now();
    if (now - this.errorWindowStart >= this.limits.errorWindowMs) {
      this.errorWindowStart = now;
      this.errorsInWindow = 0;
    }
    if (++this.errorsInWindow <= this.limits.maxErrorEvents) return true;
    this.closeForAbuse(TOO_MANY_INVALID_MESSAGES);
    return false;
  }

  /** Closes with 1008 and stops reading what the peer sends; ends the socket after the grace if the peer has not closed. */
  private closeForAbuse(reason: string): void {
    if (this.closing) return;
    this.close(1008, reason);
    this.stoppedReading = true;
    this.socket.pause();
    // The grace runs from when what was sent (the close frame last) is handed to the OS, so a peer that reads it learns why.
    const wire = this.wire;
    if (this.corked) this.uncork(); // the close frame goes now: writableLength then counts only what the OS would not take
    const endAfterGrace = () => {
      const grace = this.clock.after(this.limits.closeGraceMs, () => this.socket.terminate());
      this.socket.once('close', () => grace.cancel());
    };
    if (wire.writableLength === 0) endAfterGrace();
    else wire.once('drain', endAfterGrace);
  }

  /**
   * This socket as a session's outbox: `encode` turns one event into the messages that carry it,
   * each sent as JSON text, as a binary message when it is a Buffer (a phone carrier's audio), or
   * as it is when it is a string (JSON text written already: audio-json.ts).
   */
  outbox<E>(encode: (event: E) => readonly (object | Buffer | string)[]): Outbox<E> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the outbox's `open` getter reads the link's
    const link = this;
    return {
      send(event, options) {
        if ((event as { type?: unknown }).type === 'error' && !link.allowErrorEvent()) return;
        for (const message of encode(event)) {
          const data = typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message);
          if (!link.send(data, options)) return;
        }
      },
      drained: () => link.drained(),
      close: (code, reason) => link.close(code, reason),
      get open() {
        return link.open;
      },
    };
  }
}
