// WS /phone/<carrier>/:token (Twilio, Telnyx, Plivo, Exotel, Vonage): a phone carrier's media stream of a call,
// bridged to a realtime session (gateway/phone/phone-bridge.ts; docs/phone.md). Carriers send
// no headers, and Twilio's <Stream url> takes no query string: the path ends in a phone token
// (server/services/phone/), which stands for one API key of an org and names the realtime
// profile the caller talks to. The token is the route's credential (FastifyContextConfig
// .credential): the call is then admitted as that key is on /v1/realtime, before the upgrade,
// so a refusal is a plain HTTP answer in the error envelope: the token (401), the key's rate
// limit and credit, the profile (404), the session caps (429 per key and org, 503 per process),
// the first second of audio (402). A revoked token, or key, ends the call within a second
// (1008 api_key_disabled); metering, caps and the socket's bounds are the WebSocket route's.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import { phoneTokenStatuses, verifyPhoneToken, type PhoneTokenGrant } from '../../server/services/phone/verify-phone-token.ts';
import type { GatewayContext } from '../context.ts';
import { CARRIER_DIALECTS } from '../phone/carrier-dialects.ts';
import { PhoneBridge, type CallAdmission } from '../phone/phone-bridge.ts';
import { PhoneTokenWatch } from '../phone/phone-token-watch.ts';
import { admitRealtime, releaseOnClose, startRealtimeSession, type RealtimeAdmission } from '../realtime/open-realtime.ts';
import { loadRealtimeProfiles } from '../realtime/profiles.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';

const upgradeRequired = () =>
  new ServiceError('upgrade_required', "This is a phone carrier's media-stream WebSocket route: point the carrier's stream URL at it (docs/phone.md).");

declare module 'fastify' {
  interface FastifyRequest {
    phoneGrant?: PhoneTokenGrant;
    phoneAdmission?: RealtimeAdmission;
  }
}

export function registerPhoneRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const profiles = loadRealtimeProfiles(ctx.config.realtimeProfilesFile);
  const watch = new PhoneTokenWatch(
    ctx.clock,
    (ids) => phoneTokenStatuses(ctx.db.prisma, ids),
    (err) => app.log.warn({ err }, 'revocation check of phone calls failed'),
  );
  app.addHook('onClose', async () => watch.stop());

  for (const dialect of CARRIER_DIALECTS) {
    const route = `/phone/${dialect.name}/:token`;
    app.route({
      method: 'GET',
      url: route,
      config: {
        metered: true,
        session: true,
        credential: async (request) => {
          const grant = await verifyPhoneToken(ctx.db.prisma, (request.params as { token?: string }).token);
          request.phoneGrant = grant;
          return { keyHash: grant.keyHash };
        },
      },
      preValidation: async (request) => {
        if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
        const admission = await admitRealtime(ctx, profiles, request.auth, { model: request.phoneGrant!.profile });
        request.modelId = admission.modelId;
        releaseOnClose(admission, request.raw.socket);
        request.phoneAdmission = admission;
      },
      handler: async () => {
        throw upgradeRequired();
      },
      wsHandler: (socket, request) => {
        const admission = request.phoneAdmission!;
        const grant = request.phoneGrant!;
        // Gone already: its admission was given back with the connection (releaseOnClose).
        if (socket.readyState !== socket.OPEN) return;
        socket.once('close', ctx.metrics.webSocketOpened(route));
        ctx.lifecycle.trackSocket(socket);
        const link = new WebSocketLink(socket, ctx.clock, {
          message: (data, isBinary) => bridge.message(data, isBinary),
          closed: () => bridge.closed(),
        });
        const call: CallAdmission = {
          open: (outbox, playout) => {
            // From here the session settles the hold (its audio leg releases it after its last debit).
            request.raw.socket.off('close', admission.hold.release);
            const tokenRevoked = new AbortController();
            socket.once('close', watch.add(grant.tokenId, tokenRevoked));
            return startRealtimeSession(ctx, admission, outbox, {
              auth: request.auth,
              requestId: request.id,
              log: request.log,
              profiles,
              revoked: tokenRevoked.signal,
              playout,
            });
          },
        };
        // Admitted before the upgrade: the start's parameters change nothing.
        const bridge = new PhoneBridge(link, dialect, { admit: () => Promise.resolve(call), clock: ctx.clock, log: request.log });
      },
    });
  }
}
