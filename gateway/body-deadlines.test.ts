// BodyDeadlines (client-bounds.ts) on a real Fastify server and a raw TCP client that sends a
// POST's headers, waits until the gateway's hook has started timing its body, then sends the body.
// A body read whole is forgotten at once, not at the next check (up to a second later): meanwhile
// it held the whole request, which then outlived V8's young generation. The check's interval is
// faked so that it never runs here: only the body's end can let go of it.
import { once } from 'node:events';
import { connect } from 'node:net';
import Fastify from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BodyDeadlines } from './client-bounds.ts';
import { GatewayMetrics } from './metrics/gateway-metrics.ts';

const BOUNDS = {
  headersTimeoutMs: 60_000,
  bodyTimeoutMs: 60_000,
  bodyMinBytesPerSecond: 1,
  bodyIdleMs: 60_000,
  maxConnections: 100,
  maxConnectionsPerAddress: 100,
};

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serverTimingBodies() {
  const app = Fastify();
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  const deadlines = new BodyDeadlines(BOUNDS, app.log, new GatewayMetrics({ processMetrics: false }));
  vi.useRealTimers();
  cleanups.push(() => app.close());
  const headersIn: (() => void)[] = [];
  app.addHook('onRequest', async (request) => {
    deadlines.watch(request);
    headersIn.shift()?.();
  });
  app.post('/echo', async (request) => ({ got: request.body }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  return { deadlines, port, nextHeaders: () => new Promise<void>((resolve) => headersIn.push(resolve)) };
}

describe('BodyDeadlines', () => {
  it('forgets a body as soon as it has been read whole, before any check runs', async () => {
    const { deadlines, port, nextHeaders } = await serverTimingBodies();
    const body = JSON.stringify({ hello: 'world' });
    const socket = connect(port, '127.0.0.1');
    cleanups.push(() => void socket.destroy());
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const headers = nextHeaders();
    socket.write(`POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
    await headers;
    expect(deadlines.watching).toBe(1);

    const answered = new Promise<void>((resolve) => socket.on('data', () => received.includes('"got"') && resolve()));
    socket.write(body);
    await answered;
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(deadlines.watching).toBe(0);
  });

  it('still times a body that has not ended', async () => {
    const { deadlines, port, nextHeaders } = await serverTimingBodies();
    const socket = connect(port, '127.0.0.1');
    cleanups.push(() => void socket.destroy());
    await once(socket, 'connect');
    const headers = nextHeaders();
    socket.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"half":');
    await headers;
    expect(deadlines.watching).toBe(1);
  });
});
