// Opening a WebSocket to an engine (Deepgram's /v1/listen, Cartesia's /stt/websocket, OpenAI's
// /v1/realtime): the handshake bounded by the call's deadline and signal, and every way it can
// fail as an UpstreamError -- a refused upgrade carries the engine's status and message. Its
// messages are read with readInTurns (loop-turns.ts), so that a flooding engine cannot hold the
// event loop, and its close handled through after(), so that it comes after them.
import WebSocket from 'ws';
import { ERROR_BODY_MAX_BYTES, engineFailure, statusError } from './engine-http.ts';
import { UpstreamError, type CallOptions } from './contract.ts';

export { WebSocket };

export interface EngineSocketOptions {
  headers?: Record<string, string>;
  protocols?: string[];
  /** Cut out of error messages should the engine echo it. */
  apiKey: string | undefined;
  /** Largest message accepted from the engine. */
  maxPayload?: number;
}

/** Resolves with the open socket; the call's signal aborting before then closes it. */
export function connectEngine(url: string, options: EngineSocketOptions, call: CallOptions): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    if (call.signal.aborted) {
      reject(engineFailure(call.signal.reason, call, false));
      return;
    }
    const socket = new WebSocket(url, options.protocols ?? [], {
      headers: options.headers,
      handshakeTimeout: call.timeoutMs,
      maxPayload: options.maxPayload ?? 16 * 1024 * 1024,
      perMessageDeflate: false,
    });
    let settled = false;
    // Messages the engine sends as it accepts (often in the same packet as its 101) are emitted
    // before the caller can listen: kept, and emitted again once the caller had its turn.
    const early: [WebSocket.RawData, boolean][] = [];
    const keep = (data: WebSocket.RawData, isBinary: boolean) => early.push([data, isBinary]);
    socket.on('message', keep);
    const settle = (error: unknown | null) => {
      if (settled) return;
      settled = true;
      call.signal.removeEventListener('abort', onAbort);
      socket.off('message', keep);
      if (error === null) {
        resolve(socket);
        if (early.length) setImmediate(() => early.forEach(([data, isBinary]) => socket.emit('message', data, isBinary)));
      } else {
        socket.removeAllListeners();
        socket.on('error', () => {});
        socket.terminate();
        reject(error);
      }
    };
    const onAbort = () => settle(engineFailure(call.signal.reason, call, false));
    call.signal.addEventListener('abort', onAbort, { once: true });
    socket.once('open', () => settle(null));
    socket.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      const refused = () => statusError(res.statusCode ?? 502, Buffer.concat(chunks).subarray(0, ERROR_BODY_MAX_BYTES).toString('utf8'), options.apiKey);
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        bytes += c.length;
        // Enough for the message: the rest is not read.
        if (bytes >= ERROR_BODY_MAX_BYTES) {
          settle(refused());
          res.destroy();
        }
      });
      res.on('end', () => settle(refused()));
      res.on('error', () => settle(refused()));
    });
    socket.once('error', (e) => {
      const timedOut = /handshake has timed out/i.test(e.message);
      settle(
        timedOut ? new UpstreamError('timeout', `The engine did not accept the connection within ${call.timeoutMs / 1000} s.`) : engineFailure(e, call, false),
      );
    });
  });
}

/** How an engine's close of an open socket reads as an error (1000/1005 are normal ends). */
export function closeError(code: number, reason: Buffer | string, apiKey: string | undefined): UpstreamError | null {
  if (code === 1000 || code === 1005) return null;
  const text = reason.toString().slice(0, 300);
  if (code === 1006) return new UpstreamError('broken', 'The engine dropped the connection.');
  // The reason may be JSON or text, and may echo the key: read as an error answer would be.
  const engineMessage = text ? statusError(code, text, apiKey).details.engineMessage : undefined;
  const kind = code === 1008 || (code >= 4000 && code < 5000) ? 'status' : 'broken';
  return new UpstreamError(kind, `The engine closed the stream (${code}${engineMessage ? `: ${engineMessage}` : ''}).`, { status: code, engineMessage });
}
