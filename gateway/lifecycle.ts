// The shutdown states of one gateway process, shared by the routes through the context:
// draining (no new requests; in-flight ones and streams run on), then, at the grace
// deadline, streams are told to end cleanly (SSE: a final error event; WebSocket: close
// 1001) with `streamsEnded`, whose reason is the error to show. `track` holds work that must
// finish before the database closes (the last debit of a WebSocket session).
import type { FastifyReply } from 'fastify';
import { ServiceError } from '../server/services/errors.ts';

export function shuttingDownError(): ServiceError {
  return new ServiceError(
    'temporarily_unavailable',
    'This gateway is shutting down; retry the request (another replica, or this one once restarted, will serve it).',
  );
}

/** A socket the lifecycle can end at the very last step (WebSocket sessions that did not close). */
interface Terminable {
  terminate(): void;
}

export class Lifecycle {
  private draining = false;
  private readonly streams = new AbortController();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly sockets = new Set<Terminable>();
  private readonly engineCalls = new Set<AbortController>();

  /** Aborted at the grace deadline; its reason is the ServiceError streams end with. */
  readonly streamsEnded: AbortSignal = this.streams.signal;

  get isDraining(): boolean {
    return this.draining;
  }

  /** From now on new requests are refused with 503 temporarily_unavailable. */
  beginDrain(): void {
    this.draining = true;
  }

  endStreams(): void {
    if (this.streams.signal.aborted) return;
    this.streams.abort(shuttingDownError());
    for (const c of this.engineCalls) c.abort(this.streams.signal.reason);
    this.engineCalls.clear();
  }

  /**
   * An engine request to abort (with the shutdown error) when streams are ended, until the
   * returned release is called; aborted at once if they already were.
   */
  holdEngineCall(controller: AbortController): () => void {
    if (this.streams.signal.aborted) {
      controller.abort(this.streams.signal.reason);
      return () => {};
    }
    this.engineCalls.add(controller);
    return () => this.engineCalls.delete(controller);
  }

  /** Work the process must wait for before closing the database. */
  track(work: Promise<unknown>): void {
    const settled = work.catch(() => {}).finally(() => this.pending.delete(settled));
    this.pending.add(settled);
  }

  /** A WebSocket that the last step of a shutdown may cut (removed when it closes by itself). */
  trackSocket(socket: Terminable & { once(event: 'close', listener: () => void): unknown }): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  terminateSockets(): void {
    for (const s of this.sockets) s.terminate();
    this.sockets.clear();
  }

  /** Resolves when all tracked work is done, or after `timeoutMs`; false if some was still running. */
  async settled(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.pending]), new Promise((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
    return true;
  }
}

/**
 * Requests that reach a draining gateway (on a keep-alive connection opened before the
 * listener closed) are refused in the error envelope, with `Connection: close` so that the
 * client's next request opens a connection to a live replica. Called first by the gateway's
 * one onRequest hook (gateway/app.ts).
 */
export function refuseWhileDraining(lifecycle: Lifecycle, reply: FastifyReply): void {
  if (!lifecycle.isDraining) return;
  reply.header('connection', 'close');
  throw shuttingDownError();
}
