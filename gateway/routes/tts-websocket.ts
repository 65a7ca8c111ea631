// GET /tts/websocket: streaming speech over a WebSocket, wire-compatible with Cartesia's TTS
// WebSocket (the session, its messages and its metering: gateway/tts/tts-socket-session.ts).
// Checked before the upgrade is accepted, as for /stt/websocket: the key (Authorization,
// X-API-Key or ?api_key=), the rate limit and a positive balance in the admission hook, the
// session caps here (429 per key and org, 503 per process); a refusal is a plain HTTP response
// carrying the error envelope. The model, voice and format come with each context's first
// message, so they are checked then (an error event), not before the upgrade.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold } from '../core/gateway-core.ts';
import { runTtsSocketSession, ttsSocketLimits } from '../tts/tts-socket-session.ts';

/** Cartesia's API version (`Cartesia-Version: 2025-04-16`, or `?cartesia_version=`; the query wins): a date. */
const VERSION = /^\d{4}-\d{2}-\d{2}$/;

export function registerTtsWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.route({
    method: 'GET',
    url: '/tts/websocket',
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') {
        throw new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');
      }
      // Every version is served alike; one that is not a date is a client's mistake worth naming.
      const q = request.query as Record<string, unknown>;
      const version = q.cartesia_version ?? request.headers['cartesia-version'];
      if (version !== undefined && (typeof version !== 'string' || !VERSION.test(version))) {
        throw new ServiceError('invalid_request', 'Cartesia-Version (or cartesia_version) must be a date like 2025-04-16.', 'cartesia_version');
      }
      // The session's place under the caps, held until the connection closes, however it ends.
      const ticket = ctx.admission.openStream(request.auth);
      const connection = request.raw.socket;
      connection.once('close', ticket.release);
      if (connection.destroyed) ticket.release();
      // The model (so the price) comes with each context: credit is reserved span by span, from
      // nothing (a hold of 0 touches no store; the session releases what it extends it by).
      request.ttsAdmission = { ticket, hold: await ctx.core.reserve(request.auth, 0n) };
    },
    handler: async () => {
      throw new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');
    },
    wsHandler: (socket, request) => {
      if (socket.readyState !== socket.OPEN) return; // gone during the upgrade
      const { ticket, hold } = request.ttsAdmission!;
      socket.once('close', ctx.metrics.webSocketOpened('/tts/websocket'));
      ctx.lifecycle.trackSocket(socket);
      const revoked = new AbortController();
      ticket.bind(revoked);
      runTtsSocketSession(socket, {
        ctx,
        auth: request.auth,
        requestId: request.id,
        hold,
        limits: { ...ttsSocketLimits },
        revoked: revoked.signal,
        log: request.log,
      });
    },
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A /tts/websocket session's place under the stream caps (held until the connection closes) and its credit hold. */
    ttsAdmission?: { ticket: Ticket; hold: CreditHold };
  }
}
