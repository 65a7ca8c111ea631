// Requests Node's HTTP parser refuses, sent over raw sockets to the real gateway: each is
// answered in the error envelope (docs/api-conventions.md, "Errors") with its status and code, as a complete
// HTTP response with a request id, and the connection is closed. A response already under way
// on the connection is never followed by a second one.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayHarness } from '../test/support/gateway-harness.ts';

let h: GatewayHarness;
let port: number;

beforeAll(async () => {
  h = await startGateway();
  port = Number(new URL(h.url).port);
});
afterAll(async () => {
  await h?.close();
});

/** Sends `data` (then half-closes, unless told not to) and resolves with all bytes received once the server closes. */
function exchange(data: string, options: { halfClose?: boolean } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {}); // a reset after the answer: what was received is what counts
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.write(data);
    if (options.halfClose ?? true) socket.end();
  });
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits a byte stream into HTTP/1.1 responses by Content-Length (every answer here has one). */
function responses(raw: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    expect(end, `an incomplete response: ${JSON.stringify(rest.slice(0, 200))}`).toBeGreaterThan(0);
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine!);
    expect(status, statusLine).not.toBeNull();
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length']);
    expect(Number.isInteger(length)).toBe(true);
    const body = rest.slice(end + 4, end + 4 + length);
    expect(Buffer.byteLength(body, 'latin1')).toBe(length);
    out.push({ status: Number(status![1]), headers, body });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

function expectEnvelope(res: RawResponse, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.headers['x-request-id']).toMatch(/^req_/);
  expect(res.headers.connection).toBe('close');
  const body = JSON.parse(res.body) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error).toEqual({ message: expect.any(String), type: 'invalid_request_error', code, param: null });
}

const CASES: [string, number, string, string][] = [
  [
    'bad chunked encoding',
    400,
    'invalid_request',
    'POST /agent/identity HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
  ],
  [
    'a body shorter than its Content-Length',
    400,
    'invalid_request',
    'POST /agent/identity HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"type":"anonymous"}',
  ],
  [
    'Content-Length with Transfer-Encoding',
    400,
    'invalid_request',
    'POST /agent/identity HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  ],
  ['a garbage request line', 400, 'invalid_request', 'GARBAGE\r\n\r\n'],
  ['a bad HTTP version', 400, 'invalid_request', 'GET /health HTTP/9.9\r\nHost: x\r\n\r\n'],
  ['a header line without a colon', 400, 'invalid_request', 'GET /health HTTP/1.1\r\nHost: x\r\nnot a header\r\n\r\n'],
  ['one header over 16 KiB', 431, 'request_header_fields_too_large', `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`],
  [
    'many headers over 16 KiB in all',
    431,
    'request_header_fields_too_large',
    `GET /health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 200 }, (_, i) => `X-H${i}: ${'b'.repeat(100)}\r\n`).join('')}\r\n`,
  ],
];

describe('requests the HTTP parser refuses', () => {
  it.each(CASES)('%s: %i %s in the envelope, then the connection is closed', async (_name, status, code, request) => {
    const answers = responses(await exchange(request));
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0]!, status, code);
  });

  it('the message names the fault, never the request bytes', async () => {
    const [answer] = responses(
      await exchange(
        'POST /agent/identity HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer sk_svc_secret\r\n\r\n0\r\n\r\n',
      ),
    );
    expect(answer!.body).not.toContain('sk_svc_secret');
    expect((JSON.parse(answer!.body) as { error: { message: string } }).error.message).toContain('Transfer-Encoding');
  });

  it('on a keep-alive connection: the good request gets its answer, the garbage after it the envelope', async () => {
    const answers = responses(await exchange('GET /health HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n'));
    expect(answers.map((a) => a.status)).toEqual([200, 400]);
    expect(JSON.parse(answers[0]!.body)).toEqual({ status: 'ok' });
    expectEnvelope(answers[1]!, 400, 'invalid_request');
  });

  it('the gateway keeps serving afterwards', async () => {
    await exchange('GARBAGE\r\n\r\n');
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
  });
});
