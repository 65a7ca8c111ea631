// What every streaming-transcription route does around its session (gateway/stt/stt-session.ts),
// whatever protocol it speaks: /stt/websocket (ours), /stt/turns/websocket (Cartesia's),
// /v1/listen (Deepgram's). A route only reads its own parameters into a SessionPlan; the rest is
// here, once: everything is checked before the upgrade is accepted (key, rate limit and balance in
// the admission hook; the plan, the session caps and the first second's credit in preValidation),
// so a refusal is a plain HTTP response carrying the error envelope; then the socket is bound to
// the session through a WebSocketLink (pings, the bounded outgoing buffer), the plan's dialect
// writing the session's events and reading the client's text messages; and the engine is opened
// on the first upstream that accepts it, at the first audio.
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger, FastifyContextConfig, FastifyRequest, RouteOptions } from 'fastify';
import type { WebSocket } from 'ws';
import { ENCODINGS, type Encoding } from '../audio/output-format.ts';
import { parseSampleRateParam } from './decode-upload.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { ModelEntry, ModelScope, UpstreamEntry } from '../registry/model-registry.ts';
import type { StreamingTranscriptionCapability } from '../upstreams/contract.ts';
import { recordFailover, recordHedge } from '../core/failover.ts';
import { recordAnswerFailure, tryUpstreams } from '../core/try-upstreams.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { encodeSttEvent, svcDialect, type SttDialect } from './dialect.ts';
import type { OpenedStream } from './engine-stream.ts';
import type { SttEvent } from './stt-events.ts';
import { METER_EVERY_MS, SttSession } from './stt-session.ts';
import type { TurnSettings } from './turn-detector.ts';

export interface SessionPlan {
  /** The model, with only its upstreams whose protocol streams (tried in order at open). */
  model: ModelEntry;
  sampleRate: number;
  encoding: Encoding;
  /** auto: an engine that finds turns reports its own; gateway: the gateway's detector always. */
  turnSource: 'auto' | 'gateway';
  turns: TurnSettings;
  keyterms: string[];
  language: string | undefined;
  /** The socket's events and commands (default: the gateway's own); one per session, it may keep state. */
  dialect?: SttDialect;
}

/** A session to start: its plan, whose it is, its first interval of credit, and when it must end at once. */
export interface PlannedSession {
  plan: SessionPlan;
  auth: RequestAuth;
  requestId: string;
  log: FastifyBaseLogger;
  hold: CreditHold;
  revoked: AbortSignal;
  /** The usage records' `route`. */
  usageRoute: string;
  /** false: the session's turns are not request-log rows of their own (a realtime session logs its turns itself). */
  logTurns?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    sttPlan?: SessionPlan;
    /** The session's place under the caps and its first second of credit, both held until the socket closes. */
    sttAdmission?: { ticket: Ticket; hold: CreditHold };
  }
}

const streamingOf = (ctx: GatewayContext, upstream: UpstreamEntry): StreamingTranscriptionCapability | undefined =>
  ctx.protocols.get(upstream.protocol)?.streamingTranscription;

/**
 * The stt model `modelId` with only its upstreams that stream: 404 model_not_found (unknown or
 * not stt), 503 model_offline when none streams or none is healthy -- refused before the upgrade.
 */
export function streamingModel(ctx: GatewayContext, modelId: unknown, scope: ModelScope | null): ModelEntry {
  const model = ctx.registry.resolve(modelId, 'stt', scope);
  const streaming = { ...model, upstreams: model.upstreams.filter((u) => streamingOf(ctx, u)) };
  if (streaming.upstreams.length === 0) {
    throw new ServiceError('model_offline', `The model '${model.id}' has no upstream that can stream transcription; use POST /v1/audio/transcriptions.`);
  }
  ctx.registry.upstreamOrder(streaming);
  return streaming;
}

/** The audio a socket's query announces: `sample_rate` (default 16000, within the model's rates) and `encoding` (default pcm_s16le). */
export function audioFormatFromQuery(one: (name: string) => string | undefined, model: ModelEntry): { sampleRate: number; encoding: Encoding } {
  // Absent or empty (as a batch form field) is the default, checked like a given rate.
  const rawRate = one('sample_rate');
  const sampleRate = parseSampleRateParam(rawRate === undefined || rawRate === '' ? '16000' : rawRate, model.sampleRates)!;
  const encoding = (one('encoding') ?? 'pcm_s16le') as Encoding;
  if (!ENCODINGS.includes(encoding)) throw new ServiceError('invalid_request', `encoding must be one of ${ENCODINGS.join(', ')}.`, 'encoding');
  return { sampleRate, encoding };
}

const upgradeRequired = () => new ServiceError('upgrade_required', 'This is a WebSocket route: connect with a WebSocket client (Upgrade: websocket).');

/**
 * The route of a streaming-transcription session at `url`: `plan` reads the route's parameters
 * (throwing ServiceErrors, answered before the upgrade). Must be added in the scope where
 * @fastify/websocket is registered (registerSttWebSocketRoutes).
 */
export function sttSessionRoute(
  ctx: GatewayContext,
  spec: {
    url: string;
    plan: (request: FastifyRequest) => SessionPlan;
    /** The usage records' `route`. */
    usageRoute: string;
    /** A credential the route takes besides keys (Cartesia's access tokens on Cartesia's sockets). */
    credential?: FastifyContextConfig['credential'];
  },
): RouteOptions {
  return {
    method: 'GET',
    url: spec.url,
    config: { metered: true, keyInQuery: true, session: true, credential: spec.credential },
    preValidation: async (request) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') throw upgradeRequired();
      const plan = spec.plan(request);
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
      throw upgradeRequired();
    },
    wsHandler: (socket: WebSocket, request: FastifyRequest) => startSession(ctx, socket, request, spec.url, spec.usageRoute),
  };
}

function startSession(ctx: GatewayContext, socket: WebSocket, request: FastifyRequest, url: string, usageRoute: string): void {
  const { ticket, hold } = request.sttAdmission!;
  // From here the session settles the hold: it gives back what is left only after its last
  // debit (released earlier, the credit for that audio would be free for a moment).
  request.raw.socket.off('close', hold.release);
  if (socket.readyState !== socket.OPEN) {
    hold.release(); // gone during the upgrade: no session will settle it
    return;
  }
  socket.once('close', ctx.metrics.webSocketOpened(url));
  ctx.lifecycle.trackSocket(socket);
  const revoked = new AbortController();
  ticket.bind(revoked);
  const plan = request.sttPlan!;
  const dialect = plan.dialect ?? svcDialect;
  // The link's handlers run only once this function has returned (socket events come later).
  const link = new WebSocketLink(socket, ctx.clock, {
    message: (data, isBinary) => (isBinary ? session.audio(data) : session.command(dialect.command(data.toString('utf8')))),
    closed: () => session.close(),
  });
  const session = startPlannedSession(
    ctx,
    link.outbox((event: SttEvent) => encodeSttEvent(dialect, event)),
    { plan, auth: request.auth, requestId: request.id, log: request.log, hold, revoked: revoked.signal, usageRoute },
  );
}

/**
 * A planned session, its first interval of credit held, sending its events to `outbox` (a
 * client's socket, or a realtime session in process). Whoever carries it feeds it audio and
 * commands, and calls close() when the transport is gone.
 */
export function startPlannedSession(ctx: GatewayContext, outbox: Outbox<SttEvent>, s: PlannedSession): SttSession {
  const { plan } = s;
  const failedOver = new Set<string>();
  const ref = { orgId: s.auth.orgId, requestId: s.requestId };
  return new SttSession(
    {
      sessionId: `stt_${randomBytes(10).toString('hex')}`,
      requestId: s.requestId,
      model: plan.model,
      sampleRate: plan.sampleRate,
      encoding: plan.encoding,
      turns: plan.turns,
      usageRoute: s.usageRoute,
      auth: s.auth,
      core: ctx.core,
      hold: s.hold,
      openStream: async (sessionGone, failed, only) => {
        const model = { ...plan.model, upstreams: plan.model.upstreams.filter((u) => (only ? u.id === only : !failed.includes(u.id))) };
        return openEngineStream(ctx, s.auth, { ...plan, model }, sessionGone);
      },
      canSwitch: (failed) => ctx.registry.healthyUpstreams(plan.model).some((u) => !failed.includes(u.id)),
      hedge: () => hedgePair(ctx, plan.model),
      onHedge: ({ won, lost, failure }) => {
        recordHedge(ctx, { won, lost });
        if (!failure) return;
        // The other engine failed while racing: out for new work like any engine that failed mid-session; the client saw nothing of it.
        failedOver.add(lost.id);
        recordFailover(ctx, { from: lost, reason: failure.reason, phase: 'before_first_output', error: failure.error, ref, log: s.log });
      },
      // A failover has recorded the upstream that failed: the last one is recorded here only if it failed on its own.
      onEngineFailure: (error, upstream) => upstream && !failedOver.has(upstream.id) && recordAnswerFailure(ctx, upstream, error),
      onFailover: ({ from, reason, phase, error }) => {
        if (!from) return;
        failedOver.add(from.id);
        recordFailover(ctx, { from, reason, phase, error, ref, log: s.log });
      },
      stallMs: ctx.config.limits.sttStallMs,
      finalizeHedgeMs: ctx.config.limits.sttFinalizeHedgeMs,
      logTurn: s.logTurns === false ? undefined : (turn) => ctx.requestLog?.turn(ref, turn),
      clock: ctx.clock,
      engineTimeoutMs: ctx.config.upstreamTimeoutMs,
      revoked: s.revoked,
      log: s.log,
      idleTimeoutMs: ctx.config.limits.sttIdleMs,
      maxSilenceMs: ctx.config.limits.sttMaxSilenceMs,
      shutdown: ctx.lifecycle.streamsEnded,
      track: (untilBilled) => ctx.lifecycle.track(untilBilled),
      onFirstTranscript: (seconds) => ctx.metrics.firstOutput('stt_first_transcript', plan.model.id, seconds),
    },
    outbox,
  );
}

/** Hedging (the model's capabilities.hedge): the first two upstreams to try, or null (off, or fewer than two with a closed circuit). */
function hedgePair(ctx: GatewayContext, model: ModelEntry): [UpstreamEntry, UpstreamEntry] | null {
  if (!model.hedge) return null;
  let order: UpstreamEntry[];
  try {
    order = ctx.registry.upstreamOrder(model);
  } catch {
    return null; // none healthy: the plain open says so
  }
  // A half-open circuit's one trial call is not spent on a race.
  const [a, b] = order.filter((u) => ctx.registry.circuits.stateOf(u.id) === 'closed');
  return a && b ? [a, b] : null;
}

/**
 * Opens the engine's stream on the first upstream that accepts it (an unreachable one is skipped
 * and marked down). Local engines hold a recognizer decoder per session: an org holds at most its share.
 */
async function openEngineStream(
  ctx: GatewayContext,
  auth: RequestAuth,
  plan: SessionPlan,
  sessionGone: AbortSignal,
): Promise<OpenedStream & { upstream: UpstreamEntry }> {
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
    return await tryUpstreams(ctx, plan.model, call, async (upstream) => {
      const capability = streamingOf(ctx, upstream)!;
      const engineRate = capability.engineRate(plan.sampleRate);
      const engineTurns = plan.turnSource === 'auto' && capability.findsTurns(upstream);
      const release = upstream.url.startsWith('local:') ? ctx.admission.takeDecoder(auth) : undefined;
      try {
        const stream = await capability.open(upstream, {
          sampleRate: engineRate,
          language: plan.language,
          keyterms: plan.keyterms,
          engineTurns,
          signal: call.signal,
          timeoutMs,
        });
        return { stream, engineRate, engineTurns, release, upstream };
      } catch (err) {
        release?.();
        throw err;
      }
    });
  } finally {
    clearTimeout(deadline);
    sessionGone.removeEventListener('abort', onGone);
  }
}
