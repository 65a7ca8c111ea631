// The one place where error codes become HTTP responses: status and OpenAI error `type`
// per code, and the envelope {error:{message,type,code,param}}.
import { STATUS_CODES, maxHeaderSize } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { newId } from '../server/db/ids.js';
import { type ErrorCode, ServiceError, isServiceError } from '../server/services/errors.js';

type ErrorType = 'invalid_request_error' | 'insufficient_quota' | 'rate_limit_error' | 'api_error';

const E = (status: number, type: ErrorType = 'invalid_request_error') => ({ status, type });

export const ERROR_TABLE: Record<ErrorCode, { status: number; type: ErrorType }> = {
  invalid_json: E(400), invalid_request: E(400), transcript_too_long: E(400), invalid_output_format: E(400),
  invalid_generation_config: E(400), unsupported_audio_format: E(400), invalid_sample_rate: E(400),
  invalid_turn_detection: E(400), upgrade_required: E(400), invalid_login_hint: E(400),
  anonymous_not_enabled: E(400), identity_assertion_not_enabled: E(400), already_claimed: E(400),
  authorization_pending: E(400), expired_token: E(400), invalid_grant: E(400), unsupported_grant_type: E(400), clip_too_short: E(400),
  invalid_api_key: E(401), api_key_disabled: E(401),
  insufficient_quota: E(402, 'insufficient_quota'),
  voice_read_only: E(403), forbidden: E(403),
  not_found: E(404), model_not_found: E(404), voice_not_found: E(404), dict_not_found: E(404),
  job_not_found: E(404), blob_not_found: E(404), org_not_found: E(404), key_not_found: E(404),
  method_not_allowed: E(405), voice_profile_missing: E(409), conflict: E(409), claim_expired: E(410),
  body_too_large: E(413), storage_quota_exceeded: E(413), unsupported_media_type: E(415),
  request_timeout: E(408), request_header_fields_too_large: E(431),
  rate_limit_exceeded: E(429, 'rate_limit_error'), slow_down: E(429, 'rate_limit_error'),
  internal_error: E(500, 'api_error'), upstream_unavailable: E(502, 'api_error'), upstream_error: E(502, 'api_error'),
  verify_unavailable: E(503, 'api_error'), model_offline: E(503, 'api_error'), temporarily_unavailable: E(503, 'api_error'),
  agent_auth_unavailable: E(503, 'api_error'), upstream_timeout: E(504, 'api_error'),
  mail_unavailable: E(503, 'api_error'),
};

export interface ErrorEnvelope {
  error: { message: string; type: string; code: string; param: string | null };
}

export function envelope(err: ServiceError): { status: number; body: ErrorEnvelope } {
  const { status, type } = ERROR_TABLE[err.code];
  return { status, body: { error: { message: err.message, type, code: err.code, param: err.param } } };
}

/** Translates framework and unknown errors into ServiceErrors; internals never leak. */
export function toServiceError(err: unknown): ServiceError {
  if (isServiceError(err)) return err;
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

export function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  const serviceError = toServiceError(err);
  if (serviceError.code === 'internal_error') request.log.error({ err }, 'unhandled error');
  // A 503 made from a failure underneath (e.g. the registration store down): log what failed.
  else if (serviceError.cause !== undefined && ERROR_TABLE[serviceError.code].status >= 500) request.log.warn({ err: serviceError.cause }, serviceError.code);
  const { status, body } = envelope(serviceError);
  for (const [name, value] of Object.entries(serviceError.headers)) reply.header(name, value);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/**
 * Reads and discards the rest of a request body (up to a bound) before an early error is
 * sent, so that a client still uploading gets the 413 instead of a reset connection.
 */
export function drainRequest(raw: NodeJS.ReadableStream & { complete?: boolean }, maxBytes = 64 * 1024 * 1024, timeoutMs = 10_000): Promise<void> {
  if (raw.complete) return Promise.resolve();
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
      return new ServiceError('request_header_fields_too_large', `The request line and headers are larger than this server accepts (${Math.floor(maxHeaderSize / 1024)} KiB in all).`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ServiceError('body_too_large', 'The chunk extensions of the request body are too large.');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ServiceError('request_timeout', 'The request did not arrive in time.');
  }
  const reason = typeof err.reason === 'string' && err.reason ? ` (${err.reason.slice(0, 200)})` : '';
  return new ServiceError('invalid_request', `The request is not valid HTTP/1.1${reason}: check the request line, headers, Content-Length or chunked encoding.`);
}

/** Connections already being answered for a parse error (the dead parser reports each further chunk). */
const refusedConnections = new WeakSet<Socket>();

type InFlightResponse = { headersSent: boolean; writableFinished: boolean; req?: { complete: boolean }; once(event: 'close', fn: () => void): void };

/**
 * Fastify's clientErrorHandler: requests Node's HTTP parser refuses (a malformed request line
 * or header, bad chunked encoding, Content-Length with Transfer-Encoding, a body shorter than
 * its Content-Length, headers over the size limit) never reach a route or the error handler,
 * so they are answered here, on the socket, in the envelope; then the connection is closed
 * (its parser cannot go on). Requests received whole before the bad one on the same
 * connection get their answers first; a request cut short by the fault gets this answer
 * instead of its own, unless its response has begun (then, as Node does, the connection is
 * just closed).
 */
export function answerClientError(err: ConnectionError, socket: Socket, log: FastifyBaseLogger): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || refusedConnections.has(socket)) return;
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
      const requestId = newId('req');
      const { status, body } = envelope(parserError(err));
      const json = JSON.stringify(body);
      log.debug({ reqId: requestId, code: err.code, status, remoteAddress: socket.remoteAddress }, 'request refused by the HTTP parser');
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
          `x-request-id: ${requestId}\r\nConnection: close\r\n\r\n${json}`,
      );
    }
    socket.destroy();
  };
  answer();
}
