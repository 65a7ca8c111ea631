// What one client can hold of a real gateway (gateway/client-bounds.ts), over raw TCP
// connections so that nothing but the test decides what is sent and when: slow headers and slow
// bodies are answered 408 request_timeout in the envelope and their connections closed, at
// bounds of a few hundred ms; answers that take long once their request is whole (an SSE stream,
// a WebSocket session) are not cut; connections past the cap per address, or the cap per
// process, are closed at once. Each test waits for the close itself, never for a clock.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadConfig } from '../server/config/env.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../test/support/gateway-harness.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import { settleRecognizers, startSttGateway, wsUrl } from '../test/support/stt-routes.ts';
import { checkProtocol } from './upstreams/protocols/index.ts';

const BOUNDS = {
  SVC_HEADERS_TIMEOUT_SECONDS: '0.3',
  SVC_BODY_TIMEOUT_SECONDS: '0.6',
  SVC_BODY_IDLE_SECONDS: '0.3',
  SVC_BODY_MIN_BYTES_PER_SECOND: '1000',
};

let h: GatewayHarness;
let llm: ScriptedUpstream;

beforeAll(async () => {
  h = await startSttGateway({ env: BOUNDS });
  // A stream that lasts well past every bound above: its first chunk after 0.4 s, then one every 0.3 s.
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['one ', 'two ', 'three ', 'four'], firstDelayMs: 400, delayMs: 300 });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'slow-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await llm?.close();
  await settleRecognizers();
  await h?.close();
});

interface Connection {
  socket: Socket;
  /** Everything received, once the connection has closed. */
  closed: Promise<string>;
}

/** A raw TCP connection to the gateway; `send` runs once it is connected. */
function open(url: string, send: (socket: Socket) => void = () => {}): Promise<Connection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {}); // a refused connection may be reset: what matters is that it closed
    const closed = new Promise<string>((done) => socket.once('close', () => done(received)));
    socket.once('connect', () => {
      send(socket);
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

/** Sends one byte every `everyMs` until the connection closes: a body slower than any bound allows. */
function trickle(socket: Socket, everyMs: number): void {
  const timer = setInterval(() => socket.write('x'), everyMs);
  socket.once('close', () => clearInterval(timer));
}

/** The answer written on a raw connection: status and envelope. */
function answerOf(text: string): { status: number; code: string; message: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1]);
  const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string; message: string } };
  return { status, code: body.error.code, message: body.error.message };
}

const POST_TOKEN = 'POST /oauth2/token HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-www-form-urlencoded\r\n';

async function dropped(reason: string): Promise<number> {
  const { body } = await h.runtime.ctx.metrics.render();
  return Number(new RegExp(`^svc_connections_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(body)?.[1] ?? 0);
}

describe('slow requests are answered 408 and their connections closed', () => {
  it('a connection that sends nothing', async () => {
    const c = await open(h.url);
    expect(answerOf(await c.closed)).toEqual({ status: 408, code: 'request_timeout', message: 'The request line and headers did not arrive in time.' });
    expect(await dropped('headers_timeout')).toBeGreaterThanOrEqual(1);
  });

  it('headers that stop half-way', async () => {
    const c = await open(h.url, (s) => s.write('POST /oauth2/token HTTP/1.1\r\nHost: gateway\r\n'));
    expect(answerOf(await c.closed)).toMatchObject({ status: 408, code: 'request_timeout' });
  });

  it('headers that trickle in, one byte at a time', async () => {
    const c = await open(h.url, (s) => {
      s.write('POST /oauth2/token HTTP/1.1\r\nX-Slow: ');
      trickle(s, 50);
    });
    expect(answerOf(await c.closed)).toMatchObject({ status: 408, code: 'request_timeout' });
  });

  it('anonymous POST /oauth2/token with 1 byte of a 500-byte body, then silence', async () => {
    const c = await open(h.url, (s) => s.write(`${POST_TOKEN}Content-Length: 500\r\n\r\ng`));
    expect(answerOf(await c.closed)).toEqual({ status: 408, code: 'request_timeout', message: 'The request body stopped arriving: nothing came for 0.3 s.' });
    expect(await dropped('body_idle')).toBeGreaterThanOrEqual(1);
  });

  it('anonymous POST /oauth2/token whose body trickles in below the minimum rate', async () => {
    const c = await open(h.url, (s) => {
      s.write(`${POST_TOKEN}Content-Length: 500\r\n\r\n`);
      trickle(s, 50);
    });
    expect(answerOf(await c.closed)).toEqual({
      status: 408,
      code: 'request_timeout',
      message: 'The request body arrived too slowly: it must arrive within 0.6 s, or at 1000 bytes a second on average.',
    });
    expect(await dropped('body_timeout')).toBeGreaterThanOrEqual(1);
  });

  it('a request refused before its body was read (no key) still has to send it in time', async () => {
    const c = await open(h.url, (s) =>
      s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{'),
    );
    expect(answerOf(await c.closed)).toMatchObject({ status: 408, code: 'request_timeout' });
  });

  it('a keyed request whose body stops', async () => {
    const c = await open(h.url, (s) =>
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${h.key}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{`,
      ),
    );
    expect(answerOf(await c.closed)).toMatchObject({ status: 408, code: 'request_timeout' });
  });
});

describe('what is not slow is not cut', () => {
  it('a body arriving at the minimum rate or faster is read whole, however long past the body timeout it takes', async () => {
    // 3,000 bytes at 150 bytes every 50 ms (3,000 bytes a second): about 1 s, past the 0.6 s timeout.
    const body = `grant_type=client_credentials&client_id=${'c'.repeat(2958)}`;
    const c = await open(h.url, (s) => {
      s.write(`${POST_TOKEN}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
      let sent = 0;
      const timer = setInterval(() => {
        s.write(body.slice(sent, sent + 150));
        sent += 150;
        if (sent >= body.length) clearInterval(timer);
      }, 50);
      s.once('close', () => clearInterval(timer));
    });
    const answer = answerOf(await c.closed);
    expect(answer.status).not.toBe(408);
    expect(answer.code).not.toBe('request_timeout');
  });

  it('an SSE answer that lasts longer than every bound is relayed whole', async () => {
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: 'slow-llm', stream: true, messages: [{ role: 'user', content: 'count' }] }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const content = text
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => (JSON.parse(line.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '')
      .join('');
    expect(content).toBe('one two three four');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('a WebSocket session stays open, silent, while slow requests around it are dropped', async () => {
    const ws = new WebSocket(wsUrl(h, { model: 'local-stt' }), { headers: { authorization: `Bearer ${h.key}` } });
    const started = new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.once('message', (data) => resolve(JSON.parse(data.toString()) as Record<string, unknown>));
      ws.once('error', reject);
    });
    expect((await started).type).toBe('session.started');
    // Time passes by the gateway's own clock: a silent connection is dropped (headers), then a
    // trickling body (body timeout); the session, open all along, still answers.
    await (
      await open(h.url)
    ).closed;
    await (
      await open(h.url, (s) => {
        s.write(`${POST_TOKEN}Content-Length: 500\r\n\r\n`);
        trickle(s, 50);
      })
    ).closed;
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send(JSON.stringify({ type: 'close' }));
    expect(await closed).toBe(1000);
  });
});

describe('connection caps', () => {
  let capped: GatewayHarness | undefined;
  let proxied: GatewayHarness | undefined;
  afterAll(async () => {
    await capped?.close();
    await proxied?.close();
  });

  /** An answer to GET /health on an open connection: proof it is served. */
  function health(c: Connection, close = false): Promise<string> {
    return new Promise((resolve) => {
      c.socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').split('\r\n')[0]!));
      c.socket.write(`GET /health HTTP/1.1\r\nHost: gateway\r\n${close ? 'Connection: close\r\n' : ''}\r\n`);
    });
  }

  it('past the cap per client address, a new connection is closed at once, before a byte; one closed makes room', async () => {
    capped = await startGateway({ env: { SVC_MAX_CONNECTIONS_PER_ADDRESS: '3' } });
    const held = [await open(capped.url), await open(capped.url), await open(capped.url)];
    const refused = await open(capped.url);
    expect(await refused.closed).toBe('');
    expect(await health(held[2]!)).toBe('HTTP/1.1 200 OK');
    const { body } = await capped.runtime.ctx.metrics.render();
    expect(body).toMatch(/^svc_connections_dropped_total\{reason="connections_per_address"\} 1$/m);
    // The gateway closes this one after its answer: the address holds two.
    expect(await health(held[0]!, true)).toBe('HTTP/1.1 200 OK');
    await held[0]!.closed;
    const next = await open(capped.url);
    expect(await health(next)).toBe('HTTP/1.1 200 OK');
    for (const c of [...held, next]) c.socket.destroy();
  });

  it('behind trusted proxies the cap per address is off (the peer is the proxy); the cap per process still holds', async () => {
    proxied = await startGateway({ env: { SVC_TRUSTED_PROXIES: '1', SVC_MAX_CONNECTIONS_PER_ADDRESS: '1', SVC_MAX_CONNECTIONS: '2' } });
    const held = [await open(proxied.url), await open(proxied.url)];
    for (const c of held) expect(await health(c)).toBe('HTTP/1.1 200 OK');
    const refused = await open(proxied.url);
    expect(await refused.closed).toBe('');
    const { body } = await proxied.runtime.ctx.metrics.render();
    expect(body).toMatch(/^svc_connections_dropped_total\{reason="connections"\} 1$/m);
    for (const c of held) c.socket.destroy();
  });
});

describe('the defaults', () => {
  it('drop a slow partial request within 60 s: headers within 10 s, then a body within 30 s', () => {
    const { http } = loadConfig({});
    expect(http).toMatchObject({ headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000, bodyIdleMs: 10_000, maxConnections: 10_000, maxConnectionsPerAddress: 512 });
    // Each is looked at every second at most, after its bound.
    expect(http.headersTimeoutMs + http.bodyTimeoutMs + 2 * 1_000).toBeLessThanOrEqual(60_000);
  });
});
