// The chat hot path's HTTP call: what the routes rely on from it (order, completeness,
// backpressure, cancellation, and undici's error codes for the failure modes).
import { createServer, type Server, type ServerResponse } from 'node:http';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../test/support/svc-process.ts';
import { dispatchCall, dispatchTarget } from './dispatch-call.ts';
import { BYTES_PER_TURN } from './loop-turns.ts';
import { isConnectFailure, isTimeout } from './engine-http.ts';

const dispatcher = new Agent({ connections: 8 });
let server: Server;
let origin: string;
/** Per path: what the server does with the request. */
const routes = new Map<string, (res: ServerResponse, body: string) => void>();
const closedEarly: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => routes.get(req.url ?? '')?.(res, body));
    res.on('close', () => {
      if (!res.writableFinished) closedEarly.push(req.url ?? '');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await dispatcher.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const call = (path: string, signal = new AbortController().signal, timeoutMs = 10_000) =>
  dispatchCall(dispatcher, { origin, path, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}', signal, timeoutMs });

describe('dispatchCall', () => {
  it('gives the status, headers and the whole body, sent as it was', async () => {
    routes.set('/echo', (res, body) => res.writeHead(201, { 'content-type': 'application/json' }).end(`{"got":${body}}`));
    const res = await call('/echo');
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toBe('application/json');
    expect(await res.text()).toBe('{"got":{"x":1}}');
  });

  it('streams chunks in order, and pauses the engine socket while the consumer is behind', async () => {
    // 64 MB in all: far more than the socket buffers on either side hold (a few MB, depending on
    // the machine), so a consumer that stalls must hold the engine back.
    const n = 1600;
    const chunkBytes = 40_000;
    let written = 0;
    routes.set('/many', (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const write = () => {
        while (i < n) {
          const line = `data: ${i++} ${'x'.repeat(chunkBytes)}\n\n`;
          written += line.length;
          if (!res.write(line)) {
            res.once('drain', write);
            return;
          }
        }
        res.end();
      };
      write();
    });
    const res = await call('/many');
    const numbers: number[] = [];
    let carry = '';
    let first = true;
    for await (const chunk of res.body) {
      // Numbers read line by line (a chunk may end inside a line), nothing kept of the padding.
      const lines = (carry + chunk.toString()).split('\n\n');
      carry = lines.pop()!;
      for (const line of lines) numbers.push(Number(/^data: (\d+) /.exec(line)![1]));
      if (first) {
        first = false;
        // A consumer that stalls for a while: without the pause the engine's 64 MB would all be
        // read into this process meanwhile (loopback moves that in well under this time).
        await new Promise((r) => setTimeout(r, 300));
        expect(written).toBeLessThan(24_000_000);
      }
    }
    expect(carry).toBe('');
    expect(numbers).toEqual(Array.from({ length: n }, (_v, i) => i));
  });

  it('an answer that comes faster than it is read is handed on at most BYTES_PER_TURN (and one chunk) per turn of the event loop', async () => {
    // 4 MiB at once: more than one turn of the event loop reads from a socket (32 reads of 64 KiB).
    const body = Buffer.alloc(4 * 1024 * 1024, 'x');
    routes.set('/fast', (res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(body));
    // Turns of the event loop, counted in its check phase.
    let turn = 0;
    let counting = true;
    const count = () => {
      turn++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const res = await call('/fast');
    const bytesByTurn = new Map<number, number>();
    let largestChunk = 0;
    let received = 0;
    for await (const chunk of res.body) {
      bytesByTurn.set(turn, (bytesByTurn.get(turn) ?? 0) + chunk.length);
      largestChunk = Math.max(largestChunk, chunk.length);
      received += chunk.length;
    }
    counting = false;
    expect(received).toBe(body.length);
    expect(Math.max(...bytesByTurn.values())).toBeLessThanOrEqual(BYTES_PER_TURN + largestChunk);
    expect(bytesByTurn.size).toBeGreaterThanOrEqual(body.length / (BYTES_PER_TURN + largestChunk));
  });

  it('HTTP chunks that arrived together are handed on joined, in order, nothing lost', async () => {
    // 100 chunks of 1,000 bytes written in one turn of the server (this process): the client's
    // socket reads them together, and each is an HTTP chunk of its own (chunked encoding).
    const parts = Array.from({ length: 100 }, (_v, i) => Buffer.alloc(1_000, 48 + (i % 10)));
    routes.set('/small-chunks', (res) => {
      res.writeHead(200, { 'content-type': 'audio/pcm' });
      for (const part of parts) res.write(part);
      res.end();
    });
    const res = await call('/small-chunks');
    const received: Buffer[] = [];
    for await (const chunk of res.body) received.push(chunk);
    expect(Buffer.concat(received).equals(Buffer.concat(parts))).toBe(true);
    // Joined, not a hundred pieces. The engine's body pauses once 16 chunks wait, so a piece holds
    // at most 16 of them (7 at the least), and where the socket's reads fell splits some more
    // (10 here): a bound with room for how reads fall on a busy machine.
    expect(received.length).toBeLessThanOrEqual(25);
  });

  it('stopping the iteration early aborts the request on the engine side', async () => {
    routes.set('/endless', (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: tick\n\n'), 5);
      res.on('close', () => clearInterval(timer));
    });
    const res = await call('/endless');
    for await (const _chunk of res.body) break;
    await expect.poll(() => closedEarly.includes('/endless'), { timeout: 5_000 }).toBe(true);
  });

  it('an abort before the answer rejects with the reason and closes the engine request', async () => {
    routes.set('/slow', () => {});
    const controller = new AbortController();
    const pending = call('/slow', controller.signal);
    setTimeout(() => controller.abort(new Error('client left')), 50);
    await expect(pending).rejects.toThrow('client left');
    await expect.poll(() => closedEarly.includes('/slow'), { timeout: 5_000 }).toBe(true);
  });

  it('an abort mid-body ends the iteration with an error', async () => {
    routes.set('/trickle', (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: tick\n\n'), 5);
      res.on('close', () => clearInterval(timer));
    });
    const controller = new AbortController();
    const res = await call('/trickle', controller.signal);
    const read = (async () => {
      for await (const _chunk of res.body) controller.abort(new Error('gone'));
    })();
    await expect(read).rejects.toThrow('gone');
  });

  it('a silent engine times out with undici’s code; a refused connection is a connect failure', async () => {
    routes.set('/silent', () => {});
    const timedOut = await call('/silent', new AbortController().signal, 200).catch((e: unknown) => e);
    expect(isTimeout(timedOut)).toBe(true);

    const closedPort = await freePort();
    const refused = await dispatchCall(dispatcher, {
      ...dispatchTarget(`http://127.0.0.1:${closedPort}/v1/chat/completions`),
      method: 'POST',
      headers: {},
      body: '{}',
      signal: new AbortController().signal,
      timeoutMs: 1_000,
    }).catch((e: unknown) => e);
    expect(isConnectFailure(refused)).toBe(true);
  });

  it('splits an engine URL into origin and path', () => {
    expect(dispatchTarget('http://10.0.0.5:8000/v1/chat/completions')).toEqual({ origin: 'http://10.0.0.5:8000', path: '/v1/chat/completions' });
    expect(dispatchTarget('https://engine.example/openai/v1/chat/completions?api-version=2')).toEqual({
      origin: 'https://engine.example',
      path: '/openai/v1/chat/completions?api-version=2',
    });
  });
});
