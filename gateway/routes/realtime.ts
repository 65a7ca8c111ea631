// GET /v1/realtime: OpenAI's Realtime API over a WebSocket, composed from the registry's models
// (gateway/realtime/realtime-session.ts; docs/realtime.md). The socket is bound to the session
// through a WebSocketLink (pings, a bounded outgoing buffer) and the protocol's wire format. `?intent=transcription` opens a
// transcription session (`?model=` may name its stt model); otherwise `?model=` names a realtime
// profile or an LLM. Checked before the upgrade is accepted, so a refusal is a plain HTTP
// response with the error envelope: the key (Bearer, ?api_key=, or the
// `openai-insecure-api-key.<key>` subprotocol browsers send), the rate limit and a positive
// balance (admission hook); the model (404 model_not_found, 503 model_offline when no stt model
// streams); the session caps (429 per key and org, 503 per process); and the first second of
// the user's audio (402).
//
// `?call_id=` joins a WebRTC call of the key's org instead (gateway/realtime/realtime-call.ts): the
// socket sees the call's events and may send its own, as OpenAI's server-side control of a call;
// 404 for a call this process does not hold, 429 past MAX_CONTROL_SOCKETS.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import { admitRealtime, releaseOnClose, startRealtimeSession, type RealtimeAdmission } from '../realtime/open-realtime.ts';
import { loadRealtimeProfiles } from '../realtime/profiles.ts';
import { MAX_CONTROL_SOCKETS, type RealtimeCall } from '../realtime/realtime-call.ts';
import type { RealtimeCalls } from '../realtime/realtime-calls.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import { encodeServerEvent, readClientMessage } from '../realtime/wire.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';

const upgradeRequired = () => new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');

declare module 'fastify' {
  interface FastifyRequest {
    realtimeAdmission?: RealtimeAdmission;
    realtimeCall?: RealtimeCall;
  }
}

export function registerRealtimeRoutes(app: FastifyInstance, ctx: GatewayContext, calls: RealtimeCalls): void {
  const profiles = loadRealtimeProfiles(ctx.config.realtimeProfilesFile);
  app.route({
    method: 'GET',
    url: '/v1/realtime',
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      const q = request.query as Record<string, unknown>;
      const one = (name: string) => (typeof q[name] === 'string' ? (q[name] as string) : undefined);
      const callId = one('call_id');
      if (callId !== undefined) {
        const call = calls.find(callId, request.auth.orgId);
        if (call.controlCount >= MAX_CONTROL_SOCKETS)
          throw new ServiceError('rate_limit_exceeded', `This call already has ${MAX_CONTROL_SOCKETS} control sockets; close one first.`, 'call_id');
        request.realtimeCall = call;
        return;
      }
      const admission = await admitRealtime(ctx, profiles, request.auth, { model: one('model'), intent: one('intent') });
      request.modelId = admission.modelId;
      releaseOnClose(admission, request.raw.socket);
      request.realtimeAdmission = admission;
    },
    handler: async () => {
      throw upgradeRequired();
    },
    wsHandler: (socket, request) => {
      if (request.realtimeCall) {
        if (request.realtimeCall.isEnded) return socket.close(1000, 'call_ended');
        return request.realtimeCall.attachControl(socket);
      }
      const admission = request.realtimeAdmission!;
      // From here the session settles the hold (its audio leg releases it after its last debit).
      request.raw.socket.off('close', admission.hold.release);
      if (socket.readyState !== socket.OPEN) return admission.hold.release();
      socket.once('close', ctx.metrics.webSocketOpened('/v1/realtime'));
      ctx.lifecycle.trackSocket(socket);
      const beta =
        /realtime=v1/.test(String(request.headers['openai-beta'] ?? '')) ||
        request.headers['sec-websocket-protocol']?.includes('openai-beta.realtime-v1') === true;
      const link = new WebSocketLink(socket, ctx.clock, {
        message: (data, isBinary) => session.receive(readClientMessage(data, isBinary)),
        closed: () => session.transportClosed(),
      });
      const session = startRealtimeSession(
        ctx,
        admission,
        link.outbox((event: ServerEvent) => [encodeServerEvent(event, beta)]),
        { auth: request.auth, requestId: request.id, log: request.log, profiles },
      );
    },
  });
}
