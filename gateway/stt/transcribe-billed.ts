// A whole-file transcription billed the way every batch STT route bills it: the decoded audio's
// duration is the cost, reserved before the engine runs (402 when the balance, less what the
// org's running requests reserved, cannot cover it), debited once the transcript is in, and the
// spend headers set. Used by POST /v1/audio/transcriptions and POST /v1/listen.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import { onResponseClose } from '../client-gone.ts';
import type { GatewayContext } from '../context.ts';
import { setSpendHeaders } from '../core/gateway-core.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { Transcript } from '../upstreams/contract.ts';
import type { DecodedAudio } from './decode-upload.ts';
import { transcribeWithUpstreams } from './transcribe.ts';

export async function transcribeBilled(
  ctx: GatewayContext,
  request: FastifyRequest,
  reply: FastifyReply,
  model: ModelEntry,
  audio: DecodedAudio,
  options: { language: string | undefined; keyterms: string[]; /** The usage record's `route`. */ usageRoute: string },
): Promise<Transcript> {
  const audioMillis = Math.round(audio.durationSeconds * 1000);
  const cost = perSecondCostMicros(model.prices.picoPerSecond, audioMillis);
  const hold = await ctx.core.reserve(request.auth, cost);
  onResponseClose(reply, hold.release);
  const transcript = await transcribeWithUpstreams(ctx, request, reply, model, {
    samples: audio.samples,
    sampleRate: audio.sampleRate,
    language: options.language,
    keyterms: options.keyterms,
  });
  const remaining = await ctx.core.charge(request.auth, request.id, cost, { modelId: model.id, modality: 'stt', route: options.usageRoute, audioMillis }, hold);
  setSpendHeaders(reply, cost, remaining);
  return transcript;
}
