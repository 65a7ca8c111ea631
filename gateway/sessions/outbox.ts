// What a transport-neutral session sends its events through. A WebSocket (websocket-link.ts),
// a WebRTC data channel or an in-process caller implement it; the session never sees which.

export interface SendOptions {
  /**
   * The event may be dropped when the peer is not reading: a later event supersedes it (an
   * interim transcript), so dropping it loses nothing the peer needs.
   */
  droppable?: boolean;
}

export interface Outbox<E> {
  send(event: E, options?: SendOptions): void;
  /** Resolves once the peer has taken what was sent so far, down to the transport's high-water mark (at once below it). Audio waits on it. */
  drained(): Promise<void>;
  /** Ends the connection; the session learns of the end from its transport (it is not called back). */
  close(code: number, reason: string): void;
  /** False once the connection is closing or closed: nothing more is sent. */
  readonly open: boolean;
}
