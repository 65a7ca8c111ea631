import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { Transcript, TranscriptionRequest } from '../upstreams/contract.ts';
import { tryUpstreams, upstreamCall } from '../core/try-upstreams.ts';

/** Runs a batch transcription on the model's healthy upstreams. */
export async function transcribeWithUpstreams(
  ctx: GatewayContext,
  request: FastifyRequest,
  reply: FastifyReply,
  model: ModelEntry,
  input: Omit<TranscriptionRequest, 'signal' | 'timeoutMs'>,
): Promise<Transcript> {
  const call = upstreamCall(ctx, reply, request.ticket);
  return tryUpstreams(ctx, model, call, (upstream) => {
    const transcription = ctx.protocols.get(upstream.protocol)?.transcription;
    if (!transcription) throw new ServiceError('model_offline', `The upstream of '${model.id}' (protocol ${upstream.protocol}) cannot transcribe whole files.`);
    return transcription.transcribe(upstream, { ...input, signal: call.signal, timeoutMs: call.timeoutMs });
  });
}
