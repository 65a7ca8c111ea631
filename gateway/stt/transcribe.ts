import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../server/services/errors.js';
import type { GatewayContext } from '../context.js';
import type { ModelEntry } from '../registry/model-registry.js';
import type { Transcript, TranscriptionRequest } from '../upstreams/transcription-types.js';
import { tryUpstreams, upstreamCall } from '../upstreams/try-upstreams.js';
import { onClientGone, onKeyRevoked } from '../client-gone.js';

/** Runs a batch transcription on the model's healthy upstreams. */
export async function transcribeWithUpstreams(
  ctx: GatewayContext,
  request: FastifyRequest,
  reply: FastifyReply,
  model: ModelEntry,
  input: Omit<TranscriptionRequest, 'signal' | 'timeoutMs'>,
): Promise<Transcript> {
  const call = upstreamCall(ctx, onClientGone(reply), onKeyRevoked(request.ticket));
  return tryUpstreams(ctx, model, call, (upstream) => {
    const adapter = ctx.adapters.transcription(upstream.protocol);
    if (!adapter) throw new ServiceError('upstream_error', `No transcription adapter for protocol '${upstream.protocol}'.`);
    return adapter.transcribe(upstream, { ...input, ...call });
  });
}
