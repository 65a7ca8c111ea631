// Speech that survives an engine failure (docs/failover.md, "TTS"). A model with more than one
// upstream speaks its text sentence by sentence (text-spans.ts), one engine call per span, and a
// span's audio is released only once its engine has finished it: an engine that fails (refused,
// reset, closed, 5xx, silent past SVC_TTS_FIRST_AUDIO_SECONDS / SVC_TTS_STALL_SECONDS, bad data)
// has released nothing of the span it was making, so that span is spoken whole by the next
// upstream, and the listener hears every word once. The next span is synthesized while the
// current one is relayed, so the seam costs the replacement's time for one span, heard as silence
// only when the client has less audio buffered than that. Hedging (the model's capabilities.hedge):
// the stream's first span is asked of two upstreams at once; the first to have audio goes on and
// the other is cancelled at once (docs/failover.md, "Hedging").
import type { FastifyBaseLogger } from 'fastify';
import { applyPronunciation } from '../../server/services/dicts/apply-pronunciation.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { toFloat32, type PcmSamples } from '../audio/pcm.ts';
import { resample } from '../audio/resample.ts';
import type { GatewayContext } from '../context.ts';
import { clientErrorFor, type UpstreamCall } from '../core/try-upstreams.ts';
import { recordFailover, recordHedge, type FailoverReason } from '../core/failover.ts';
import type { ModelEntry, UpstreamEntry } from '../registry/model-registry.ts';
import type { LogRef } from '../request-log/request-log-types.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
import { UpstreamError } from '../upstreams/contract.ts';
import { asUpstreamError } from '../upstreams/engine-http.ts';
import { isSpeakable, takeSpans } from './text-spans.ts';

/** The first span is cut short (at a word) past this many code points: its whole audio is made before any is released. */
export const FIRST_SPAN_MAX_CHARS = 60;

/** The voice as one upstream knows it. */
export interface EngineVoiceRef {
  upstreamId: string;
  params: Record<string, unknown> | null;
}

/** A voice's profile for a model (resolve-voice-profile.ts). */
interface Profile extends EngineVoiceRef {
  voiceId: string;
  language: string;
}

/** Where a profile keeps the voice's id on each upstream of its model: `{ [upstream URL]: engine voice id }` (`svc voices map --upstream`). */
export const UPSTREAM_VOICES_PARAM = 'upstream_voices';

/**
 * The voice's id on `upstream`: with per-upstream copies, the one named for its URL (none: the
 * voice cannot be spoken there, and the upstream is skipped); otherwise the profile's id, as on
 * every upstream of the model.
 */
export function voiceOnUpstream(profile: EngineVoiceRef, upstream: Pick<UpstreamEntry, 'url'>): EngineVoiceRef | null {
  const copies = profile.params?.[UPSTREAM_VOICES_PARAM];
  if (!copies || typeof copies !== 'object') return profile;
  const id = (copies as Record<string, unknown>)[upstream.url];
  if (typeof id !== 'string' || id === '') return null;
  const params = { ...profile.params };
  delete params[UPSTREAM_VOICES_PARAM];
  return { upstreamId: id, params: Object.keys(params).length ? params : null };
}

/** Splits a text into the spans spoken one engine call each; put back together they are the text. */
export function failoverSpans(text: string): string[] {
  const { spans, rest } = takeSpans(text);
  if (rest) {
    if (isSpeakable(rest) || spans.length === 0) spans.push(rest);
    else spans[spans.length - 1] += rest;
  }
  const first = spans[0];
  if (first !== undefined && [...first].length > FIRST_SPAN_MAX_CHARS) {
    const head = [...first].slice(0, FIRST_SPAN_MAX_CHARS).join('');
    const cut = Math.max(head.lastIndexOf(' '), head.lastIndexOf('\n')) + 1;
    if (cut > 0 && isSpeakable(first.slice(0, cut)) && isSpeakable(first.slice(cut))) spans.splice(0, 1, first.slice(0, cut), first.slice(cut));
  }
  return spans;
}

/** Who a run's failovers are recorded for. */
export interface FailoverTrace {
  ref?: LogRef;
  log?: { warn(obj: unknown, msg: string): void };
  /** Audio of this stream already reached the client before this text (later spans of a live session): a failure is mid-stream. */
  released?: () => boolean;
}

export interface SpeechRun {
  ctx: GatewayContext;
  model: ModelEntry;
  profile: Profile;
  dict: Parameters<typeof applyPronunciation>[1] | null;
  language: string | undefined;
  speed: number;
  tenant: string;
  call: UpstreamCall;
  trace: FailoverTrace;
}

const quiet = { warn: () => {} };

/** An engine that went silent: no first audio, or nothing more, within its allowance. */
class EngineStall extends Error {
  constructor(readonly ms: number) {
    super(`no audio for ${ms / 1000} s`);
  }
}

/** Lost a hedging race: the other upstream had audio first. */
class LostRace extends Error {
  constructor() {
    super('another upstream had audio first');
  }
}

/** Hedging: the attempts at one span racing for its first audio; the first to have some goes on, the others are cancelled at once. */
class FirstAudioRace {
  winner: UpstreamEntry | null = null;
  private readonly attempts = new Map<UpstreamEntry, AbortController>();

  enter(upstream: UpstreamEntry, attempt: AbortController): void {
    this.attempts.set(upstream, attempt);
  }

  /** Whether `upstream`'s first audio wins (the others are cancelled then); false: another's came first. */
  claim(upstream: UpstreamEntry): boolean {
    this.winner ??= upstream;
    if (this.winner !== upstream) return false;
    this.cancel(upstream);
    return true;
  }

  /** Cancels every attempt but `keep`'s. */
  cancel(keep?: UpstreamEntry): void {
    for (const [upstream, attempt] of this.attempts) if (upstream !== keep) attempt.abort(new LostRace());
  }
}

interface SpanAudio {
  sampleRate: number;
  samples: Float32Array;
  upstream: UpstreamEntry;
}

/**
 * Spans in order, each on the first upstream that makes it whole; the audio as one stream at the
 * first engine's sample rate. Resolves once the first span is ready.
 */
export async function failoverSpeech(run: SpeechRun, text: string): Promise<{ sampleRate: number; first: PcmSamples; rest: AsyncGenerator<PcmSamples> }> {
  const spans = failoverSpans(text);
  let out = false;
  const failed = new Set<string>();
  let sticky: UpstreamEntry | null = null;
  const phase = () => (out || run.trace.released?.() ? 'mid_stream' : 'before_first_output');
  const speakSpan = async (span: string, hedged = false): Promise<SpanAudio> => {
    const a = await spanOnUpstreams(run, span, sticky, failed, phase, hedged);
    sticky = a.upstream;
    return a;
  };
  // Hedged: the stream's first audio (not a later span of a live session's) is raced on two upstreams.
  const head = await speakSpan(spans[0]!, run.model.hedge && !run.trace.released?.());
  out = true;
  const sampleRate = head.sampleRate;
  const lead = Math.round(sampleRate / 10);
  const atRate = (a: SpanAudio) => (a.sampleRate === sampleRate ? a.samples : resample(a.samples, a.sampleRate, sampleRate));
  async function* rest(): AsyncGenerator<PcmSamples> {
    let current = head.samples.subarray(lead);
    for (let i = 1; ; i++) {
      // The next span is made while this one is relayed; its failure waits for its turn.
      const next = i < spans.length ? speakSpan(spans[i]!) : null;
      next?.catch(() => {});
      yield* inPieces(current);
      if (!next) return;
      current = atRate(await next);
    }
  }
  // The first 100 ms go out on their own: converting and encoding the rest does not delay them.
  return { sampleRate, first: head.samples.subarray(0, lead), rest: rest() };
}

/** A span's audio in pieces of a second or so (a converter's unit of work). */
function* inPieces(samples: Float32Array): Generator<PcmSamples> {
  const piece = 48_000;
  for (let at = 0; at < samples.length; at += piece) yield samples.subarray(at, at + piece);
}

/** The reason a failure is recorded with. */
function reasonOf(e: unknown): FailoverReason {
  if (e instanceof EngineStall) return 'stall';
  const failure = asUpstreamError(e, false);
  if (failure.kind === 'connect') return 'connect';
  if (failure.kind === 'status') return 'http_status';
  if (failure.kind === 'timeout') return 'timeout';
  if (failure.kind === 'broken') return 'closed';
  if (failure.kind === 'protocol') return 'protocol';
  return 'error';
}

/** The caller's own bad request (the engine refused the text): no other engine will take it either. */
const refusedRequest = (e: unknown) => {
  if (e instanceof EngineStall) return false;
  const failure = asUpstreamError(e, false);
  return failure.kind === 'status' && [400, 413, 422].includes(failure.details.status ?? 0);
};

/**
 * One span on the model's upstreams: the last one used first, then the others in the registry's
 * order; each failure recorded. Hedged: the first two at once, until one has audio.
 */
async function spanOnUpstreams(
  run: SpeechRun,
  text: string,
  sticky: UpstreamEntry | null,
  failed: Set<string>,
  phase: () => 'mid_stream' | 'before_first_output',
  hedged: boolean,
): Promise<SpanAudio> {
  const { ctx, model, call } = run;
  let lastError: unknown = new UpstreamError('connect', 'no upstream could be tried');
  let order: UpstreamEntry[];
  try {
    order = ctx.registry.upstreamOrder(model);
  } catch (e) {
    if (failed.size === 0) throw e;
    order = [];
  }
  if (sticky && order.some((u) => u.id === sticky.id)) order = [sticky, ...order.filter((u) => u.id !== sticky.id)];
  const candidates = order
    .filter((u) => !failed.has(u.id))
    .map((upstream) => ({ upstream, voice: voiceOnUpstream(run.profile, upstream) }))
    .filter((c): c is { upstream: UpstreamEntry; voice: EngineVoiceRef } => c.voice !== null);
  const skippedForVoice = order.filter((u) => !failed.has(u.id)).length - candidates.length;
  // Silence is a failure only with somewhere to go: the last engine left is waited for (the call's own deadline bounds it).
  const anotherLeft = (upstream: UpstreamEntry) => () => candidates.some((c) => c.upstream !== upstream && !failed.has(c.upstream.id));
  /** An attempt failed: the client's end or its refused text end the request (thrown); an engine's fault is recorded and the next is tried. */
  const failure = (upstream: UpstreamEntry, e: unknown): void => {
    if (isServiceError(e)) throw e;
    if (call.signal.aborted) throw clientErrorFor(e, call);
    if (refusedRequest(e)) throw upstreamEnvelope(asUpstreamError(e, false), call.timeoutMs);
    failed.add(upstream.id);
    lastError = e;
    recordFailover(ctx, {
      from: upstream,
      reason: reasonOf(e),
      phase: phase(),
      ref: run.trace.ref,
      log: (run.trace.log ?? quiet) as FastifyBaseLogger,
      error: e,
    });
  };
  if (hedged && candidates.length >= 2) {
    const race = new FirstAudioRace();
    const pair = candidates.slice(0, 2);
    const results = await Promise.allSettled(
      pair.map(async ({ upstream, voice }) => {
        try {
          return await spanOn(run, upstream, voice, text, anotherLeft(upstream), race);
        } catch (e) {
          if (e instanceof LostRace) return null;
          try {
            failure(upstream, e);
          } catch (fatal) {
            race.cancel();
            throw fatal;
          }
          return null;
        }
      }),
    );
    for (const r of results) if (r.status === 'rejected') throw r.reason;
    const winner = race.winner;
    if (winner) recordHedge(ctx, { won: winner, lost: pair.find((c) => c.upstream !== winner)!.upstream });
    const audio = results.find((r): r is PromiseFulfilledResult<SpanAudio> => r.status === 'fulfilled' && r.value !== null)?.value;
    if (audio) {
      ctx.upstreamStats?.record(audio.upstream.id, true);
      return audio;
    }
  }
  // In turn (after a race: the one that lost it first, if its winner failed half-way).
  for (const { upstream, voice } of candidates.filter((c) => !failed.has(c.upstream.id))) {
    try {
      const audio = await spanOn(run, upstream, voice, text, anotherLeft(upstream));
      ctx.upstreamStats?.record(upstream.id, true);
      return audio;
    } catch (e) {
      failure(upstream, e);
    }
  }
  if (failed.size === 0 && skippedForVoice > 0) {
    throw new ServiceError('voice_profile_missing', `Voice '${run.profile.voiceId}' has no copy on the upstreams of '${model.id}' that are up.`, 'voice.id');
  }
  if (lastError instanceof EngineStall) lastError = new UpstreamError('timeout', lastError.message);
  throw upstreamEnvelope(asUpstreamError(lastError, false), call.timeoutMs);
}

/**
 * The whole audio of one span from one upstream, bounded in time before its first audio and
 * between chunks while `watch()` (another upstream is left). In a race, its first audio claims it.
 */
async function spanOn(
  run: SpeechRun,
  upstream: UpstreamEntry,
  voice: EngineVoiceRef,
  text: string,
  watch: () => boolean,
  race?: FirstAudioRace,
): Promise<SpanAudio> {
  const { ctx, call, dict } = run;
  const speech = ctx.protocols.get(upstream.protocol)?.speech;
  if (!speech) throw new ServiceError('model_offline', `The upstream of '${run.model.id}' (protocol ${upstream.protocol}) cannot synthesize speech.`);
  const attempt = new AbortController();
  race?.enter(upstream, attempt);
  const signal = AbortSignal.any([call.signal, attempt.signal]);
  const { firstAudioMs, stallMs } = ctx.config.ttsFailover;
  const parts: Float32Array[] = [];
  let length = 0;
  const traced = ctx.tracing?.startAttempt(upstream);
  try {
    const make = async () => {
      const expanded = dict ? applyPronunciation(text, dict, speech.formatPhoneme) : text;
      // The first audio's allowance runs from the request: an engine that takes it and says nothing is as silent as one that answers nothing.
      const stream = await watched(
        speech.synthesize(upstream, { text: expanded, voice, language: run.language, speed: run.speed, signal, timeoutMs: call.timeoutMs, tenant: run.tenant }),
        firstAudioMs,
        attempt,
        ctx,
        watch,
      );
      const iterator = stream.chunks[Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await watched(iterator.next(), length === 0 ? firstAudioMs : stallMs, attempt, ctx, watch);
          if (next.done) break;
          if (next.value.length === 0) continue;
          // Hedged: the first audio decides the race (the other attempt is cancelled at once).
          if (length === 0 && race && !race.claim(upstream)) throw new LostRace();
          parts.push(toFloat32(next.value));
          length += next.value.length;
        }
      } finally {
        if (attempt.signal.aborted || call.signal.aborted) void iterator.return?.().catch(() => {});
      }
      if (length === 0) throw new UpstreamError('protocol', 'The speech engine produced no audio for this text.');
      return stream.sampleRate;
    };
    const sampleRate = await (traced ? traced.run(make) : make());
    traced?.answered();
    const samples = new Float32Array(length);
    let at = 0;
    for (const p of parts) {
      samples.set(p, at);
      at += p.length;
    }
    return { sampleRate, samples, upstream };
  } catch (e) {
    traced?.failed(e instanceof LostRace ? 'cancelled' : e instanceof EngineStall ? 'timeout' : 'error', e);
    attempt.abort(e);
    throw e;
  }
}

/**
 * `promise`, or the attempt's end: an EngineStall (the attempt aborted) once `ms` pass on the
 * gateway's clock first while `watch()`, or whatever else aborted the attempt (a lost race).
 */
function watched<T>(promise: Promise<T>, ms: number, attempt: AbortController, ctx: GatewayContext, watch: () => boolean): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = ctx.clock.after(ms, () => {
      if (watch()) attempt.abort(new EngineStall(ms));
    });
    const aborted = () => {
      timer.cancel();
      reject(attempt.signal.reason);
    };
    if (attempt.signal.aborted) aborted();
    else attempt.signal.addEventListener('abort', aborted, { once: true });
    const settled = () => {
      timer.cancel();
      attempt.signal.removeEventListener('abort', aborted);
    };
    promise.then(
      (v) => {
        settled();
        resolve(v);
      },
      (e: unknown) => {
        settled();
        reject(attempt.signal.aborted ? attempt.signal.reason : e);
      },
    );
  });
}
