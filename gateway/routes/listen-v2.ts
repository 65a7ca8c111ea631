// Deepgram Flux: WS /v2/listen, turn-based transcription (the events and messages:
// gateway/stt/dialects/deepgram-flux.ts), for Deepgram's clients (`@deepgram/sdk` 5.x
// `listen.v2.connect`) changed only in their base URL. The session, its admission before the
// upgrade and its metering (per second of audio) are every streaming route's
// (gateway/stt/open-session.ts); this route reads Flux's parameters: `model` (a registry stt model
// id; Deepgram's `flux-…` names get the default stt model unless one is registered under that
// name), `encoding` linear16 | mulaw | alaw, `sample_rate`, `eot_threshold`, `eager_eot_threshold`,
// `eot_timeout_ms`, `keyterm` (repeated), `language_hint`. Turns are always the gateway's detector's.
// Refusals before the upgrade carry Deepgram's error fields, as on /v1/listen.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import type { Encoding } from '../audio/output-format.ts';
import type { GatewayContext } from '../context.ts';
import { defaultModel } from '../realtime/profiles.ts';
import { parseSampleRateParam } from '../stt/decode-upload.ts';
import { applyFluxThresholds, deepgramFluxDialect } from '../stt/dialects/deepgram-flux.ts';
import { streamingModel, sttSessionRoute, type SessionPlan } from '../stt/open-session.ts';
import { presetSettings } from '../stt/turn-params.ts';
import { useDeepgramErrorShape } from './listen.ts';
import { queryKeyterms } from './transcriptions.ts';

/** The query, as the OpenAPI document describes it (planFlux reads and checks it). */
export const FluxQuery = z.looseObject({
  model: z.string().optional().meta({ description: "A registry stt model id; Deepgram's flux-… names get the default stt model." }),
  encoding: z.enum(['linear16', 'mulaw', 'alaw']).optional(),
  sample_rate: z.coerce.number().int().optional(),
  eot_threshold: z.coerce.number().min(0.5).max(0.9).optional(),
  eager_eot_threshold: z.coerce.number().min(0.3).max(0.9).optional(),
  eot_timeout_ms: z.coerce.number().int().min(500).max(10_000).optional(),
  keyterm: z.union([z.string(), z.array(z.string())]).optional(),
  language_hint: z.string().optional(),
});

const ENCODINGS: Record<string, Encoding> = { linear16: 'pcm_s16le', mulaw: 'pcm_mulaw', alaw: 'pcm_alaw' };

function planFlux(ctx: GatewayContext, request: FastifyRequest): SessionPlan {
  const q = request.query as Record<string, string | string[] | undefined>;
  const one = (name: string) => (Array.isArray(q[name]) ? q[name][0] : q[name]);
  const asked = one('model');
  const registered = asked !== undefined && ctx.registry.all().some((m) => m.id === asked);
  const model = streamingModel(ctx, asked && (registered || !asked.startsWith('flux')) ? asked : defaultModel(ctx.registry, 'stt'), request.auth);
  const rawEncoding = one('encoding') ?? 'linear16';
  const encoding = ENCODINGS[rawEncoding];
  if (!encoding)
    throw new ServiceError('invalid_request', `encoding must be one of ${Object.keys(ENCODINGS).join(', ')} (got ${JSON.stringify(rawEncoding)}).`, 'encoding');
  const rawRate = one('sample_rate');
  const sampleRate = parseSampleRateParam(rawRate === undefined || rawRate === '' ? '16000' : rawRate, model.sampleRates)!;
  const turns = {
    ...applyFluxThresholds(presetSettings('balanced', { eager: false }), {
      eot_threshold: one('eot_threshold'),
      eager_eot_threshold: one('eager_eot_threshold'),
      eot_timeout_ms: one('eot_timeout_ms'),
    }),
    // An EagerEndOfTurn carries the turn's words, as EndOfTurn will if the turn does not resume
    // (Flux's promise; clients start their answer on it): they are made final before it goes out.
    finalizeOnEagerEnd: true,
  };
  const keyterms = queryKeyterms(q);
  return {
    model,
    sampleRate,
    encoding,
    turnSource: 'gateway',
    turns,
    keyterms,
    language: one('language_hint'),
    dialect: deepgramFluxDialect(request.id, turns, keyterms),
  };
}

/** Must be registered in the scope where @fastify/websocket is (registerSttWebSocketRoutes). */
export async function registerListenV2Routes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  await app.register(async (flux) => {
    useDeepgramErrorShape(flux);
    flux.route(sttSessionRoute(ctx, { url: '/v2/listen', plan: (request) => planFlux(ctx, request), usageRoute: 'listen.v2.websocket' }));
  });
}
