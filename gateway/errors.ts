// The one place where errors become HTTP responses: framework, audio and unknown errors made
// ServiceErrors, then answered in the envelope (the status and type table is
// server/error-envelope.ts, which the dashboard's gateway proxy answers in too).
import { STATUS_CODES, maxHeaderSize } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_TABLE, envelope, errorHeaders } from '../server/error-envelope.ts';
import { newId } from '../server/db/ids.ts';
import { type ErrorCode, ServiceError, isServiceError } from '../server/services/errors.ts';
import { AudioError, type AudioErrorCode, type AudioSetting } from './audio/audio-error.ts';
import type { VendorErrorFields } from './vendor-error-shape.ts';

export { ERROR_TABLE, envelope, type ErrorEnvelope } from '../server/error-envelope.ts';

/** The audio functions' refusals as the API's errors; the audio a client sends is its upload, field `file`. */
const AUDIO_ERROR_CODES: Record<AudioErrorCode, ErrorCode> = {
  unreadable_wav: 'unsupported_audio_format',
  unsupported_output_format: 'invalid_output_format',
  volume_out_of_range: 'invalid_generation_config',
};
const AUDIO_SETTING_PARAMS: Record<AudioSetting, string> = {
  container: 'output_format.container',
  sampleRate: 'output_format.sample_rate',
  encoding: 'output_format.encoding',
  bitRate: 'output_format.bit_rate',
  volume: 'generation_config.volume',
};

/** Translates framework, audio and unknown errors into ServiceErrors; internals never leak. */
export function toServiceError(err: unknown): ServiceError {
  if (isServiceError(err)) return err;
  if (err instanceof AudioError) {
    const param = err.setting === null ? 'file' : AUDIO_SETTING_PARAMS[err.setting];
    return new ServiceError(AUDIO_ERROR_CODES[err.code], err.message, param);
  }
  const fe = err as Partial<FastifyError> & { type?: string };
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ServiceError('body_too_large', 'Request body is larger than this route accepts.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ServiceError('unsupported_media_type', 'Unsupported Content-Type for this route; send application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ServiceError('invalid_json', 'The request body is not valid JSON.');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // Ids are far shorter than the router's 100-character cap on a path parameter.
      return new ServiceError('not_found', 'Nothing has an id that long: a path parameter is at most 100 characters.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ServiceError('invalid_request', 'Content-Length does not match the body.');
  }
  if (err instanceof SyntaxError && fe.statusCode === 400) {
    return new ServiceError('invalid_json', 'The request body is not valid JSON.');
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new ServiceError('invalid_request', fe.message ?? 'Invalid request.');
  }
  return new ServiceError('internal_error', 'The server had an error while processing your request. Retry once; if it persists, report the request id.');
}

/** `vendorFields`: a vendor's fields beside the envelope, for an answer no vendor scope's hook shapes (gateway/vendor-error-shape.ts). */
export function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown, vendorFields?: VendorErrorFields): FastifyReply {
  const serviceError = toServiceError(err);
  if (serviceError.code === 'internal_error') request.log.error({ err }, 'unhandled error');
  // A 503 made from a failure underneath (e.g. the registration store down): log what failed.
  else if (serviceError.cause !== undefined && ERROR_TABLE[serviceError.code].status >= 500) request.log.warn({ err: serviceError.cause }, serviceError.code);
  const { status, body } = envelope(serviceError);
  reply.headers(errorHeaders(serviceError)).code(status);
  const fields = vendorFields?.({ code: body.error.code, message: body.error.message }, request, reply);
  return reply.type('application/json; charset=utf-8').send(fields ? { ...fields, ...body } : body);
}

/**
 * Reads and discards the rest of a request body (up to a bound) before an early error is
 * sent, so that a client still uploading gets the 413 instead of a reset connection.
 */
export function drainRequest(
  raw: NodeJS.ReadableStream & { complete?: boolean; destroyed?: boolean },
  maxBytes = 64 * 1024 * 1024,
  timeoutMs = 10_000,
): Promise<void> {
  // A request dropped for its slowness (gateway/client-bounds.ts) has nothing more to read.
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      raw.removeListener('data', onData);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) done();
    };
    const timer = setTimeout(done, timeoutMs);
    raw.on('data', onData);
    raw.once('end', done);
    raw.once('close', done);
    raw.once('error', done);
    raw.resume();
  });
}

/** What Node's HTTP parser refused, as a ServiceError (its `reason` names the fault, never data). */
export function parserError(err: ConnectionError & { reason?: unknown }): ServiceError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ServiceError(
        'request_header_fields_too_large',
        `The request line and headers are larger than this server accepts (${Math.floor(maxHeaderSize / 1024)} KiB in all).`,
      );
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ServiceError('body_too_large', 'The chunk extensions of the request body are too large.');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      // Node's headersTimeout (its requestTimeout is off: bodies are timed by gateway/client-bounds.ts).
      return new ServiceError('request_timeout', 'The request line and headers did not arrive in time.');
  }
  const reason = typeof err.reason === 'string' && err.reason ? ` (${err.reason.slice(0, 200)})` : '';
  return new ServiceError(
    'invalid_request',
    `The request is not valid HTTP/1.1${reason}: check the request line, headers, Content-Length or chunked encoding.`,
  );
}

/** Connections already being answered for a parse error (the dead parser reports each further chunk). */
const refusedConnections = new WeakSet<Socket>();

type InFlightResponse = { headersSent: boolean; writableFinished: boolean; req?: { complete: boolean }; once(event: 'close', fn: () => void): void };

/**
 * Fastify's clientErrorHandler: requests Node's HTTP parser refuses (a malformed request line
 * or header, bad chunked encoding, Content-Length with Transfer-Encoding, a body shorter than
 * its Content-Length, headers over the size limit, headers that did not arrive in time) never
 * reach a route or the error handler, so they are answered on the socket (answerOnSocket).
 */
export function answerClientError(err: ConnectionError, socket: Socket, log: FastifyBaseLogger): void {
  if (err.code === 'ECONNRESET') return;
  answerOnSocket(parserError(err), socket, log, newId('req'), err.code);
}

/**
 * Answers `error` on the socket itself, in the envelope, then closes the connection: for a
 * request whose parser cannot go on, or that is dropped before it has arrived whole. Requests
 * received whole before it on the same connection get their answers first; a request cut short
 * gets this answer instead of its own, unless its response has begun (then, as Node does, the
 * connection is just closed). `cause`: what the debug line names (Node's parser code, say).
 */
export function answerOnSocket(error: ServiceError, socket: Socket, log: FastifyBaseLogger, requestId = newId('req'), cause: string = error.code): void {
  if (socket.destroyed || refusedConnections.has(socket)) return;
  refusedConnections.add(socket);
  const answer = () => {
    if (socket.destroyed) return;
    // Node's current response on this connection (internal, but stable since Node 0.x).
    const inFlight = (socket as Socket & { _httpMessage?: InFlightResponse | null })._httpMessage;
    if (inFlight && !inFlight.writableFinished && inFlight.req?.complete) {
      inFlight.once('close', answer); // the next one, or this answer, once it is sent
      return;
    }
    if (socket.writable && !inFlight?.headersSent) {
      const { status, body } = envelope(error);
      const json = JSON.stringify(body);
      log.debug({ reqId: requestId, code: cause, status, remoteAddress: socket.remoteAddress }, 'request refused on its connection');
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
          `x-request-id: ${requestId}\r\nConnection: close\r\n\r\n${json}`,
      );
    }
    socket.destroy();
  };
  answer();
}
