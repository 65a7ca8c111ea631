// OpenAI's Realtime API over WebRTC (docs/realtime.md "WebRTC"):
// - POST /v1/realtime/client_secrets: a backend mints, with its key, a short-lived secret
//   (`ek_…`) bound to its org, that key and the session's settings, for a browser to use.
// - POST /v1/realtime/calls: the client's SDP offer (`application/sdp`, or multipart `sdp` and
//   `session`), authorized by a client secret or a key; answered 201 with the SDP answer and
//   `Location: /v1/realtime/calls/{call_id}`. Refused before any media: 401 (a wrong, altered or
//   expired secret; a revoked key), 400 (not an offer with Opus and a data channel; bad
//   settings), 404/503 (the model), 429 (the key's or org's open sessions), 402 (balance), 503
//   (the process's calls).
// - POST /v1/realtime/calls/{call_id}/hangup: ends the call.
// The call itself (peer connection, session, audio) is gateway/realtime/realtime-call.ts.
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import { hashApiKey } from '../../server/services/keys/api-key-format.ts';
import type { ClientSecretClaims } from '../../server/services/keys/client-secret-format.ts';
import { DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, MIN_TTL_SECONDS, isClientSecret } from '../../server/services/keys/client-secret-format.ts';
import { createClientSecret } from '../../server/services/keys/create-client-secret.ts';
import { verifyClientSecret } from '../../server/services/keys/verify-client-secret.ts';
import type { GatewayContext } from '../context.ts';
import { presentedKey } from '../core/gateway-core.ts';
import { admitRealtime, resolveRealtimeAsk, type RealtimeAsk } from '../realtime/open-realtime.ts';
import { loadRealtimeProfiles, type RealtimeProfile } from '../realtime/profiles.ts';
import { RealtimeCall } from '../realtime/realtime-call.ts';
import type { RealtimeCalls } from '../realtime/realtime-calls.ts';
import { applySessionUpdate, defaultConfig, sessionWire } from '../realtime/session-config.ts';
import { deferRequestLogRow } from '../request-log/request-log-hooks.ts';
import { MAX_OFFER_BYTES, answerOffer, checkOffer } from '../webrtc/peer-connection.ts';
import { loadWebRtc } from '../webrtc/webrtc-libs.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** POST /v1/realtime/calls with a client secret: what it carries. */
    clientSecret?: ClientSecretClaims;
  }
}

const CALL_URLS = ['/v1/realtime/calls', '/v1/realtime/calls/:call_id/hangup'];
const CORS = { 'access-control-allow-origin': '*', 'access-control-expose-headers': 'location, x-request-id, retry-after' };
const PREFLIGHT = {
  ...CORS,
  'access-control-allow-methods': 'POST',
  'access-control-allow-headers': 'authorization, content-type',
  'access-control-max-age': '600',
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A bearer that is a client secret: its claims (401 if wrong or expired), and the key it stands for. */
async function clientSecretCredential(ctx: GatewayContext, request: FastifyRequest): Promise<{ keyHash: string } | null> {
  const bearer = presentedKey(request);
  if (!bearer || !isClientSecret(bearer)) return null;
  const claims = await verifyClientSecret(ctx.db.prisma, bearer, ctx.clock.now());
  request.clientSecret = claims;
  return { keyHash: claims.keyHash };
}

/** OpenAI's default model: a session that names none gets the first realtime profile (profiles.ts). */
const DEFAULT_MODEL = 'gpt-realtime';

/** What a session's settings ask of the admission: its model (OpenAI's default when none), and whether it is a transcription session. */
function askOf(session: Obj, fallbackModel?: unknown): RealtimeAsk {
  if (session.type === 'transcription') return { intent: 'transcription', model: typeof session.model === 'string' ? session.model : undefined };
  const model = typeof session.model === 'string' ? session.model : typeof fallbackModel === 'string' ? fallbackModel : DEFAULT_MODEL;
  return { model };
}

/** The settings checked as a session.update of a new session would be (400 naming the field). */
function checkSettings(session: Obj): void {
  applySessionUpdate(defaultConfig(session.type === 'transcription' ? 'transcription' : 'realtime', null), session);
}

export async function registerRealtimeCallRoutes(app: FastifyInstance, ctx: GatewayContext, calls: RealtimeCalls): Promise<void> {
  const profiles: Map<string, RealtimeProfile> = loadRealtimeProfiles(ctx.config.realtimeProfilesFile);
  await app.register(multipart, { limits: { fileSize: MAX_OFFER_BYTES, files: 1, fields: 4, fieldSize: MAX_OFFER_BYTES, parts: 4 } });
  app.addContentTypeParser('application/sdp', { parseAs: 'string', bodyLimit: MAX_OFFER_BYTES }, (_request, body, done) => done(null, body));

  app.post('/v1/realtime/client_secrets', {
    config: {
      // Minted with a key only: a secret does not mint another.
      credential: async (request) => {
        const bearer = presentedKey(request);
        if (bearer && isClientSecret(bearer))
          throw new ServiceError('invalid_api_key', 'A client secret cannot mint client secrets: mint them from your backend with an API key.');
        return null;
      },
    },
    handler: async (request) => {
      const body = (request.body ?? {}) as unknown;
      if (!isObj(body)) throw new ServiceError('invalid_request', 'The body must be a JSON object: {expires_after?, session?}.');
      const session = body.session ?? { type: 'realtime' };
      if (!isObj(session)) throw new ServiceError('invalid_request', 'session: must be an object.', 'session');
      let ttlSeconds: number | undefined;
      if (body.expires_after !== undefined) {
        const after = body.expires_after;
        if (!isObj(after)) throw new ServiceError('invalid_request', 'expires_after: must be an object {anchor, seconds}.', 'expires_after');
        if (after.anchor !== undefined && after.anchor !== 'created_at')
          throw new ServiceError('invalid_request', 'expires_after.anchor: must be "created_at".', 'expires_after.anchor');
        const seconds = after.seconds;
        if (seconds !== undefined && (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < MIN_TTL_SECONDS || seconds > MAX_TTL_SECONDS))
          throw new ServiceError(
            'invalid_request',
            `expires_after.seconds: must be an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS} (default ${DEFAULT_TTL_SECONDS}).`,
            'expires_after.seconds',
          );
        ttlSeconds = seconds;
      }
      checkSettings(session);
      const ask = askOf(session);
      const resolved = resolveRealtimeAsk(ctx, profiles, ask, request.auth);
      const { value, expiresAt } = await createClientSecret(ctx.db.prisma, {
        orgId: request.auth.orgId,
        keyHash: hashApiKey(presentedKey(request)!),
        session,
        ttlSeconds,
        now: ctx.clock.now(),
      });
      // The call follows: werift loads now rather than on its offer.
      void loadWebRtc().catch(() => {});
      const kind = resolved.profile ? 'realtime' : 'transcription';
      let config = defaultConfig(kind, resolved.profile?.id ?? null);
      if (resolved.profile?.instructions) config.instructions = resolved.profile.instructions;
      config = applySessionUpdate(config, session);
      return {
        value,
        expires_at: expiresAt,
        session: sessionWire('sess_pending', config, { stt: resolved.stt.id, llm: resolved.profile?.llm, expiresAt }),
      };
    },
  });

  // A page calls /v1/realtime/calls from its own origin with a client secret (no cookies): CORS
  // for any origin, as OpenAI's. Not for client_secrets: minting is a backend's, with its key.
  for (const url of CALL_URLS)
    app.route({ method: 'OPTIONS', url, config: { public: true }, handler: (_request, reply) => reply.code(204).headers(PREFLIGHT).send() });
  app.addHook('onSend', (request, reply, payload, done) => {
    if (CALL_URLS.includes(request.routeOptions.url ?? '')) reply.headers(CORS);
    done(null, payload);
  });

  app.post('/v1/realtime/calls', {
    config: { metered: true, session: true, credential: (request) => clientSecretCredential(ctx, request) },
    handler: async (request, reply) => {
      const secret = request.clientSecret;
      // A secret names its org: the key it stands for must still be that org's.
      if (secret && secret.orgId !== request.auth.orgId) throw new ServiceError('invalid_api_key', 'This client secret does not belong to the key it names.');
      const { sdp, session } = await readOffer(request);
      checkOffer(sdp);
      const settings = [secret?.session, session].filter(isObj);
      for (const s of settings) checkSettings(s);
      const q = request.query as Record<string, unknown>;
      const merged: Obj = Object.assign({}, ...settings);
      const ask = askOf(merged, q.model);
      const place = calls.reserve();
      let admission;
      try {
        admission = await admitRealtime(ctx, profiles, request.auth, ask);
      } catch (e) {
        place.release();
        throw e;
      }
      request.modelId = admission.modelId;
      let call: RealtimeCall;
      try {
        const libs = await loadWebRtc();
        const peer = await answerOffer(libs, ctx.config.webrtc, sdp);
        let finishLog = () => {};
        call = new RealtimeCall({
          ctx,
          libs,
          peer,
          admission,
          start: { auth: request.auth, requestId: request.id, log: request.log, profiles, initial: settings },
          onEnd: (ended) => {
            calls.remove(ended);
            finishLog();
          },
        });
        finishLog = deferRequestLogRow(ctx, request, reply);
      } catch (e) {
        place.release();
        admission.ticket.release();
        admission.hold.release();
        throw e;
      }
      place.add(call);
      return reply.code(201).header('location', `/v1/realtime/calls/${call.id}`).type('application/sdp').send(call.answerSdp);
    },
  });

  app.post('/v1/realtime/calls/:call_id/hangup', {
    config: { credential: (request) => clientSecretCredential(ctx, request) },
    handler: async (request, reply) => {
      const { call_id: id } = request.params as { call_id: string };
      calls.find(id, request.auth.orgId).end(1000, 'hangup');
      return reply.code(200).send();
    },
  });
}

/** The offer and optional settings: an `application/sdp` body, or multipart `sdp` (field or file) and `session` (JSON). */
async function readOffer(request: FastifyRequest): Promise<{ sdp: string; session: Obj | undefined }> {
  if (typeof request.body === 'string') return { sdp: request.body, session: undefined };
  if (!request.isMultipart())
    throw new ServiceError(
      'unsupported_media_type',
      'Send the SDP offer as the body with Content-Type: application/sdp, or as multipart/form-data with the fields sdp and session.',
    );
  let sdp: string | undefined;
  let session: Obj | undefined;
  try {
    for await (const part of request.parts()) {
      const text = part.type === 'file' ? (await part.toBuffer()).toString('utf8') : String(part.value);
      if (part.fieldname === 'sdp') sdp = text;
      else if (part.fieldname === 'session') {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new ServiceError('invalid_request', 'session: must be a JSON object.', 'session');
        }
        if (!isObj(parsed)) throw new ServiceError('invalid_request', 'session: must be a JSON object.', 'session');
        session = parsed;
      }
    }
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    throw new ServiceError('invalid_request', `The multipart/form-data body could not be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!sdp) throw new ServiceError('invalid_request', 'sdp: the multipart body has no sdp field (the SDP offer).', 'sdp');
  return { sdp, session };
}
