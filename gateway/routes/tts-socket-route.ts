// The one way a streaming-TTS WebSocket route is set up, whatever vendor's wire it speaks
// (Cartesia's /tts/websocket, ElevenLabs' stream-input sockets, Deepgram's /v1/speak socket):
// before the upgrade is accepted, the key, the rate limit and a positive balance (the admission
// hook), the vendor's own checks of the URL (`check`), and the session caps (429 per key and
// org, 503 per process), a refusal being a plain HTTP response; after it, the socket bound
// through the one WebSocket life cycle (gateway/sessions/websocket-link.ts) and handed to the
// route's adapter (`bind`), which makes the TtsStreamSession.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold } from '../core/gateway-core.ts';

export interface TtsSocketAdmission {
  /** Aborted (reason: a ServiceError) when the key is revoked: the session must end at once. */
  revoked: AbortSignal;
  /** Credit reserved span by span, from nothing. */
  hold: CreditHold;
  /** When the upgrade request arrived (performance.now()), for the request log's first audio. */
  arrivedAt: number;
}

export interface TtsSocketRoute {
  url: string;
  /** The vendor's checks of the URL (query, path), run before the upgrade: a throw refuses it. */
  check?: (request: FastifyRequest) => void | Promise<void>;
  /** Binds the accepted socket to a session. */
  bind: (socket: WebSocket, request: FastifyRequest, admission: TtsSocketAdmission) => void;
}

const upgradeRequired = () => new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');

export function registerTtsSocketRoute(app: FastifyInstance, ctx: GatewayContext, route: TtsSocketRoute): void {
  app.route({
    method: 'GET',
    url: route.url,
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request, reply) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      await route.check?.(request);
      // The session's place under the caps, held until the connection closes, however it ends.
      const ticket = ctx.admission.openStream(request.auth);
      const connection = request.raw.socket;
      connection.once('close', ticket.release);
      if (connection.destroyed) ticket.release();
      // The model (so the price) comes with each context: credit is reserved span by span, from
      // nothing (a hold of 0 touches no store; the session releases what it extends it by).
      request.ttsAdmission = { ticket, hold: await ctx.core.reserve(request.auth, 0n), arrivedAt: performance.now() - reply.elapsedTime };
    },
    handler: async () => {
      throw upgradeRequired();
    },
    wsHandler: (socket, request) => {
      if (socket.readyState !== socket.OPEN) return; // gone during the upgrade
      const { ticket, hold, arrivedAt } = request.ttsAdmission!;
      socket.once('close', ctx.metrics.webSocketOpened(route.url));
      ctx.lifecycle.trackSocket(socket);
      const revoked = new AbortController();
      ticket.bind(revoked);
      route.bind(socket, request, { revoked: revoked.signal, hold, arrivedAt });
    },
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A TTS socket's place under the stream caps (held until the connection closes) and its credit hold. */
    ttsAdmission?: { ticket: Ticket; hold: CreditHold; arrivedAt: number };
  }
}
