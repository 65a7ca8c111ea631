// GET /stt/websocket: streaming transcription. Everything is checked before the upgrade is
// accepted (key, rate limit, balance in the admission hook; model, sample_rate, encoding,
// turn_detection, the session caps and the first second's credit here), and a rejection is a
// plain HTTP response carrying the error envelope.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import { ENCODINGS, type Encoding } from '../audio/output-format.js';
import { ServiceError } from '../../server/services/errors.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.js';
import { parseSampleRateParam } from '../stt/decode-upload.js';
import { METER_EVERY_MS, runSttSession, type OpenedStream } from '../stt/stt-session.js';
import { perSecondCostMicros } from '../../server/services/credits/pricing.js';
import type { Ticket } from '../core/admission.js';
import type { CreditHold } from '../core/gateway-core.js';
import type { TurnDetection } from '../stt/turn-detector.js';
import { tryUpstreams, recordAnswerFailure } from '../upstreams/try-upstreams.js';
import type { StreamingTranscriptionCapability } from '../upstreams/contract.js';
import { parseKeyterms } from './transcriptions.js';

const TURN_DETECTION = ['balanced', 'patient', 'responsive'] as const;

const TURN_SOURCES = ['auto', 'gateway'] as const;

interface SessionPlan {
  /** The model, with only its upstreams whose protocol streams (tried in order at open). */
  model: ModelEntry;
  sampleRate: number;
  /** auto: an engine that finds turns reports its own; gateway: the gateway's detector always. */
  turnSource: (typeof TURN_SOURCES)[number];
  encoding: Encoding;
  turnDetection: TurnDetection;
  keyterms: string[];
  language: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    sttPlan?: SessionPlan;
    /** The session's place under the caps and its first second of credit, both held until the socket closes. */
    sttAdmission?: { ticket: Ticket; hold: CreditHold };
  }
}

function planSession(ctx: GatewayContext, request: FastifyRequest): SessionPlan {
  const q = request.query as Record<string, string | string[] | undefined>;
  const one = (name: string) => (Array.isArray(q[name]) ? q[name][0] : q[name]);
  const turnDetection = (one('turn_detection') ?? 'balanced') as TurnDetection;
  if (!TURN_DETECTION.includes(turnDetection)) {
    throw new ServiceError('invalid_turn_detection', `turn_detection must be balanced, patient or responsive (got ${JSON.stringify(one('turn_detection'))}).`, 'turn_detection');
  }
  const model = ctx.registry.resolve(one('model'), 'stt');
  // Absent or empty (as a batch form field) is the default, checked like a given rate.
  const rawRate = one('sample_rate');
  const sampleRate = parseSampleRateParam(rawRate === undefined || rawRate === '' ? '16000' : rawRate, model.sampleRates)!;
  const encoding = (one('encoding') ?? 'pcm_s16le') as Encoding;
  if (!ENCODINGS.includes(encoding)) throw new ServiceError('invalid_request', `encoding must be one of ${ENCODINGS.join(', ')}.`, 'encoding');
  const keyterms = Array.isArray(q.keyterms) ? q.keyterms.flatMap(parseKeyterms) : parseKeyterms(one('keyterms'));
  const turnSource = (one('turn_source') ?? 'auto') as SessionPlan['turnSource'];
  if (!TURN_SOURCES.includes(turnSource)) throw new ServiceError('invalid_request', `turn_source must be auto or gateway (got ${JSON.stringify(turnSource)}).`, 'turn_source');
  const streaming = { ...model, upstreams: model.upstreams.filter((u) => streamingOf(ctx, u)) };
  // Refused before the upgrade when nothing can serve it (upstreamOrder: 503 model_offline when none is healthy).
  if (streaming.upstreams.length === 0) {
    throw new ServiceError('model_offline', `The model '${model.id}' has no upstream that can stream transcription; use POST /v1/audio/transcriptions.`);
  }
  ctx.registry.upstreamOrder(streaming);
  return { model: streaming, sampleRate, turnSource, encoding, turnDetection, keyterms, language: one('language') };
}

const streamingOf = (ctx: GatewayContext, upstream: UpstreamEntry): StreamingTranscriptionCapability | undefined => ctx.protocols.get(upstream.protocol)?.streamingTranscription;

/**
 * Opens the engine's stream on the first upstream that accepts it (an unreachable one is skipped
 * and marked down). Local engines hold a recognizer decoder per session: an org holds at most its share.
 */
async function openEngineStream(ctx: GatewayContext, request: FastifyRequest, plan: SessionPlan, sessionGone: AbortSignal): Promise<OpenedStream & { upstream: UpstreamEntry }> {
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  // The call bounds the opening only: once open, the stream lives as long as the session (which
  // ends it with close()), however long past the deadline that is.
  const opening = new AbortController();
  const onGone = () => opening.abort(sessionGone.reason);
  if (sessionGone.aborted) onGone();
  else sessionGone.addEventListener('abort', onGone, { once: true });
  const deadline = setTimeout(() => opening.abort(new DOMException('The engine did not open the stream in time.', 'TimeoutError')), timeoutMs);
  const call = { signal: opening.signal, timeoutMs };
  try {
    return await openOnFirstUpstream(ctx, request, plan, call);
  } finally {
    clearTimeout(deadline);
    sessionGone.removeEventListener('abort', onGone);
  }
}

function openOnFirstUpstream(ctx: GatewayContext, request: FastifyRequest, plan: SessionPlan, call: { signal: AbortSignal; timeoutMs: number }): Promise<OpenedStream & { upstream: UpstreamEntry }> {
  const { timeoutMs } = call;
  return tryUpstreams(ctx, plan.model, call, async (upstream) => {
    const capability = streamingOf(ctx, upstream)!;
    const engineRate = capability.engineRate(plan.sampleRate);
    const engineTurns = plan.turnSource === 'auto' && capability.findsTurns(upstream);
    const release = upstream.url.startsWith('local:') ? ctx.admission.takeDecoder(request.auth) : undefined;
    try {
      const stream = await capability.open(upstream, { sampleRate: engineRate, language: plan.language, keyterms: plan.keyterms, engineTurns, signal: call.signal, timeoutMs });
      return { stream, engineRate, engineTurns, release, upstream };
    } catch (err) {
      release?.();
      throw err;
    }
  });
}

export async function registerSttWebSocketRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  // preClose: sessions are not closed when the server starts closing; a shutdown lets them
  // run through its grace period, then ends them with 1001 (gateway/lifecycle.ts).
  await app.register(websocket, { options: { maxPayload: 1024 * 1024 }, preClose: async () => {} });
  // A refused upgrade is answered on the raw socket, which no HTTP server manages any more: close
  // it once the response is out. (@fastify/websocket closes it only when its own onRequest hook
  // ran, which a refusal by the admission hook -- 401, 402, 429 -- skips: those sockets stayed
  // open, half-open for good once the client had closed its side, and held up the server's close.)
  app.addHook('onResponse', async (request, reply) => {
    const socket = request.raw.socket;
    if (request.headers.upgrade && reply.statusCode !== 101 && socket && !socket.destroyed) socket.end(() => socket.destroy());
  });
  app.route({
    method: 'GET',
    url: '/stt/websocket',
    config: { metered: true, keyInQuery: true, session: true },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') {
        throw new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');
      }
      const plan = planSession(ctx, request);
      request.sttPlan = plan;
      request.modelId = plan.model.id;
      // Held until the connection closes, however it ends (refused upgrade, client gone, session over).
      const connection = request.raw.socket;
      const ticket = ctx.admission.openStream(request.auth);
      connection.once('close', ticket.release);
      const hold = await ctx.core.reserve(request.auth, perSecondCostMicros(plan.model.prices.picoPerSecond, METER_EVERY_MS));
      connection.once('close', hold.release);
      if (connection.destroyed) {
        ticket.release();
        hold.release();
      }
      request.sttAdmission = { ticket, hold };
    },
    handler: async () => {
      throw new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');
    },
    wsHandler: async (socket, request) => {
      const plan = request.sttPlan!;
      const { ticket, hold } = request.sttAdmission!;
      // From here the session settles the hold: it gives back what is left only after its last
      // debit (released earlier, the credit for that audio would be free for a moment).
      request.raw.socket.off('close', hold.release);
      if (socket.readyState !== socket.OPEN) {
        hold.release(); // gone during the upgrade: no session will settle it
        return;
      }
      socket.once('close', ctx.metrics.webSocketOpened('/stt/websocket'));
      ctx.lifecycle.trackSocket(socket);
      const revoked = new AbortController();
      ticket.bind(revoked);
      // Aborts an engine still opening when the session ends first.
      const sessionGone = new AbortController();
      socket.once('close', () => sessionGone.abort());
      let engineUpstream: UpstreamEntry | undefined;
      runSttSession(socket, {
        sessionId: `stt_${randomBytes(10).toString('hex')}`,
        requestId: request.id,
        model: plan.model,
        sampleRate: plan.sampleRate,
        encoding: plan.encoding,
        turnDetection: plan.turnDetection,
        auth: request.auth,
        core: ctx.core,
        hold,
        openStream: async () => {
          const opened = await openEngineStream(ctx, request, plan, sessionGone.signal);
          engineUpstream = opened.upstream;
          return opened;
        },
        onEngineFailure: (error) => engineUpstream && recordAnswerFailure(ctx, engineUpstream, error),
        engineTimeoutMs: ctx.config.upstreamTimeoutMs,
        revoked: revoked.signal,
        log: request.log,
        idleTimeoutMs: ctx.config.limits.sttIdleMs,
        maxSilenceMs: ctx.config.limits.sttMaxSilenceMs,
        shutdown: ctx.lifecycle.streamsEnded,
        track: (untilBilled) => ctx.lifecycle.track(untilBilled),
        onFirstTranscript: (seconds) => ctx.metrics.firstOutput('stt_first_transcript', plan.model.id, seconds),
      });
    },
  });
}
