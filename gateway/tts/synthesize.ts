// The TTS pipeline shared by /tts/sse, /tts/bytes and /v1/audio/speech: resolve model,
// voice profile and dictionary; expand the transcript; run the engine (trying the next
// upstream when one cannot be reached); wait for its first audio; debit; relay. The cost is
// reserved before the engine starts and settled by the debit.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { applyPronunciation } from '../../server/services/dicts/apply-pronunciation.ts';
import { getDictMatcher } from '../../server/services/dicts/get-dict-matcher.ts';
import { perUnitCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { resolveVoiceProfile } from '../../server/services/voices/resolve-voice-profile.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { AudibleWatch } from '../audio/first-audible.ts';
import type { PcmSamples } from '../audio/pcm.ts';
import { clientErrorFor, tryUpstreams, upstreamCall, type UpstreamCall } from '../core/try-upstreams.ts';
import { UpstreamError } from '../upstreams/contract.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { onResponseClose } from '../client-gone.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { TtsRequest } from './tts-request.ts';
import { failoverSpeech, voiceOnUpstream, type FailoverTrace } from './tts-failover.ts';

export interface StartedSynthesis extends EngineAudio {
  model: ModelEntry;
  /** The engine call: the client leaving, the deadline, a shutdown or the key's revocation end it. */
  call: UpstreamCall & { readonly clientGone: boolean };
  /** The request's cost, reserved until the debit (released when the response closes, whatever happened). */
  hold: CreditHold;
}

/** Where each route carries the model and the voice, for the `param` of resolution errors. */
const FIELDS: Record<string, { model: string; voice: string }> = {
  'audio.speech': { model: 'model', voice: 'voice' },
  'elevenlabs.tts': { model: 'model_id', voice: 'voice_id' },
  'elevenlabs.tts.websocket': { model: 'model_id', voice: 'voice_id' },
  'deepgram.speak': { model: 'model', voice: 'model' },
  'deepgram.speak.websocket': { model: 'model', voice: 'model' },
};
const NATIVE_FIELDS = { model: 'model_id', voice: 'voice.id' };

/** The same error, naming the request field the caller sent on this route. */
function withParam(e: unknown, param: string): unknown {
  return isServiceError(e) && e.param !== null && e.param !== param
    ? new ServiceError(e.code, e.message, param, { retryAfterSeconds: e.retryAfterSeconds })
    : e;
}

/** Billed characters: Unicode code points of the submitted transcript, before expansion. */
export const billedCharacters = (transcript: string) => [...transcript].length;

export interface Charge {
  costMicros: bigint;
  /** Balance after the debit. */
  remainingMicros: bigint;
}

/**
 * Debits a synthesis: per character of the submitted transcript. Streams are debited when
 * the first audio is ready, before any is relayed (the engine has shown it works, and the
 * spend headers can carry the exact balance after this request); whole files once all the
 * audio is made, so an engine failing half-way costs nothing.
 */
export async function chargeSynthesis(ctx: GatewayContext, request: FastifyRequest, s: StartedSynthesis, tts: TtsRequest, route: string): Promise<Charge> {
  const characters = billedCharacters(tts.transcript);
  const costMicros = perUnitCostMicros(s.model.prices.picoPerChar, characters);
  const remainingMicros = await ctx.core.charge(request.auth, request.id, costMicros, { modelId: s.model.id, modality: 'tts', route, characters }, s.hold);
  return { costMicros, remainingMicros };
}

export async function startSynthesis(
  ctx: GatewayContext,
  request: FastifyRequest,
  reply: FastifyReply,
  tts: TtsRequest,
  route: string,
): Promise<StartedSynthesis> {
  const model = resolveTtsModel(ctx, tts.modelId, route, request.auth);
  request.modelId = model.id;
  // The whole cost is known before anything runs: reserved first (402 if the balance, less
  // what the org's running requests reserved, cannot cover it; before any lookup, so a flood of
  // unaffordable requests costs little), so a synthesis never overdraws.
  const hold = await ctx.core.reserve(request.auth, perUnitCostMicros(model.prices.picoPerChar, billedCharacters(tts.transcript)));
  onResponseClose(reply, hold.release);
  const voice = await resolveVoice(ctx, request.auth.orgId, model, tts, route);
  const call = upstreamCall(ctx, reply, request.ticket);
  const ref = { orgId: request.auth.orgId, requestId: request.id };
  const engine = await startEngine(ctx, model, voice, tts, tts.transcript, call, { ref, log: request.log });
  ctx.metrics.firstOutput('tts_first_audio', model.id, reply.elapsedTime / 1000);
  ctx.requestLog?.annotate(ref, { firstAudioMs: Math.round(reply.elapsedTime) });
  // The first audible sample, as a client playing the audio from its first byte hears it (the engine's lead-in silence is not "first audio").
  const audible = new AudibleWatch();
  const sent = (pcm: PcmSamples) => {
    const heardAt = audible.sent(pcm, engine.sampleRate);
    if (heardAt === undefined) return;
    const ms = reply.elapsedTime + heardAt - performance.now();
    ctx.metrics.firstOutput('tts_first_audible', model.id, ms / 1000);
    ctx.requestLog?.annotate(ref, { firstAudibleMs: Math.round(ms) });
  };
  return { model, ...engine, call, hold, sent };
}

/** The tts model of a request (404 model_not_found, 403 model_not_allowed for its key, naming the route's field). */
export function resolveTtsModel(ctx: GatewayContext, modelId: string, route: string, auth: RequestAuth): ModelEntry {
  try {
    return ctx.registry.resolve(modelId, 'tts', auth);
  } catch (e) {
    throw withParam(e, (FIELDS[route] ?? NATIVE_FIELDS).model);
  }
}

/** What a request's voice and dictionary resolve to, once per request (or WebSocket context). */
export interface ResolvedVoice {
  profile: Awaited<ReturnType<typeof resolveVoiceProfile>>;
  dict: Awaited<ReturnType<typeof getDictMatcher>> | null;
  /** The org it was resolved for: the speech is made on its behalf (its share of a local engine's pool). */
  orgId: string;
}

/** The voice's profile for the model and the pronunciation dictionary (errors name the route's field). */
export async function resolveVoice(
  ctx: GatewayContext,
  orgId: string,
  model: ModelEntry,
  tts: Pick<TtsRequest, 'voiceId' | 'dictId'>,
  route: string,
): Promise<ResolvedVoice> {
  const { prisma } = ctx.db;
  const [profile, dict] = await Promise.all([
    resolveVoiceProfile(prisma, { orgId, voiceId: tts.voiceId, modelId: model.id }).catch((e: unknown) => {
      throw withParam(e, (FIELDS[route] ?? NATIVE_FIELDS).voice);
    }),
    tts.dictId ? getDictMatcher(prisma, { orgId, dictId: tts.dictId }) : Promise.resolve(null),
  ]);
  return { profile, dict, orgId };
}

/** An engine's audio for one text: its first chunk already pulled, the rest to come. */
export interface EngineAudio {
  sampleRate: number;
  first: PcmSamples;
  rest: AsyncIterator<PcmSamples>;
  /** The most samples the text may make (audioBound): past it the engine is stopped and the stream fails. */
  maxSamples: number;
  call: UpstreamCall;
  /** Told of each chunk as it goes out (the first audible sample is found in them). */
  sent?: (pcm: PcmSamples) => void;
}

/**
 * The audio a text may make: generous (speech runs at a dozen characters a second or more, and a
 * dictionary alias or a number spoken out makes a few characters long), but bounded, so an
 * engine that never stops is cut off with an error rather than relayed, or held, without end.
 */
export const AUDIO_SECONDS_PER_CHARACTER = 1;
export const MIN_AUDIO_SECONDS = 30;

export function audioBound(text: string, sampleRate: number): number {
  return Math.max(MIN_AUDIO_SECONDS, AUDIO_SECONDS_PER_CHARACTER * billedCharacters(text)) * sampleRate;
}

/**
 * Runs the engine on `text` (expanded by the dictionary) until its first audio. A model with one
 * upstream streams it as the engine makes it (trying the next upstream when one cannot be
 * reached); a model with more speaks it span by span, each span whole before it is released, so
 * a failing engine's span moves to the next upstream unheard (tts-failover.ts).
 */
export async function startEngine(
  ctx: GatewayContext,
  model: ModelEntry,
  voice: ResolvedVoice,
  tts: Pick<TtsRequest, 'language' | 'speed'>,
  text: string,
  call: UpstreamCall,
  trace: FailoverTrace = {},
): Promise<Omit<EngineAudio, 'call'>> {
  const { profile, dict, orgId } = voice;
  const language = tts.language ?? profile.language;
  if (model.upstreams.length > 1) {
    const run = { ctx, model, profile, dict, language, speed: tts.speed, tenant: orgId, call, trace };
    const audio = await failoverSpeech(run, text);
    return { ...audio, maxSamples: audioBound(text, audio.sampleRate) };
  }
  const { stream, iterator, first } = await tryUpstreams(ctx, model, call, async (upstream) => {
    const speech = ctx.protocols.get(upstream.protocol)?.speech;
    if (!speech) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot synthesize speech.`);
    const engineVoice = voiceOnUpstream(profile, upstream);
    if (!engineVoice) throw new ServiceError('voice_profile_missing', `Voice '${profile.voiceId}' has no copy on the upstream of '${model.id}'.`, 'voice.id');
    const expanded = dict ? applyPronunciation(text, dict, speech.formatPhoneme) : text;
    const stream = await speech.synthesize(upstream, {
      text: expanded,
      voice: engineVoice,
      language,
      speed: tts.speed,
      signal: call.signal,
      timeoutMs: call.timeoutMs,
      tenant: orgId,
    });
    const iterator = stream.chunks[Symbol.asyncIterator]();
    // "First audio" means samples: skip empty chunks.
    let first = await iterator.next();
    while (!first.done && first.value.length === 0) first = await iterator.next();
    return { stream, iterator, first };
  });
  if (first.done) throw new ServiceError('upstream_error', 'The speech engine produced no audio for this transcript.');
  return { sampleRate: stream.sampleRate, first: first.value, rest: iterator, maxSamples: audioBound(text, stream.sampleRate) };
}

/**
 * All the audio of a started synthesis, first chunk included. An engine that fails after
 * its first audio (a dropped connection, a crash, the deadline) is the upstream's error
 * (502 upstream_error, 504 upstream_timeout), never the gateway's 500.
 */
export async function* allChunks(s: EngineAudio): AsyncGenerator<PcmSamples> {
  let made = s.first.length;
  if (made > s.maxSamples) throw await tooMuchAudio(s);
  // An engine that makes whole sentences (flite) hands over seconds of audio at once: the
  // first 100 ms go out on their own, so converting and encoding the rest does not delay them.
  const lead = Math.round(s.sampleRate / 10);
  const out = (pcm: PcmSamples) => (s.sent?.(pcm), pcm);
  if (s.first.length > 2 * lead) {
    yield out(s.first.subarray(0, lead));
    yield out(s.first.subarray(lead));
  } else yield out(s.first);
  for (;;) {
    let next: IteratorResult<PcmSamples>;
    try {
      next = await s.rest.next();
    } catch (e) {
      throw clientErrorFor(e, s.call);
    }
    if (next.done) return;
    // Revoked key or shutdown: stop relaying audio the engine already made, too.
    if (s.call.signal.aborted && isServiceError(s.call.signal.reason)) throw s.call.signal.reason;
    made += next.value.length;
    if (made > s.maxSamples) throw await tooMuchAudio(s);
    if (next.value.length) yield out(next.value);
  }
}

/** Stops an engine that made more audio than its text may (audioBound): the error to end the stream with. */
async function tooMuchAudio(s: EngineAudio): Promise<ServiceError> {
  await s.rest.return?.().catch(() => {});
  const seconds = Math.round(s.maxSamples / s.sampleRate);
  return upstreamEnvelope(new UpstreamError('protocol', `it made more than ${seconds} s of audio for this text; the rest was cut off.`), s.call.timeoutMs);
}
