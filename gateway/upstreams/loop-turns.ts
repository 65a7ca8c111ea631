// Taking turns of the event loop: whatever reads a peer's messages (a client's WebSocket or data
// channel, an engine's WebSocket, an engine's HTTP body) hands on at most BYTES_PER_TURN of them,
// and the message that passes it, then waits a turn of the loop, so that one peer sending back to
// back cannot keep the others waiting. Without it one turn can hand on megabytes: a socket's
// read brings up to 2 MiB (libuv's 32 reads of 64 KiB), a data channel's filled gap up to its
// 1 MiB window, each message decoded and parsed on the loop. While a reader waits its source is
// paused if it can be, and what still arrives waits its turn, in order, with whatever must come
// after it (an engine's close after its last transcripts).
import type { RawData, WebSocket } from 'ws';

/** Bytes handed on before a reader waits a turn of the event loop: one socket read's worth. */
export const BYTES_PER_TURN = 64 * 1024;

/** A source that can stop delivering for a while (a ws socket). */
export interface Pausable {
  pause(): void;
  resume(): void;
}

type Waiting = { data: Buffer; isBinary: boolean } | (() => void);

/**
 * Which turn of the event loop this is: moved on by one setImmediate, scheduled by the first
 * reader to ask in a turn (one for the whole process, whatever the number of readers).
 */
let loopTurn = 0;
let turnEnding = false;
const endTurn = () => {
  loopTurn++;
  turnEnding = false;
};
function currentLoopTurn(): number {
  if (!turnEnding) {
    turnEnding = true;
    setImmediate(endTurn);
  }
  return loopTurn;
}

export class ReadTurns {
  /** Bytes handed on in the turn `turn`. */
  private sinceTurn = 0;
  private turn = -1;
  private waitingTurn = false;
  private readonly waiting: Waiting[] = [];
  private stopped = false;
  /** Bytes of messages waiting for the next turn. */
  waitingBytes = 0;
  /** Turns of the event loop waited because the peer sent faster than `bytesPerTurn` (for tests). */
  turnsWaited = 0;

  /** `source`: paused while the reader waits, resumed after (null: it cannot be, and all it delivers waits here). */
  constructor(
    private readonly handOn: (data: Buffer, isBinary: boolean) => void,
    private readonly source: Pausable | null,
    readonly bytesPerTurn: number = BYTES_PER_TURN,
  ) {}

  /** One message from the source: handed on now, or after those waiting. */
  push(data: Buffer, isBinary: boolean): void {
    if (this.stopped) return;
    if (!this.waitingTurn) return this.deliver(data, isBinary);
    this.waiting.push({ data, isBinary });
    this.waitingBytes += data.length;
  }

  /** Runs `then` once every message pushed before it is handed on (at once if none waits). */
  after(then: () => void): void {
    if (this.waitingTurn && !this.stopped) this.waiting.push(then);
    else then();
  }

  /** Nothing more is handed on: what waits is dropped (the source is still resumed after the turn). */
  stop(): void {
    this.stopped = true;
    this.waiting.length = 0;
    this.waitingBytes = 0;
  }

  private deliver(data: Buffer, isBinary: boolean): void {
    // Counted per turn: a stream in real time (an audio frame every 20 ms) never waits one.
    const turn = currentLoopTurn();
    if (turn !== this.turn) {
      this.turn = turn;
      this.sinceTurn = 0;
    }
    this.handOn(data, isBinary);
    this.sinceTurn += data.length;
    if (this.sinceTurn >= this.bytesPerTurn && !this.stopped) this.waitTurn();
  }

  private waitTurn(): void {
    this.sinceTurn = 0;
    this.waitingTurn = true;
    this.turnsWaited++;
    this.source?.pause();
    setImmediate(() => {
      this.waitingTurn = false;
      while (this.waiting.length > 0 && !this.waitingTurn) {
        const next = this.waiting.shift()!;
        if (typeof next === 'function') next();
        else {
          this.waitingBytes -= next.data.length;
          this.deliver(next.data, next.isBinary);
        }
      }
      if (!this.waitingTurn) this.source?.resume();
    });
  }
}

/** A ws message as one Buffer. */
export function messageBuffer(data: RawData): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

/**
 * Reads a ws socket's messages in turns, the socket paused while it waits. What must follow the
 * messages (the socket's close, its error) goes through `after()` of what this returns.
 */
export function readInTurns(socket: WebSocket, handOn: (data: Buffer, isBinary: boolean) => void): ReadTurns {
  const turns = new ReadTurns(handOn, socket);
  socket.on('message', (data: RawData, isBinary: boolean) => turns.push(messageBuffer(data), isBinary));
  return turns;
}
