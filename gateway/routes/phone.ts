// WS /phone/<carrier>/:token and WS /phone/<carrier> (Twilio, Telnyx, Plivo, Exotel, Vonage): a
// phone carrier's media stream of a call, bridged to a realtime session
// (gateway/phone/phone-bridge.ts; docs/phone.md). Carriers send no headers: a phone token
// (server/services/phone/), which stands for one API key of an org and names the realtime
// profile the caller talks to, comes in one of two places.
//
// - In the path (/phone/<carrier>/<token>): the token is the route's credential
//   (FastifyContextConfig.credential) and the call is admitted as that key is on /v1/realtime,
//   before the upgrade, so a refusal is a plain HTTP answer in the error envelope: the token
//   (401), the key's rate limit and credit, the profile (404), the session caps (429 per key and
//   org, 503 per process), the first second of audio (402).
// - In the stream's custom parameters (/phone/<carrier>, parameter TOKEN_PARAMETER), for
//   deployments that keep secrets out of URLs: the upgrade is accepted, and the same admission
//   runs when the carrier's start brings the parameters; nothing the carrier sends is handled
//   before it, and a refusal closes the socket (1008 and the error's code: invalid_api_key,
//   api_key_disabled, insufficient_quota, rate_limit_exceeded, model_not_found…; 1011 for the
//   gateway's own failures). No start within START_TIMEOUT_MS: 1008 start_timeout.
//
// Either way a revoked token, or key, ends the call within a second (1008 api_key_disabled);
// metering, caps and the socket's bounds are the WebSocket route's.
//
// Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ServiceError } from '../../server/services/errors.ts';
import { phoneTokenStatuses, verifyPhoneToken, type PhoneTokenGrant } from '../../server/services/phone/verify-phone-token.ts';
import type { GatewayContext } from '../context.ts';
import { CARRIER_DIALECTS, type CarrierDialect } from '../phone/carrier-dialects.ts';
import { PhoneBridge, TOKEN_PARAMETER, type AdmitCall, type CallAdmission } from '../phone/phone-bridge.ts';
import { PhoneTokenWatch } from '../phone/phone-token-watch.ts';
import { admitRealtime, releaseOnClose, startRealtimeSession, type RealtimeAdmission } from '../realtime/open-realtime.ts';
import { loadRealtimeProfiles, type RealtimeProfile } from '../realtime/profiles.ts';
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
  const calls: CallsContext = { ctx, profiles, watch };

  for (const dialect of CARRIER_DIALECTS) {
    // The token in the path: admitted before the upgrade.
    const inPath = `/phone/${dialect.name}/:token`;
    app.route({
      method: 'GET',
      url: inPath,
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
        // Admitted already: the start's parameters change nothing.
        const call = openCall(calls, socket, request, request.phoneAdmission!, request.phoneGrant!);
        serve(calls, socket, request, dialect, inPath, () => Promise.resolve(call));
      },
    });

    // The token in the start's custom parameters: admitted after the upgrade, when the start brings it.
    const inParameters = `/phone/${dialect.name}`;
    app.route({
      method: 'GET',
      url: inParameters,
      // No key before the upgrade: the call is admitted from its start (admitFromParameters).
      config: { public: true, session: true },
      preValidation: async (request) => {
        if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      },
      handler: async () => {
        throw upgradeRequired();
      },
      wsHandler: (socket, request) =>
        serve(calls, socket, request, dialect, inParameters, (parameters) => admitFromParameters(calls, socket, request, parameters)),
    });
  }
}

interface CallsContext {
  ctx: GatewayContext;
  profiles: Map<string, RealtimeProfile>;
  watch: PhoneTokenWatch;
}

/** The carrier's socket as a call: its link, its bridge, the process's count and shutdown. */
function serve(calls: CallsContext, socket: WebSocket, request: FastifyRequest, dialect: CarrierDialect, route: string, admit: AdmitCall): void {
  const { ctx } = calls;
  // Gone already: an admission made before the upgrade was given back with the connection (releaseOnClose).
  if (socket.readyState !== socket.OPEN) return;
  socket.once('close', ctx.metrics.webSocketOpened(route));
  ctx.lifecycle.trackSocket(socket);
  const link = new WebSocketLink(socket, ctx.clock, {
    message: (data, isBinary) => bridge.message(data, isBinary),
    closed: () => bridge.closed(),
  });
  const bridge = new PhoneBridge(link, dialect, { admit, clock: ctx.clock, log: request.log });
}

/**
 * The admission of a call whose token came in its start's custom parameters: the token, then
 * as for any key (its state, rate limit and balance), the profile, the session caps and the
 * first second of audio, as the path's route checks them before its upgrade.
 */
async function admitFromParameters(
  calls: CallsContext,
  socket: WebSocket,
  request: FastifyRequest,
  parameters: Readonly<Record<string, string>>,
): Promise<CallAdmission> {
  const { ctx, profiles } = calls;
  const grant = await verifyPhoneToken(ctx.db.prisma, parameters[TOKEN_PARAMETER]);
  const auth = await ctx.core.admit({ keyHash: grant.keyHash }, true);
  const admission = await admitRealtime(ctx, profiles, auth, { model: grant.profile });
  // Given back when the connection closes (at once if it has closed while this ran).
  releaseOnClose(admission, request.raw.socket);
  // The request log's row for the call, as the path's route has it from its admission hook.
  request.auth = auth;
  request.modelId = admission.modelId;
  ctx.requestLog?.opened({ orgId: auth.orgId, requestId: request.id });
  return openCall(calls, socket, request, admission, grant);
}

/** An admitted call: its session starts on the bridge's outbox, watched for the token's revocation. */
function openCall(calls: CallsContext, socket: WebSocket, request: FastifyRequest, admission: RealtimeAdmission, grant: PhoneTokenGrant): CallAdmission {
  const { ctx, profiles, watch } = calls;
  return {
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
}
