// GET /stt/websocket: streaming transcription in the gateway's own protocol (docs/stt.md).
// Everything is checked before the upgrade is accepted (key, rate limit, balance in
// the admission hook; model, sample_rate, encoding, turn_detection, the session caps and the first
// second's credit in the route's preValidation), and a rejection is a plain HTTP response carrying
// the error envelope. What every streaming-transcription route shares is gateway/stt/open-session.ts.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import { accessTokenCredential } from '../core/access-token-credential.ts';
import { selectSubprotocol } from '../core/gateway-core.ts';
import { audioFormatFromQuery, streamingModel, sttSessionRoute, type SessionPlan } from '../stt/open-session.ts';
import { cartesiaSttDialect, svcDialect, withFailoverEvents } from '../stt/dialect.ts';
import { turnSettingsFromQuery } from '../stt/turn-params.ts';
import { queryKeyterms } from './transcriptions.ts';

const TURN_SOURCES = ['auto', 'gateway'] as const;

function planSession(ctx: GatewayContext, request: FastifyRequest): SessionPlan {
  const q = request.query as Record<string, string | string[] | undefined>;
  const one = (name: string) => (Array.isArray(q[name]) ? q[name][0] : q[name]);
  const eager = one('eager_end');
  if (eager !== undefined && eager !== 'true' && eager !== 'false')
    throw new ServiceError('invalid_request', `eager_end must be true or false (got ${JSON.stringify(eager)}).`, 'eager_end');
  // Cartesia's threshold names and meaning (gateway/stt/turn-params.ts); an eager threshold turns eager ends on.
  const turns = turnSettingsFromQuery(one, eager === 'true' || one('turn_eager_end_threshold') !== undefined);
  const model = streamingModel(ctx, one('model'), request.auth);
  const { sampleRate, encoding } = audioFormatFromQuery(one, model);
  const keyterms = queryKeyterms(q);
  const turnSource = (one('turn_source') ?? 'auto') as SessionPlan['turnSource'];
  if (!TURN_SOURCES.includes(turnSource))
    throw new ServiceError('invalid_request', `turn_source must be auto or gateway (got ${JSON.stringify(turnSource)}).`, 'turn_source');
  // Cartesia's clients send their API version: they get Cartesia's fields too (gateway/stt/dialect.ts).
  const cartesia = request.headers['cartesia-version'] !== undefined || one('cartesia_version') !== undefined;
  const failoverEvents = one('failover_events') ?? 'false';
  if (failoverEvents !== 'true' && failoverEvents !== 'false')
    throw new ServiceError('invalid_request', `failover_events must be true or false (got ${JSON.stringify(failoverEvents)}).`, 'failover_events');
  // Off by default: a client that did not ask never sees an event it does not know (docs/failover.md, "Streaming STT").
  const base = cartesia ? cartesiaSttDialect(request.id) : failoverEvents === 'true' ? svcDialect : undefined;
  const dialect = base && failoverEvents === 'true' ? withFailoverEvents(base, cartesia ? request.id : undefined) : base;
  return { model, sampleRate, turnSource, encoding, turns, keyterms, language: one('language'), dialect };
}

export async function registerSttWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  // preClose: sessions are not closed when the server starts closing; a shutdown lets them
  // run through its grace period, then ends them with 1001 (gateway/lifecycle.ts).
  await app.register(websocket, { options: { maxPayload: 1024 * 1024, handleProtocols: selectSubprotocol }, preClose: async () => {} });
  // A refused upgrade is answered on the raw socket, which no HTTP server manages any more: close
  // it once the response is out. (@fastify/websocket closes it only when its own onRequest hook
  // ran, which a refusal by the admission hook -- 401, 402, 429 -- skips: those sockets stayed
  // open, half-open for good once the client had closed its side, and held up the server's close.)
  app.addHook('onResponse', async (request, reply) => {
    const socket = request.raw.socket;
    if (request.headers.upgrade && reply.statusCode !== 101 && socket && !socket.destroyed) socket.end(() => socket.destroy());
  });
  app.route(
    sttSessionRoute(ctx, {
      url: '/stt/websocket',
      plan: (request) => planSession(ctx, request),
      usageRoute: 'stt.websocket',
      credential: accessTokenCredential(ctx, 'stt', true),
    }),
  );
}
