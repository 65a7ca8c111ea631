// One HTTP request to an engine through undici's low-level `dispatch`, for the chat hot path.
// undici's `request()` wraps every response in a Readable stream, an async resource and a
// body mixin; the chat route only needs the status, the content type and the body bytes, in
// order, with backpressure. Measured once on this machine (a throw-away microbenchmark, 4,000
// requests x 6 rounds to bench/upstream-server.ts): ~33 us of CPU per request against ~48 us
// for `request()`.
import type { Dispatcher } from 'undici';
import { answerTooLarge } from './contract.ts';
import { BYTES_PER_TURN } from './loop-turns.ts';

export interface DispatchResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  /** The content-type header ('' when absent; several joined with ', '). */
  readonly contentType: string;
  /** The body, chunk by chunk; stopping early aborts the request. Iterate it once. */
  body: AsyncIterable<Buffer>;
  /**
   * The whole body as UTF-8 (instead of iterating it). Past `maxBytes` the request is aborted
   * and this rejects with `answerTooLarge` (contract.ts).
   */
  text(maxBytes?: number): Promise<string>;
}

export interface DispatchOptions {
  origin: string;
  path: string;
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  body: Buffer | string | null;
  signal: AbortSignal;
  /** undici's headers and body timeouts: the longest the engine may stay silent. */
  timeoutMs: number;
}

/** Chunks held before the socket is paused (the consumer is slower than the engine). */
const HIGH_WATER_CHUNKS = 16;

/** Resolves at the response's headers; rejects when no response comes (connection failure, timeout, abort). */
export function dispatchCall(dispatcher: Dispatcher, options: DispatchOptions): Promise<DispatchResponse> {
  return new Promise((resolve, reject) => {
    const { signal } = options;
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const call = new DispatchCall(signal, resolve, reject);
    signal.addEventListener('abort', call.onAbort, { once: true });
    try {
      dispatcher.dispatch(
        {
          origin: options.origin,
          path: options.path,
          method: options.method,
          headers: options.headers,
          body: options.body,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
        },
        call,
      );
    } catch (e) {
      call.finish();
      reject(e);
    }
  });
}

/**
 * One engine request: undici's handler and, once the headers are in, the response, in one
 * object (its methods are shared; closures would be made per request).
 */
class DispatchCall implements Dispatcher.DispatchHandler, DispatchResponse {
  statusCode = 0;
  headers: DispatchResponse['headers'] = {};
  private controller: Dispatcher.DispatchController | null = null;
  private started = false;
  private readonly chunks: Buffer[] = [];
  private ended = false;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private iterating = false;
  private iterable: AsyncGenerator<Buffer> | undefined;

  constructor(
    private readonly signal: AbortSignal,
    private readonly resolve: (response: DispatchResponse) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  /**
   * The abort listener. A function, not this object with a handleEvent method: Node's
   * EventTarget wraps a listener object in a new async closure, which V8 came to allocate in
   * the old generation after a burst, and that kept everything the request touched alive
   * through young-generation GCs (docs/performance.md, "Memory").
   */
  readonly onAbort = (): void => {
    this.controller?.abort(this.signal.reason as Error);
  };

  finish(): void {
    this.signal.removeEventListener('abort', this.onAbort);
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.signal.aborted) controller.abort(this.signal.reason as Error);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[]>): void {
    this.started = true;
    this.statusCode = statusCode;
    this.headers = headers;
    this.resolve(this);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk);
    if (this.chunks.length >= HIGH_WATER_CHUNKS && !controller.paused) controller.pause();
    this.notify();
  }

  onResponseEnd(): void {
    this.ended = true;
    this.finish();
    this.notify();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finish();
    if (!this.started) {
      this.reject(error);
      return;
    }
    this.failure = error;
    this.notify();
  }

  get contentType(): string {
    const value = this.headers['content-type'];
    return Array.isArray(value) ? value.join(', ') : (value ?? '');
  }

  /** Made when first asked for: a non-streaming answer is usually read whole by text(). */
  get body(): AsyncIterable<Buffer> {
    return (this.iterable ??= this.iterate());
  }

  async text(maxBytes = Infinity): Promise<string> {
    // Usually the whole body came with the headers: no iteration needed.
    if (this.ended && !this.failure && !this.iterating) {
      const { chunks } = this;
      if (chunks.length === 1 && chunks[0]!.length <= maxBytes) return chunks.pop()!.toString('utf8');
      const whole = Buffer.concat(chunks.splice(0));
      if (whole.length > maxBytes) throw answerTooLarge(maxBytes);
      return whole.toString('utf8');
    }
    const parts: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of this.body) {
      bytes += chunk.length;
      // Leaving the loop ends the iteration, which aborts the request: the rest is never read.
      if (bytes > maxBytes) throw answerTooLarge(maxBytes);
      parts.push(chunk);
    }
    return Buffer.concat(parts).toString('utf8');
  }

  /**
   * The chunks waiting, joined, up to `budget` bytes (always at least one chunk). A chunked
   * answer comes as one onResponseData per HTTP chunk, however many arrived in one socket read;
   * handed on one by one, each would go through every stage after it (a TTS engine's 4 KB chunks
   * became as many WebSocket frames to the client): joined, they go through once, as a
   * Readable's read() would hand them. Nothing waits for more to arrive.
   */
  private takeQueued(budget: number): Buffer {
    const { chunks } = this;
    let count = 1;
    let bytes = chunks[0]!.length;
    while (count < chunks.length && bytes + chunks[count]!.length <= budget) bytes += chunks[count++]!.length;
    return count === 1 ? chunks.shift()! : Buffer.concat(chunks.splice(0, count), bytes);
  }

  private async *iterate(): AsyncGenerator<Buffer> {
    this.iterating = true;
    let sinceTurn = 0;
    try {
      for (;;) {
        if (this.chunks.length > 0) {
          // At most BYTES_PER_TURN of the body per turn of the event loop (loop-turns.ts): an engine that
          // sends as fast as it is read keeps its socket readable, and one turn would otherwise read
          // (and split, parse and relay) up to 2 MiB of its answer while every other request waits.
          if (sinceTurn >= BYTES_PER_TURN) {
            sinceTurn = 0;
            await new Promise<void>((r) => setImmediate(r));
            continue;
          }
          const chunk = this.takeQueued(BYTES_PER_TURN - sinceTurn);
          sinceTurn += chunk.length;
          if (this.controller?.paused && this.chunks.length < HIGH_WATER_CHUNKS / 2) this.controller.resume();
          yield chunk;
          continue;
        }
        if (this.failure) throw this.failure;
        if (this.ended) return;
        await new Promise<void>((r) => (this.wake = r));
      }
    } finally {
      // The consumer stopped before the end (client gone, error): the engine stops too.
      if (!this.ended && !this.failure) this.controller?.abort(new Error('response body abandoned'));
    }
  }
}

const targets = new Map<string, { origin: string; path: string }>();

/** `url` split into origin and path, parsed once per distinct URL (engine URLs are few). */
export function dispatchTarget(url: string): { origin: string; path: string } {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    t = { origin: u.origin, path: u.pathname + u.search };
    if (targets.size < 1_000) targets.set(url, t);
  }
  return t;
}
