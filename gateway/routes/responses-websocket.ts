// GET /v1/responses upgraded to a WebSocket: OpenAI's Responses API in WebSocket mode (docs/llm.md,
// "Responses over a WebSocket"), the session in gateway/llm/responses-socket.ts. Checked before
// the upgrade, a refusal being a plain HTTP answer in the envelope: the key (Bearer, or as every
// socket here takes it: ?api_key=, a subprotocol), the rate limit and a positive balance (the
// admission hook), and the session caps (429 per key and org, 503 per process). Each response
// then reserves and is debited as POST /v1/responses is (402 as an error event).
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { ResponseCreator } from '../llm/create-response.ts';
import { ResponsesSocketSession, type WireEvent } from '../llm/responses-socket.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { LLM_BODY_LIMIT } from './chat-completions.ts';

const ROUTE = '/v1/responses';

const upgradeRequired = () =>
  new ServiceError(
    'upgrade_required',
    'GET /v1/responses is the Responses WebSocket: connect with a WebSocket client (Upgrade: websocket), or POST a response.',
  );

export function registerResponsesWebSocketRoute(app: FastifyInstance, ctx: GatewayContext, responses: ResponseCreator): void {
  app.route({
    method: 'GET',
    url: ROUTE,
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      // The socket's place under the caps, held until the connection closes, however it ends.
      const ticket = ctx.admission.openStream(request.auth);
      const connection = request.raw.socket;
      connection.once('close', ticket.release);
      if (connection.destroyed) ticket.release();
      request.responsesTicket = ticket;
    },
    handler: async () => {
      throw upgradeRequired();
    },
    wsHandler: (socket, request) => {
      if (socket.readyState !== socket.OPEN) return; // gone during the upgrade
      socket.once('close', ctx.metrics.webSocketOpened(ROUTE));
      ctx.lifecycle.trackSocket(socket);
      const revoked = new AbortController();
      request.responsesTicket!.bind(revoked);
      const link = new WebSocketLink(socket, ctx.clock, {
        message: (data, isBinary) => session.receive(data, isBinary),
        closed: () => session.transportClosed(),
      });
      const session = new ResponsesSocketSession({
        ctx,
        responses,
        auth: request.auth,
        requestId: request.id,
        log: request.log,
        outbox: link.outbox((event: WireEvent) => [event]),
        revoked: revoked.signal,
        maxRequestBytes: LLM_BODY_LIMIT,
      });
    },
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The Responses socket's place under the stream caps, held until the connection closes. */
    responsesTicket?: Ticket;
  }
}
