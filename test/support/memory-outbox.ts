// An in-memory Outbox (gateway/sessions/outbox.ts): a transport-neutral session's events,
// kept in order for a test to read, with no socket. `next` waits for the next event that
// matches, as a client reading its socket would; `pause` stands for a peer that stops reading
// (what waits on drained() waits until `resume`).
import type { Outbox } from '../../gateway/sessions/outbox.ts';

export interface MemoryOutbox<E> extends Outbox<E> {
  readonly events: E[];
  /** The close the session asked for, if it did. */
  readonly closedWith: { code: number; reason: string } | null;
  /** Resolves with the next event (after those already returned) that matches. */
  next(match?: (event: E) => boolean, timeoutMs?: number): Promise<E>;
  /** Resolves once the session closed the outbox. */
  closed(timeoutMs?: number): Promise<{ code: number; reason: string }>;
  /** The peer stops reading: drained() resolves only after resume(). */
  pause(): void;
  resume(): void;
  /** Resolves once the session waits on drained() while the peer is paused. */
  blocked(timeoutMs?: number): Promise<void>;
}

export function memoryOutbox<E>(): MemoryOutbox<E> {
  const events: E[] = [];
  let cursor = 0;
  let closedWith: { code: number; reason: string } | null = null;
  let paused: { resumed: Promise<void>; resume: () => void; waited: boolean } | null = null;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  const waitFor = <T>(found: () => T | undefined, what: string, timeoutMs: number) =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const value = found();
        if (value === undefined) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${what} within ${timeoutMs} ms; events so far: ${JSON.stringify(events).slice(-2000)}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  return {
    events,
    get closedWith() {
      return closedWith;
    },
    get open() {
      return closedWith === null;
    },
    send(event) {
      if (closedWith) return;
      events.push(event);
      wake();
    },
    drained() {
      if (!paused) return Promise.resolve();
      paused.waited = true;
      wake();
      return paused.resumed;
    },
    pause() {
      if (paused) return;
      let resume = () => {};
      const resumed = new Promise<void>((r) => (resume = r));
      paused = { resumed, resume, waited: false };
    },
    resume() {
      paused?.resume();
      paused = null;
    },
    blocked(timeoutMs = 10_000) {
      return waitFor(() => (paused?.waited ? true : undefined), 'drained() while paused', timeoutMs).then(() => {});
    },
    close(code, reason) {
      if (closedWith) return;
      closedWith = { code, reason };
      wake();
    },
    next(match = () => true, timeoutMs = 10_000) {
      return waitFor(
        () => {
          for (; cursor < events.length;) {
            const event = events[cursor++]!;
            if (match(event)) return event;
          }
          return undefined;
        },
        'matching event',
        timeoutMs,
      );
    },
    closed(timeoutMs = 10_000) {
      return waitFor(() => closedWith ?? undefined, 'close', timeoutMs);
    },
  };
}
