// The one way a streaming-TTS WebSocket route is set up, whatever vendor's wire it speaks
// (Cartesia's /tts/websocket, ElevenLabs' stream-input sockets, Deepgram's /v1/speak socket):
// before the upgrade is accepted, the key, the rate limit and a positive balance (the admission
// hook), the vendor's own checks of the URL (`check`), and the session caps (429 per key and
// org, 503 per process), a refusal being a plain HTTP response; after it, the socket bound
// through the one WebSocket life cycle (gateway/sessions/websocket-link.ts) and handed to the
// route's adapter (`bind`), which makes the TtsStreamSession.
//
// A route whose protocol lets the key come in the first message instead (`keyInFirstMessage`:
// ElevenLabs' `xi_api_key`) is upgraded without one: that message must come within
// FIRST_MESSAGE_MS and be small; the key it names then goes through the same admission and caps
// (a refusal is the vendor's error message and a close), and the session gets the messages from
// the first one on, the key taken out.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import { toServiceError } from '../errors.ts';

export interface TtsSocketAdmission {
  /** Aborted (reason: a ServiceError) when the key is revoked: the session must end at once. */
  revoked: AbortSignal;
  /** Credit reserved span by span, from nothing. */
  hold: CreditHold;
  /** When the upgrade request arrived (performance.now()), for the request log's first audio. */
  arrivedAt: number;
}

/** How a route reads a key from its first message, and refuses a socket in its own words. */
export interface KeyInFirstMessage {
  /** The message's field that carries the key (for the error messages). */
  field: string;
  /** The key the message names and the message without it (what the session gets; null: nothing else); null when it names none. */
  read(data: Buffer, isBinary: boolean): { key: string; rest: Buffer | null } | null;
  /** Sends the vendor's error message for `error` and closes the socket. */
  refuse(socket: WebSocket, error: ServiceError, request: FastifyRequest): void;
}

export interface TtsSocketRoute {
  url: string;
  /** The vendor's checks of the URL (query, path), run before the upgrade: a throw refuses it. */
  check?: (request: FastifyRequest) => void | Promise<void>;
  /** Binds the accepted socket to a session. */
  bind: (socket: WebSocket, request: FastifyRequest, admission: TtsSocketAdmission) => void;
  keyInFirstMessage?: KeyInFirstMessage;
  /** A credential the route takes besides keys (Cartesia's access tokens on /tts/websocket). */
  credential?: FastifyContextConfig['credential'];
}

/** How long a socket upgraded without a key has to send the first message that names one. */
export const FIRST_MESSAGE_MS = 5_000;
/** The largest first message read for a key (ElevenLabs' is the settings and a " "). */
export const FIRST_MESSAGE_MAX_BYTES = 16 * 1024;
/** What may come after it while its key is being checked (a client does not wait to send its text). */
const EARLY_MAX_BYTES = 256 * 1024;
/** Sockets of one route waiting for their key at once; past it the upgrade is 503. */
const MAX_AWAITING_KEY = 256;

const upgradeRequired = () => new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');

export function registerTtsSocketRoute(app: FastifyInstance, ctx: GatewayContext, route: TtsSocketRoute): void {
  let awaitingKey = 0;

  /** The session's place under the caps, held until the connection closes, however it ends, and its credit hold. */
  const admit = async (auth: RequestAuth, request: FastifyRequest, arrivedAt: number) => {
    const ticket = ctx.admission.openStream(auth);
    const connection = request.raw.socket;
    connection.once('close', ticket.release);
    if (connection.destroyed) ticket.release();
    // The model (so the price) comes with each context: credit is reserved span by span, from
    // nothing (a hold of 0 touches no store; the session releases what it extends it by).
    return { ticket, hold: await ctx.core.reserve(auth, 0n), arrivedAt };
  };

  const start = (socket: WebSocket, request: FastifyRequest, admission: { ticket: Ticket; hold: CreditHold; arrivedAt: number }) => {
    const revoked = new AbortController();
    admission.ticket.bind(revoked);
    route.bind(socket, request, { revoked: revoked.signal, hold: admission.hold, arrivedAt: admission.arrivedAt });
  };

  /** A socket upgraded without a key: its first message names one, which is admitted as the header's would have been. */
  const awaitKey = (socket: WebSocket, request: FastifyRequest, from: KeyInFirstMessage, arrivedAt: number) => {
    awaitingKey++;
    let waiting = true;
    const early: [Buffer, boolean][] = [];
    let earlyBytes = 0;
    const stop = () => {
      if (!waiting) return;
      waiting = false;
      awaitingKey--;
      timer.cancel();
      socket.off('message', onMessage);
      socket.off('close', stop);
    };
    const refuse = (error: ServiceError) => {
      stop();
      from.refuse(socket, error, request);
    };
    const noKey = (why: string) =>
      new ServiceError(
        'invalid_api_key',
        `You did not provide an API key: give it with the upgrade (a header), or as ${from.field} in the first message${why}.`,
      );
    const timer = ctx.clock.after(FIRST_MESSAGE_MS, () => refuse(noKey(`, within ${FIRST_MESSAGE_MS / 1000} s`)));
    const onMessage = (raw: RawData, isBinary: boolean) => {
      const data = Array.isArray(raw) ? Buffer.concat(raw) : Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
      if (early.length > 0) {
        // Later messages wait for the key to be checked, bounded.
        earlyBytes += data.length;
        if (earlyBytes > EARLY_MAX_BYTES) return refuse(new ServiceError('rate_limit_exceeded', 'Messages came faster than the key could be checked.'));
        early.push([data, isBinary]);
        return;
      }
      if (data.length > FIRST_MESSAGE_MAX_BYTES) {
        return refuse(new ServiceError('body_too_large', `The first message is at most ${FIRST_MESSAGE_MAX_BYTES} bytes when it carries the key.`));
      }
      const read = from.read(data, isBinary);
      if (!read) return refuse(noKey(' (a JSON text message)'));
      // The first message stays first, whether or not it has anything besides the key.
      early.push([read.rest ?? Buffer.alloc(0), false]);
      void admitKey(read.key);
    };
    const admitKey = async (key: string) => {
      try {
        const auth = await ctx.core.admit(key, true);
        if (!waiting) return; // closed, or timed out, while the key was checked
        const admission = await admit(auth, request, arrivedAt);
        if (!waiting) return admission.hold.release(); // the ticket goes with the connection
        request.auth = auth;
        ctx.requestLog?.opened({ orgId: auth.orgId, requestId: request.id });
        stop();
        start(socket, request, admission);
        // The session's socket listener takes what came while the key was checked, in order.
        for (const [data, isBinary] of early) if (data.length > 0) socket.emit('message', data, isBinary);
      } catch (e) {
        if (!waiting) return;
        if (toServiceError(e).code === 'internal_error') request.log.error({ err: e }, 'checking the key of a socket failed');
        refuse(toServiceError(e));
      }
    };
    socket.on('message', onMessage);
    socket.once('close', stop);
  };

  app.route({
    method: 'GET',
    url: route.url,
    config: { metered: true, keyInQuery: true, session: true, keyInFirstMessage: route.keyInFirstMessage !== undefined, credential: route.credential },
    preValidation: async (request, reply) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      await route.check?.(request);
      const arrivedAt = performance.now() - reply.elapsedTime;
      // Upgraded without a key (only where the protocol lets the first message carry one): admitted once it comes.
      if (!request.auth) {
        if (awaitingKey >= MAX_AWAITING_KEY)
          throw new ServiceError('temporarily_unavailable', 'Too many sockets are waiting for their key on this server; retry shortly.', null, {
            retryAfterSeconds: 1,
          });
        request.ttsAwaitingKey = arrivedAt;
        return;
      }
      request.ttsAdmission = await admit(request.auth, request, arrivedAt);
    },
    handler: async () => {
      throw upgradeRequired();
    },
    wsHandler: (socket, request) => {
      if (socket.readyState !== socket.OPEN) return; // gone during the upgrade
      socket.once('close', ctx.metrics.webSocketOpened(route.url));
      ctx.lifecycle.trackSocket(socket);
      if (request.ttsAdmission) return start(socket, request, request.ttsAdmission);
      awaitKey(socket, request, route.keyInFirstMessage!, request.ttsAwaitingKey!);
    },
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A TTS socket's place under the stream caps (held until the connection closes) and its credit hold. */
    ttsAdmission?: { ticket: Ticket; hold: CreditHold; arrivedAt: number };
    /** A TTS socket upgraded without a key, waiting for its first message: when the upgrade arrived. */
    ttsAwaitingKey?: number;
  }
}
