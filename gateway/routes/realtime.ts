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
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold } from '../core/gateway-core.ts';
import { defaultModel, isOpenAiSttName, loadRealtimeProfiles, resolveProfile, type RealtimeProfile } from '../realtime/profiles.ts';
import { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import { encodeServerEvent, readClientMessage } from '../realtime/wire.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { streamingModel } from '../stt/open-session.ts';
import { METER_EVERY_MS } from '../stt/stt-session.ts';

const upgradeRequired = () => new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');

declare module 'fastify' {
  interface FastifyRequest {
    realtimeAdmission?: { ticket: Ticket; hold: CreditHold; profile: RealtimeProfile | null; sttModel: string | null };
  }
}

export function registerRealtimeRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const profiles = loadRealtimeProfiles(ctx.config.realtimeProfilesFile);
  app.route({
    method: 'GET',
    url: '/v1/realtime',
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      const q = request.query as Record<string, unknown>;
      const one = (name: string) => (typeof q[name] === 'string' ? (q[name] as string) : undefined);
      const intent = one('intent');
      if (intent !== undefined && intent !== 'transcription')
        throw new ServiceError('invalid_request', 'intent must be transcription (or absent, for a conversation).', 'intent');
      let profile: RealtimeProfile | null = null;
      let sttModel: string | null = null;
      let sttId: string;
      if (intent === 'transcription') {
        const asked = one('model');
        sttModel = asked && !isOpenAiSttName(asked) ? asked : null;
        sttId = sttModel ?? defaultModel(ctx.registry, 'stt');
      } else {
        const model = one('model');
        if (!model)
          throw new ServiceError(
            'invalid_request',
            'model is required: a realtime profile or an LLM of the registry (GET /v1/models), or intent=transcription.',
            'model',
          );
        profile = resolveProfile(profiles, ctx.registry, model);
        ctx.registry.resolve(profile.llm, 'llm');
        sttId = profile.stt ?? defaultModel(ctx.registry, 'stt');
      }
      const stt = streamingModel(ctx, sttId);
      request.modelId = profile?.id ?? stt.id;
      // Held until the connection closes, however it ends (refused upgrade, client gone, session over).
      const connection = request.raw.socket;
      const ticket = ctx.admission.openStream(request.auth);
      connection.once('close', ticket.release);
      const hold = await ctx.core.reserve(request.auth, perSecondCostMicros(stt.prices.picoPerSecond, METER_EVERY_MS));
      connection.once('close', hold.release);
      if (connection.destroyed) {
        ticket.release();
        hold.release();
      }
      request.realtimeAdmission = { ticket, hold, profile, sttModel };
    },
    handler: async () => {
      throw upgradeRequired();
    },
    wsHandler: (socket, request) => {
      const { ticket, hold, profile, sttModel } = request.realtimeAdmission!;
      // From here the session settles the hold (its audio leg releases it after its last debit).
      request.raw.socket.off('close', hold.release);
      if (socket.readyState !== socket.OPEN) return hold.release();
      socket.once('close', ctx.metrics.webSocketOpened('/v1/realtime'));
      ctx.lifecycle.trackSocket(socket);
      const revoked = new AbortController();
      ticket.bind(revoked);
      const beta =
        /realtime=v1/.test(String(request.headers['openai-beta'] ?? '')) ||
        request.headers['sec-websocket-protocol']?.includes('openai-beta.realtime-v1') === true;
      const link = new WebSocketLink(socket, ctx.clock, {
        message: (data, isBinary) => session.receive(readClientMessage(data, isBinary)),
        closed: () => session.transportClosed(),
      });
      const session = new RealtimeSession(
        link.outbox((event: ServerEvent) => [encodeServerEvent(event, beta)]),
        {
          ctx,
          auth: request.auth,
          requestId: request.id,
          log: request.log,
          kind: profile ? 'realtime' : 'transcription',
          profile,
          profiles,
          sttModel,
          hold,
          revoked: revoked.signal,
        },
      );
      session.start().catch((e: unknown) => session.fail(e));
    },
  });
}
