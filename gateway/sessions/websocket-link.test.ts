import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { manualClock } from '../../test/support/manual-clock.ts';
import { DEFAULT_LINK_LIMITS, OUTGOING_BUFFER_FULL, TOO_MANY_INVALID_MESSAGES, WebSocketLink } from './websocket-link.ts';

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    for (const c of s.clients) c.terminate();
    await new Promise((r) => s.close(r));
  }
});

/** Turns of the event loop, counted in its check phase, until stopped. */
function turnCounter() {
  let turn = 0;
  let counting = true;
  const count = () => {
    turn++;
    if (counting) setImmediate(count);
  };
  setImmediate(count);
  return { now: () => turn, stop: () => (counting = false) };
}

/** A server socket bound through a link, and a client that reads nothing until told to. `onMessage`: called as each message is handed on. */
async function pair(limits: Partial<WebSocketLink['limits']> = {}, onMessage?: () => void) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await once(server, 'listening');
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const [socket] = (await once(server, 'connection')) as [WebSocket];
  await once(client, 'open');
  const received: Buffer[] = [];
  let closed = false;
  const clock = manualClock(0);
  const link = new WebSocketLink(
    socket,
    clock,
    {
      message: (data) => {
        received.push(data);
        onMessage?.();
      },
      closed: () => (closed = true),
    },
    { ...DEFAULT_LINK_LIMITS, highWaterBytes: 64 * 1024, dropAboveBytes: 256 * 1024, closeAboveBytes: 1024 * 1024, ...limits },
  );
  return { client, socket, clock, link, received, isClosed: () => closed };
}

describe('WebSocketLink', () => {
  it('drops droppable events and then closes with 1008 when the peer stops reading, keeping the unread bytes bounded', async () => {
    const { client, socket, clock, link, isClosed } = await pair();
    // The client's side stops reading: the server's writes pile up in its buffer.
    (client as unknown as { _socket: { pause(): void } })._socket.pause();
    const event = 'x'.repeat(16 * 1024);
    let sent = 0;
    let dropped = 0;
    for (let i = 0; i < 10_000 && link.open; i++) {
      if (link.send(event, { droppable: i % 2 === 0 })) sent++;
      else if (link.open) dropped++;
      // Let the kernel take what it will, as a live session's sends are spread over time.
      if (i % 16 === 0) await new Promise((r) => setImmediate(r));
    }
    expect(dropped).toBeGreaterThan(0);
    expect(link.dropped).toBe(dropped);
    expect(link.open).toBe(false);
    expect(socket.bufferedAmount).toBeLessThanOrEqual(1024 * 1024);
    expect(sent).toBeLessThan(10_000);
    // The gateway no longer reads: the peer's close frame is never taken, so the socket ends after the grace.
    expect(socket.isPaused).toBe(true);
    const closing = once(client, 'close');
    (client as unknown as { _socket: { resume(): void } })._socket.resume();
    await expect.poll(() => client.readyState).toBe(WebSocket.CLOSING);
    expect(isClosed()).toBe(false);
    clock.advance(DEFAULT_LINK_LIMITS.closeGraceMs);
    const [code, reason] = (await closing) as [number, Buffer];
    expect(code).toBe(1008);
    expect(reason.toString()).toBe(OUTGOING_BUFFER_FULL);
    await expect.poll(isClosed).toBe(true);
  });

  it('closes with 1008 too_many_invalid_messages past the error allowance of a window, and reads nothing after', async () => {
    const { client, socket, clock, link, received } = await pair({ maxErrorEvents: 5, errorWindowMs: 1000 });
    const outbox = link.outbox((event: { type: string }) => [event]);
    const events: { type: string }[] = [];
    client.on('message', (data) => events.push(JSON.parse(String(data)) as { type: string }));
    // Five errors in one window, then a new window allows five more.
    for (let i = 0; i < 5; i++) outbox.send({ type: 'error' });
    clock.advance(1000);
    for (let i = 0; i < 5; i++) outbox.send({ type: 'error' });
    outbox.send({ type: 'ok' });
    expect(link.open).toBe(true);
    outbox.send({ type: 'error' });
    expect(link.open).toBe(false);
    expect(socket.isPaused).toBe(true);
    const closing = once(client, 'close');
    for (let i = 0; i < 100; i++) client.send('more');
    await expect.poll(() => client.readyState).toBe(WebSocket.CLOSING);
    clock.advance(DEFAULT_LINK_LIMITS.closeGraceMs);
    const [code, reason] = (await closing) as [number, Buffer];
    expect(code).toBe(1008);
    expect(reason.toString()).toBe(TOO_MANY_INVALID_MESSAGES);
    expect(events.map((e) => e.type)).toEqual([...Array(10).fill('error'), 'ok']);
    expect(received).toHaveLength(0);
  });

  it('delivers messages both ways and reports the close once', async () => {
    const { client, link, received, isClosed } = await pair();
    const got = once(client, 'message');
    link.send(JSON.stringify({ type: 'hello' }));
    expect(JSON.parse(String((await got)[0]))).toEqual({ type: 'hello' });
    client.send(Buffer.from([1, 2, 3]));
    client.close(1000, 'bye');
    await once(client, 'close');
    await expect.poll(isClosed).toBe(true);
    expect(received).toEqual([Buffer.from([1, 2, 3])]);
    expect(link.send('after')).toBe(false);
  });

  it('hands on at most readBytesPerTurn (and the message that passes it) per turn of the event loop, in order, pausing the socket between', async () => {
    const turns = turnCounter();
    const handedOn: { turn: number; paused: boolean }[] = [];
    const { client, socket, link, received, isClosed } = await pair({ readBytesPerTurn: 4 * 1024 }, () =>
      handedOn.push({ turn: turns.now(), paused: socket.isPaused }),
    );
    // 20 messages of 3 KiB sent at once: one read of the server's socket takes them all.
    const sent = Array.from({ length: 20 }, (_, i) => Buffer.alloc(3 * 1024, i));
    for (const m of sent) client.send(m);
    await expect.poll(() => received.length).toBe(20);
    turns.stop();
    expect(received).toEqual(sent);
    const bytesByTurn = new Map<number, number>();
    handedOn.forEach(({ turn }, i) => bytesByTurn.set(turn, (bytesByTurn.get(turn) ?? 0) + received[i]!.length));
    for (const bytes of bytesByTurn.values()) expect(bytes).toBeLessThanOrEqual(4 * 1024 + 3 * 1024);
    expect(bytesByTurn.size).toBeGreaterThanOrEqual(9);
    expect(link.turnsWaited).toBeGreaterThanOrEqual(9);
    // Messages ws had read while the link waited were handed on from its queue, the socket still paused.
    expect(handedOn.some((m) => m.paused)).toBe(true);
    // Reading goes on after the last wait: the peer's close is taken.
    expect(socket.isPaused).toBe(false);
    client.close(1000, 'bye');
    await expect.poll(isClosed).toBe(true);
  });

  it('hands on each large message in a turn of the event loop of its own', async () => {
    const turns = turnCounter();
    const handedOn: number[] = [];
    const { client, received } = await pair({ readBytesPerTurn: DEFAULT_LINK_LIMITS.readBytesPerTurn }, () => handedOn.push(turns.now()));
    for (let i = 0; i < 6; i++) client.send(Buffer.alloc(200 * 1024, i));
    await expect.poll(() => received.length).toBe(6);
    turns.stop();
    expect(received.map((m) => m[0])).toEqual([0, 1, 2, 3, 4, 5]);
    expect(new Set(handedOn).size).toBe(6);
  });

  it('resolves drained() once a backlog above the high-water mark is taken', async () => {
    const { client, link } = await pair({ closeAboveBytes: 64 * 1024 * 1024 });
    (client as unknown as { _socket: { pause(): void } })._socket.pause();
    const chunk = Buffer.alloc(256 * 1024);
    for (let i = 0; i < 16; i++) link.send(chunk);
    expect(link.unreadBytes).toBeGreaterThan(link.limits.highWaterBytes);
    let drained = false;
    const waiting = link.drained().then(() => (drained = true));
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    (client as unknown as { _socket: { resume(): void } })._socket.resume();
    await waiting;
    expect(drained).toBe(true);
  });
});
