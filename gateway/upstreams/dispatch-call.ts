// One HTTP request to an engine through undici's low-level `dispatch`, for the chat hot path.
// undici's `request()` wraps every response in a Readable stream, an async resource and a
// body mixin; the chat route only needs the status, the content type and the body bytes, in
// order, with backpressure. Measured once on this machine (a throw-away microbenchmark, 4,000
// requests x 6 rounds to bench/upstream-server.ts): ~33 us of CPU per request against ~48 us
// for `request()`.
import type { Dispatcher } from 'undici';

export interface DispatchResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body, chunk by chunk; stopping early aborts the request. Iterate it once. */
  body: AsyncIterable<Buffer>;
  /** The whole body as UTF-8 (instead of iterating it). */
  text(): Promise<string>;
}

export interface DispatchOptions {
  origin: string;
  path: string;
  method: 'GET' | 'POST';
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
    let controller: Dispatcher.DispatchController | null = null;
    let started = false;
    const chunks: Buffer[] = [];
    let ended = false;
    let failure: Error | null = null;
    let wake: (() => void) | null = null;
    const notify = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const onAbort = () => controller?.abort(signal.reason as Error);
    const finish = () => signal.removeEventListener('abort', onAbort);
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });

    let iterating = false;
    async function* body(): AsyncGenerator<Buffer> {
      iterating = true;
      try {
        for (;;) {
          if (chunks.length > 0) {
            const chunk = chunks.shift()!;
            if (controller?.paused && chunks.length < HIGH_WATER_CHUNKS / 2) controller.resume();
            yield chunk;
            continue;
          }
          if (failure) throw failure;
          if (ended) return;
          await new Promise<void>((r) => (wake = r));
        }
      } finally {
        // The consumer stopped before the end (client gone, error): the engine stops too.
        if (!ended && !failure) controller?.abort(new Error('response body abandoned'));
      }
    }

    try {
      dispatch();
    } catch (e) {
      finish();
      reject(e);
    }

    function dispatch() {
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
        {
          onRequestStart(c) {
            controller = c;
            if (signal.aborted) c.abort(signal.reason as Error);
          },
          onResponseStart(_c, statusCode, headers) {
            started = true;
            // Made when first asked for: a non-streaming answer is usually read whole by text().
            let iterable: AsyncGenerator<Buffer> | undefined;
            const response: DispatchResponse = {
              statusCode,
              headers: headers as DispatchResponse['headers'],
              get body() {
                return (iterable ??= body());
              },
              async text() {
                // Usually the whole body came with the headers: no iteration needed.
                if (ended && !failure && !iterating) {
                  return chunks.length === 1 ? chunks.pop()!.toString('utf8') : Buffer.concat(chunks.splice(0)).toString('utf8');
                }
                const parts: Buffer[] = [];
                for await (const chunk of response.body) parts.push(chunk);
                return Buffer.concat(parts).toString('utf8');
              },
            };
            resolve(response);
          },
          onResponseData(c, chunk) {
            chunks.push(chunk);
            if (chunks.length >= HIGH_WATER_CHUNKS && !c.paused) c.pause();
            notify();
          },
          onResponseEnd() {
            ended = true;
            finish();
            notify();
          },
          onResponseError(_c, error) {
            finish();
            if (!started) {
              reject(error);
              return;
            }
            failure = error;
            notify();
          },
        },
      );
    }
  });
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
