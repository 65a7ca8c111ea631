// Opening a realtime session, whatever carries it: the WebSocket route (routes/realtime.ts), a
// WebRTC call or a phone's media stream admit it the same way (what it asks for, the session
// caps, the first second of credit) and start the same RealtimeSession on their own Outbox.
import type { FastifyBaseLogger } from 'fastify';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { checkModelAllowed } from '../../server/services/keys/key-budget.ts';
import type { GatewayContext } from '../context.ts';
import type { Ticket } from '../core/admission.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { streamingModel } from '../stt/open-session.ts';
import { METER_EVERY_MS } from '../stt/stt-session.ts';
import { defaultModel, isOpenAiSttName, resolveProfile, type RealtimeProfile } from './profiles.ts';
import type { OutputPlayout } from './output-playout.ts';
import { RealtimeSession } from './realtime-session.ts';
import type { ServerEvent } from './server-events.ts';

/** What a client asks for: OpenAI's `?model=` and `?intent=`. */
export interface RealtimeAsk {
  model?: string;
  intent?: string;
}

export interface RealtimeAdmission {
  /** The session's place under the caps per key, org and process. */
  ticket: Ticket;
  /** Its first second of audio, reserved. */
  hold: CreditHold;
  profile: RealtimeProfile | null;
  sttModel: string | null;
  /** The model its request-log row names: the profile, or the stt model of a transcription session. */
  modelId: string;
}

/** What an ask resolves to: the profile (a conversation) or the stt model (a transcription session). */
export interface ResolvedAsk {
  profile: RealtimeProfile | null;
  sttModel: string | null;
  stt: ModelEntry;
}

/**
 * Checks what the client asks for, without admitting anything (a client secret's settings are
 * checked so when it is minted): 400 for a bad intent or no model, 404 model_not_found, 403
 * model_not_allowed when the key may not use the LLM, the stt model or the tts model a profile
 * names, 503 model_offline when no stt model streams.
 */
export function resolveRealtimeAsk(ctx: GatewayContext, profiles: Map<string, RealtimeProfile>, ask: RealtimeAsk, auth: RequestAuth): ResolvedAsk {
  if (ask.intent !== undefined && ask.intent !== 'transcription')
    throw new ServiceError('invalid_request', 'intent must be transcription (or absent, for a conversation).', 'intent');
  let profile: RealtimeProfile | null = null;
  let sttModel: string | null = null;
  let sttId: string;
  if (ask.intent === 'transcription') {
    sttModel = ask.model && !isOpenAiSttName(ask.model) ? ask.model : null;
    sttId = sttModel ?? defaultModel(ctx.registry, 'stt');
  } else {
    if (!ask.model)
      throw new ServiceError(
        'invalid_request',
        'model is required: a realtime profile or an LLM of the registry (GET /v1/models), or intent=transcription.',
        'model',
      );
    profile = resolveProfile(profiles, ctx.registry, ask.model, auth);
    ctx.registry.resolve(profile.llm, 'llm', auth);
    // The tts model is looked up when an answer is spoken; the one a profile names is checked against the key now.
    if (profile.tts) checkModelAllowed(auth.allowedModels, profile.tts);
    sttId = profile.stt ?? defaultModel(ctx.registry, 'stt');
  }
  return { profile, sttModel, stt: streamingModel(ctx, sttId, auth) };
}

/**
 * Checks what the client asks for (resolveRealtimeAsk), then takes the session's place under the
 * caps (429 per key and org, 503 per process) and reserves its first second of audio (402). The
 * caller releases the ticket and the hold when its transport ends before the session starts.
 */
export async function admitRealtime(
  ctx: GatewayContext,
  profiles: Map<string, RealtimeProfile>,
  auth: RequestAuth,
  ask: RealtimeAsk,
): Promise<RealtimeAdmission> {
  const { profile, sttModel, stt } = resolveRealtimeAsk(ctx, profiles, ask, auth);
  const ticket = ctx.admission.openStream(auth);
  try {
    const hold = await ctx.core.reserve(auth, perSecondCostMicros(stt.prices.picoPerSecond, METER_EVERY_MS));
    return { ticket, hold, profile, sttModel, modelId: profile?.id ?? stt.id };
  } catch (e) {
    ticket.release();
    throw e;
  }
}

/**
 * Ties an admission made before a WebSocket upgrade to its connection: the ticket and the hold
 * are given back when it closes, however it ends (a refused upgrade, the peer gone, the session
 * over), or at once if it has closed already. Once the session starts, it settles the hold.
 */
export function releaseOnClose(admission: RealtimeAdmission, connection: { once(event: 'close', fn: () => void): unknown; destroyed: boolean }): void {
  connection.once('close', admission.ticket.release);
  connection.once('close', admission.hold.release);
  if (connection.destroyed) {
    admission.ticket.release();
    admission.hold.release();
  }
}

export interface RealtimeStart {
  auth: RequestAuth;
  requestId: string;
  log: FastifyBaseLogger;
  profiles: Map<string, RealtimeProfile>;
  /** Aborted (reason: a ServiceError) when the transport's own credential is revoked (a phone token): ends the session as the key's revocation does. */
  revoked?: AbortSignal;
  /** Session fields applied in order before the session starts (a client secret's, then the call's), as session.update would. */
  initial?: Record<string, unknown>[];
  /** A transport that plays the answers' audio itself (a WebRTC call): RealtimeSessionSetup.playout. */
  playout?: OutputPlayout;
}

/**
 * Starts an admitted session on a transport's outbox; from here the session settles the hold,
 * and a revocation of the key ends it. The transport releases the ticket when it closes and
 * tells the session (`transportClosed`).
 */
export function startRealtimeSession(ctx: GatewayContext, admission: RealtimeAdmission, outbox: Outbox<ServerEvent>, start: RealtimeStart): RealtimeSession {
  const revoked = new AbortController();
  admission.ticket.bind(revoked);
  const session = new RealtimeSession(outbox, {
    ctx,
    auth: start.auth,
    requestId: start.requestId,
    log: start.log,
    kind: admission.profile ? 'realtime' : 'transcription',
    profile: admission.profile,
    profiles: start.profiles,
    sttModel: admission.sttModel,
    hold: admission.hold,
    revoked: start.revoked ? AbortSignal.any([revoked.signal, start.revoked]) : revoked.signal,
    initial: start.initial,
    playout: start.playout,
  });
  session.start().catch((e: unknown) => session.fail(e));
  return session;
}
