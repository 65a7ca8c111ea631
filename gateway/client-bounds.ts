// What one client can hold of the HTTP server: connections (a cap per process and one per client
// address) and time while its request arrives (the request line and headers, then the body).
// Once a request has arrived whole its answer takes as long as it takes: SSE answers and
// WebSocket sessions are bounded by their own life cycles, not here. docs/configuration.md,
// "Connections and slow clients".
import type { IncomingHttpHeaders, IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { clientAddress } from '../server/config/client-address.ts';
import type { HttpBoundsConfig } from '../server/config/env.ts';
import { ServiceError } from '../server/services/errors.ts';
import { answerOnSocket } from './errors.ts';
import type { GatewayMetrics } from './metrics/gateway-metrics.ts';

/** How often slow requests are looked for: a quarter of the shortest bound, at most every second. */
function checkIntervalMs(bounds: HttpBoundsConfig): number {
  return Math.max(10, Math.min(1_000, Math.min(bounds.headersTimeoutMs, bounds.bodyTimeoutMs, bounds.bodyIdleMs) / 4));
}

/**
 * The server's bounds, set before it listens. Node times the request line and headers (and
 * answers a late one through the clientErrorHandler: 408); its requestTimeout stays off, since it
 * would also cut uploads that arrive slowly but steadily (BodyDeadlines times bodies instead).
 * Past either connection cap a new connection is closed at once, before a byte is read (Node's
 * `maxConnections` for the process, a `connection` listener for the address). Behind trusted
 * proxies the peer is a proxy, so the cap per address is left to them.
 */
export function boundConnections(server: Server, bounds: HttpBoundsConfig, trustedProxies: number, metrics: GatewayMetrics): void {
  server.headersTimeout = bounds.headersTimeoutMs;
  server.requestTimeout = 0;
  // The createServer option of that name, read when the server starts listening (Node's default: 30 s).
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = checkIntervalMs(bounds);
  server.maxConnections = bounds.maxConnections;
  server.on('drop', () => metrics.connectionDropped('connections'));
  if (trustedProxies > 0) return;
  const open = new Map<string, number>();
  // Before the HTTP (or TLS) layer's own listener, which then finds the socket destroyed and reads nothing from it.
  server.prependListener('connection', (socket: Socket) => {
    const address = clientAddress({ socketAddress: socket.remoteAddress, forwardedFor: undefined, trustedProxies: 0 }) ?? '';
    const count = (open.get(address) ?? 0) + 1;
    if (count > bounds.maxConnectionsPerAddress) {
      metrics.connectionDropped('connections_per_address');
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = open.get(address)! - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

interface ArrivingBody {
  readonly request: FastifyRequest;
  readonly socket: Socket;
  readonly startedAt: number;
  readonly startBytes: number;
  lastBytes: number;
  lastByteAt: number;
}

/**
 * Bodies still arriving, looked at on one interval (no timer per request): a body
 * silent for `bodyIdleMs`, or past `bodyTimeoutMs` averaging less than `bodyMinBytesPerSecond`
 * since its headers, is answered 408 `request_timeout` on its socket, which is then closed.
 * Progress is the socket's byte count, which moves only as the gateway reads: a request whose
 * body it is not reading yet (admission still deciding) looks silent meanwhile.
 */
export class BodyDeadlines {
  private readonly arriving = new Map<IncomingMessage, ArrivingBody>();
  /**
   * Forgets a body once read whole (`this` is its request). Without it each watched request (a
   * POST whose body comes a moment after its headers, as it often does) stayed here until the
   * next check, up to a second: its whole object graph outlived V8's young generation and was
   * copied into the old one. One function for every request: no closure per request.
   */
  private readonly forget: (this: IncomingMessage) => void;
  private readonly intervalMs: number;
  private readonly timer: NodeJS.Timeout;
  private lastCheckAt = performance.now();

  constructor(
    private readonly bounds: HttpBoundsConfig,
    private readonly log: FastifyBaseLogger,
    private readonly metrics: GatewayMetrics,
  ) {
    const arriving = this.arriving;
    this.forget = function (this: IncomingMessage) {
      arriving.delete(this);
    };
    this.intervalMs = checkIntervalMs(bounds);
    this.timer = setInterval(this.check, this.intervalMs);
    this.timer.unref();
  }

  /** Starts timing the request's body, if it has one still to come. */
  watch(request: FastifyRequest): void {
    const raw = request.raw;
    if (raw.complete || !hasBody(raw.headers) || raw.socket.destroyed || this.arriving.has(raw)) return;
    const now = performance.now();
    const bytes = raw.socket.bytesRead;
    this.arriving.set(raw, { request, socket: raw.socket, startedAt: now, startBytes: bytes, lastBytes: bytes, lastByteAt: now });
    // 'end': the body was read to its end ('on': it is emitted once, and once() wraps the listener anew per call).
    raw.on('end', this.forget);
  }

  /** How many bodies are being timed now. */
  get watching(): number {
    return this.arriving.size;
  }

  stop(): void {
    clearInterval(this.timer);
    this.arriving.clear();
  }

  private readonly check = (): void => {
    const now = performance.now();
    // Run late, the event loop was held up: what clients sent meanwhile is not read yet (timers
    // run before sockets are read), so no body is judged silent or slow until the next check.
    const late = now - this.lastCheckAt > 2 * this.intervalMs;
    this.lastCheckAt = now;
    for (const body of this.arriving.values()) {
      if (body.request.raw.complete || body.request.raw.destroyed || body.socket.destroyed) {
        this.arriving.delete(body.request.raw);
        continue;
      }
      const bytes = body.socket.bytesRead;
      if (bytes !== body.lastBytes) {
        body.lastBytes = bytes;
        body.lastByteAt = now;
      }
      if (late) continue;
      const elapsed = now - body.startedAt;
      if (now - body.lastByteAt >= this.bounds.bodyIdleMs) this.drop(body, 'body_idle');
      else if (elapsed >= this.bounds.bodyTimeoutMs && bytes - body.startBytes < (this.bounds.bodyMinBytesPerSecond * elapsed) / 1000)
        this.drop(body, 'body_timeout');
    }
  };

  private drop(body: ArrivingBody, reason: 'body_idle' | 'body_timeout'): void {
    this.arriving.delete(body.request.raw);
    this.metrics.connectionDropped(reason);
    const { bodyIdleMs, bodyTimeoutMs, bodyMinBytesPerSecond } = this.bounds;
    const message =
      reason === 'body_idle'
        ? `The request body stopped arriving: nothing came for ${bodyIdleMs / 1000} s.`
        : `The request body arrived too slowly: it must arrive within ${bodyTimeoutMs / 1000} s, or at ${bodyMinBytesPerSecond} bytes a second on average.`;
    // Its answer never goes through Fastify, so no access line is written for it: this line instead.
    body.request.log.info({ req: body.request, res: { statusCode: 408 }, reason }, 'request dropped: its body did not arrive in time');
    answerOnSocket(new ServiceError('request_timeout', message), body.socket, this.log, body.request.id);
  }
}

/** Whether a request has a body (RFC 9112: a Content-Length other than 0, or a Transfer-Encoding). */
function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}
