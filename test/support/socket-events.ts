// What a connection delivered, in order, and waiting on it: the next event that matches, failing
// with every event seen when the connection ends first or the time runs out. `EventLog` takes
// events from any source (a client library's callbacks, an async stream); `socketEvents` feeds
// one from a `ws` socket.
import WebSocket from 'ws';

export interface SocketClose {
  code: number;
  reason: string;
}

const DEFAULT_TIMEOUT_MS = 30_000;

const typeOf = (event: unknown): string =>
  typeof event === 'object' && event !== null && typeof (event as { type?: unknown }).type === 'string'
    ? (event as { type: string }).type
    : JSON.stringify(event);

export class EventLog<E> {
  readonly events: E[] = [];
  private readonly waiters = new Set<() => void>();
  private endedBy: string | null = null;
  private taken = 0;

  /** `describe` names one event in failure messages (its `type` by default). */
  constructor(private readonly describe: (event: E) => string = typeOf) {}

  readonly push = (event: E): void => {
    this.events.push(event);
    for (const wake of this.waiters) wake();
  };

  /** No more events will come (`why` goes into the failure message of whoever still waits); the first call counts. */
  end(why: string): void {
    this.endedBy ??= why;
    for (const wake of this.waiters) wake();
  }

  get ended(): string | null {
    return this.endedBy;
  }

  /** The events from index `from`, in short, for failure messages. */
  summary(from = 0): string {
    return this.events.slice(from).map(this.describe).join(', ');
  }

  /** The first event from index `from` that matches `pred`. */
  async first(pred: (event: E) => boolean, { from = 0, timeoutMs = DEFAULT_TIMEOUT_MS }: { from?: number; timeoutMs?: number } = {}): Promise<E> {
    return this.events[await this.indexOf(pred, from, timeoutMs)]!;
  }

  /** Every event after those taken by earlier calls, up to and including the next that matches `pred`. */
  async through(pred: (event: E) => boolean, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<E[]> {
    const from = this.taken;
    const at = await this.indexOf(pred, from, timeoutMs);
    this.taken = at + 1;
    return this.events.slice(from, at + 1);
  }

  /** Resolves once `count` events match `pred`. */
  async count(pred: (event: E) => boolean, count: number, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    let seen = 0;
    let from = 0;
    while (seen < count) {
      from = (await this.indexOf(pred, from, timeoutMs)) + 1;
      seen++;
    }
  }

  private indexOf(pred: (event: E) => boolean, from: number, timeoutMs: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      let looked = from;
      const check = () => {
        for (; looked < this.events.length; looked++) {
          if (pred(this.events[looked]!)) {
            done();
            resolve(looked);
            return;
          }
        }
        if (this.endedBy !== null) {
          done();
          reject(new Error(`${this.endedBy} before the awaited event; events: ${this.summary()}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no awaited event within ${timeoutMs} ms; events: ${this.summary()}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }
}

/** The server sends only JSON text frames: a binary frame fails the test. */
export const jsonText = (data: WebSocket.RawData, isBinary: boolean): unknown => {
  if (isBinary) throw new Error('the server sends only JSON text frames');
  return JSON.parse(data.toString());
};

type Parse<E> = (data: WebSocket.RawData, isBinary: boolean) => E | undefined;

/**
 * An `EventLog` of what `ws` receives (each message as `parse` reads it, JSON text by default;
 * a message it reads as undefined is left out), ended when the socket closes; `closed` resolves
 * with the close code and reason.
 */
export function socketEvents<E>(
  ws: WebSocket,
  { parse = jsonText as Parse<E>, describe }: { parse?: Parse<E>; describe?: (event: E) => string } = {},
): { log: EventLog<E>; closed: Promise<SocketClose> } {
  const log = new EventLog<E>(describe);
  ws.on('message', (data, isBinary) => {
    const event = parse(data, isBinary);
    if (event !== undefined) log.push(event);
  });
  const closed = new Promise<SocketClose>((resolve) =>
    ws.on('close', (code, reason) => {
      const close = { code, reason: reason.toString() };
      log.end(`socket closed (${close.code} ${close.reason})`);
      resolve(close);
    }),
  );
  return { log, closed };
}
