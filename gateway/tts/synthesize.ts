// The TTS pipeline shared by /tts/sse, /tts/bytes and /v1/audio/speech: resolve model,
// voice profile and dictionary; expand the transcript; run the engine (trying the next
// upstream when one cannot be reached); wait for its first audio; debit; then relay.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { applyPronunciation } from '../../server/services/dicts/apply-pronunciation.js';
import { getDictEntries } from '../../server/services/dicts/get-dict-entries.js';
import { perUnitCostMicros } from '../../server/services/credits/pricing.js';
import { ServiceError, isServiceError } from '../../server/services/errors.js';
import { resolveVoiceProfile } from '../../server/services/voices/resolve-voice-profile.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry } from '../registry/model-registry.js';
import type { SpeechStream } from '../upstreams/speech-types.js';
import type { PcmSamples } from '../audio/pcm.js';
import { isConnectFailure, isTimeout, upstreamTimeout, upstreamUnavailable } from '../upstreams/upstream-errors.js';
import type { TtsRequest } from './tts-request.js';

export interface StartedSynthesis {
  model: ModelEntry;
  sampleRate: number;
  /** The first chunk already pulled (so engine failures before any audio are HTTP errors). */
  first: PcmSamples;
  rest: AsyncIterator<PcmSamples>;
  costMicros: bigint;
  /** Balance after the debit. */
  remainingMicros: bigint;
  abort: AbortController;
}

/** Billed characters: Unicode code points of the submitted transcript, before expansion. */
export const billedCharacters = (transcript: string) => [...transcript].length;

export async function startSynthesis(ctx: GatewayContext, request: FastifyRequest, reply: FastifyReply, tts: TtsRequest, route: string): Promise<StartedSynthesis> {
  const model = ctx.registry.resolve(tts.modelId, 'tts');
  const { prisma } = ctx.db;
  const orgId = request.auth.orgId;
  const [profile, entries] = await Promise.all([
    resolveVoiceProfile(prisma, { orgId, voiceId: tts.voiceId, modelId: model.id }),
    tts.dictId ? getDictEntries(prisma, { orgId, dictId: tts.dictId }) : Promise.resolve([]),
  ]);

  const abort = new AbortController();
  // The client going away stops the engine (the child process is killed).
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  const timeoutMs = ctx.config.upstreamTimeoutMs;
  const signal = AbortSignal.any([abort.signal, AbortSignal.timeout(timeoutMs)]);

  let stream: SpeechStream | undefined;
  let first: IteratorResult<PcmSamples> | undefined;
  let iterator: AsyncIterator<PcmSamples> | undefined;
  let lastError: unknown;
  for (const upstream of ctx.registry.upstreamOrder(model)) {
    const adapter = ctx.adapters.speech(upstream.protocol);
    if (!adapter) throw new ServiceError('upstream_error', `No speech adapter for protocol '${upstream.protocol}'.`);
    const text = applyPronunciation(tts.transcript, entries, adapter.formatPhoneme);
    try {
      stream = await adapter.synthesize(upstream, { text, voice: profile, language: tts.language ?? profile.language, speed: tts.speed, signal, timeoutMs });
      iterator = stream.chunks[Symbol.asyncIterator]();
      // Skip empty chunks: "first audio" means samples.
      do first = await iterator.next();
      while (!first.done && first.value.length === 0);
      break;
    } catch (e) {
      if (isServiceError(e)) throw e;
      if (signal.aborted && !abort.signal.aborted) throw upstreamTimeout(timeoutMs / 1000);
      if (abort.signal.aborted) throw e;
      if (isTimeout(e)) throw upstreamTimeout(timeoutMs / 1000);
      if (!isConnectFailure(e)) throw upstreamUnavailable((e as Error).message);
      ctx.health.record(upstream, { ok: false, error: `connection failed: ${(e as Error).message}` });
      lastError = e;
    }
  }
  if (!stream || !iterator || !first) throw upstreamUnavailable((lastError as Error | undefined)?.message ?? 'no upstream answered');
  if (first.done) throw new ServiceError('upstream_error', 'The speech engine produced no audio for this transcript.');

  // Debit now, before relaying any audio: the cost is known (per character), the engine has
  // shown it works, and the spend headers can carry the exact balance after this request.
  const characters = billedCharacters(tts.transcript);
  const costMicros = perUnitCostMicros(model.prices.picoPerChar, characters);
  const remainingMicros = await ctx.core.charge(request.auth, request.id, costMicros, { modelId: model.id, modality: 'tts', route, characters });
  return { model, sampleRate: stream.sampleRate, first: first.value, rest: iterator, costMicros, remainingMicros, abort };
}

/** All the audio of a started synthesis, first chunk included. */
export async function* allChunks(s: StartedSynthesis): AsyncGenerator<PcmSamples> {
  yield s.first;
  for (;;) {
    const next = await s.rest.next();
    if (next.done) return;
    if (next.value.length) yield next.value;
  }
}
