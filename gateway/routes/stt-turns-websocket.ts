// GET /stt/turns/websocket: streaming transcription in Cartesia's auto-finalize protocol (the
// events and messages: gateway/stt/dialects/cartesia-turns.ts), as LiveKit's Cartesia STT and
// cartesia-js `stt.autoFinalize` speak it. The session, its admission before the upgrade and its
// metering are every streaming route's (gateway/stt/open-session.ts); this route reads Cartesia's
// parameters: model, encoding, sample_rate, keyterm (repeated), language, the turn thresholds
// turn_start_threshold / turn_eager_end_threshold / turn_end_threshold / turn_end_timeout_ms,
// and Cartesia-Version (header) or cartesia_version (query). Turns are always the gateway's
// detector's: it gives the eager ends and resumes, and follows `config` messages.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import { accessTokenCredential } from '../core/access-token-credential.ts';
import { cartesiaTurnsDialect } from '../stt/dialects/cartesia-turns.ts';
import { audioFormatFromQuery, streamingModel, sttSessionRoute, type SessionPlan } from '../stt/open-session.ts';
import { turnSettingsFromQuery } from '../stt/turn-params.ts';
import { queryKeyterms } from './transcriptions.ts';

/** Cartesia's API version: a date (every version is served alike; anything else is a client's mistake worth naming). */
const VERSION = /^\d{4}-\d{2}-\d{2}$/;

function planTurnsSession(ctx: GatewayContext, request: FastifyRequest): SessionPlan {
  const q = request.query as Record<string, string | string[] | undefined>;
  const one = (name: string) => (Array.isArray(q[name]) ? q[name][0] : q[name]);
  // The query wins over the header, as on Cartesia's sockets.
  const version = one('cartesia_version') ?? request.headers['cartesia-version'];
  if (version !== undefined && (typeof version !== 'string' || !VERSION.test(version))) {
    throw new ServiceError('invalid_request', 'Cartesia-Version (or cartesia_version) must be a date like 2026-03-01.', 'cartesia_version');
  }
  const turns = turnSettingsFromQuery(one, true);
  const model = streamingModel(ctx, one('model'), request.auth);
  const { sampleRate, encoding } = audioFormatFromQuery(one, model);
  return {
    model,
    sampleRate,
    encoding,
    turnSource: 'gateway',
    turns,
    keyterms: queryKeyterms(q),
    language: one('language'),
    dialect: cartesiaTurnsDialect(request.id, turns),
  };
}

/** Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes). */
export function registerSttTurnsWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.route(
    sttSessionRoute(ctx, {
      url: '/stt/turns/websocket',
      plan: (request) => planTurnsSession(ctx, request),
      usageRoute: 'stt.turns.websocket',
      credential: accessTokenCredential(ctx, 'stt', true),
    }),
  );
}
