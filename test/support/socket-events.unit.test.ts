// The event-waiter the socket clients share: it finds what came before the wait as well as
// after it, takes events in order, and fails with what it saw.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventLog } from './socket-events.ts';

type Ev = { type: string; n?: number };
const is = (type: string) => (e: Ev) => e.type === type;

afterEach(() => {
  vi.useRealTimers();
});

describe('EventLog', () => {
  it('first: an event already there, or the next to come, from index `from`', async () => {
    const log = new EventLog<Ev>();
    log.push({ type: 'a', n: 1 });
    expect(await log.first(is('a'))).toEqual({ type: 'a', n: 1 });
    const later = log.first(is('a'), { from: 1 });
    log.push({ type: 'b' });
    log.push({ type: 'a', n: 2 });
    expect(await later).toEqual({ type: 'a', n: 2 });
  });

  it('through: every event after those taken, up to and including the next match', async () => {
    const log = new EventLog<Ev>();
    for (const type of ['x', 'done', 'y']) log.push({ type });
    expect((await log.through(is('done'))).map((e) => e.type)).toEqual(['x', 'done']);
    const next = log.through(is('done'));
    log.push({ type: 'done' });
    expect((await next).map((e) => e.type)).toEqual(['y', 'done']);
  });

  it('count: resolves once that many events match', async () => {
    const log = new EventLog<Ev>();
    let resolved = false;
    const two = log.count(is('a'), 2).then(() => (resolved = true));
    log.push({ type: 'a' });
    log.push({ type: 'b' });
    await Promise.resolve();
    expect(resolved).toBe(false);
    log.push({ type: 'a' });
    await two;
    expect(resolved).toBe(true);
  });

  it('an end before the event rejects, saying why and what came', async () => {
    const log = new EventLog<Ev>();
    const waiting = log.first(is('done'));
    log.push({ type: 'started' });
    log.end('socket closed (1011 engine failed)');
    log.end('a later reason');
    await expect(waiting).rejects.toThrow('socket closed (1011 engine failed) before the awaited event; events: started');
    expect(log.ended).toBe('socket closed (1011 engine failed)');
  });

  it('a timeout rejects with what came, described as the log was told', async () => {
    vi.useFakeTimers();
    const log = new EventLog<Ev>((e) => `${e.type}#${e.n}`);
    log.push({ type: 'x', n: 7 });
    const waiting = log.first(is('done'), { timeoutMs: 1_000 });
    const failed = expect(waiting).rejects.toThrow('no awaited event within 1000 ms; events: x#7');
    await vi.advanceTimersByTimeAsync(1_000);
    await failed;
  });
});
