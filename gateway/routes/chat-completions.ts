// POST /v1/chat/completions: the request parsed, the chat completion asked through the LLM
// pipeline (gateway/llm/chat-completion.ts: what is forwarded, how it is metered), the answer
// sent as the engine produced it, streamed event by event.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { setSpendHeaders } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { parseJsonObject } from '../json-body.ts';
import { completeChat, type LlmAnswer } from '../llm/chat-completion.ts';
import { LlmRun } from '../llm/llm-run.ts';
import { upstreamCall } from '../core/try-upstreams.ts';
import { onResponseClose } from '../client-gone.ts';
import { sendStream } from '../metrics/metrics-http.ts';

export const LLM_BODY_LIMIT = 10 * 1024 * 1024;

export function registerChatCompletionRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  // Keep the raw bytes: they are forwarded as they are.
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: LLM_BODY_LIMIT }, (_req, body, done) => done(null, body));

  const chatCompletion = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const raw = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
    const body = parseJsonObject(raw);
    const model = ctx.registry.resolve(body.model, 'llm', request.auth);
    request.modelId = model.id;
    const run = await LlmRun.reserve(ctx, { auth: request.auth, requestId: request.id }, model, 'chat.completions', body, raw.length);
    onResponseClose(reply, run.releaseUnlessStreaming);
    // A stream has no overall deadline: it may run long as long as the engine keeps sending (the
    // engine's silence is bounded, SVC_UPSTREAM_TIMEOUT_SECONDS). A whole answer (`stream` not
    // true) has that deadline overall too, even from an engine that streams it in a trickle.
    const engine = upstreamCall(ctx, reply, request.ticket, { deadline: body.stream !== true });
    const firstOutput = () => ctx.metrics.firstOutput('llm_first_token', model.id, reply.elapsedTime / 1000);
    let answer: LlmAnswer | null;
    try {
      answer = await completeChat(run, { raw, body, engine, log: request.log, firstOutput });
    } catch (e) {
      if (engine.clientGone) return reply; // the client left before the engine answered
      throw e;
    }
    return answer ? sendLlmAnswer(ctx, reply, answer) : reply;
  };

  app.post('/v1/chat/completions', { bodyLimit: LLM_BODY_LIMIT, config: { metered: true } }, (request, reply) => {
    // Held by the lifecycle until it is done: once its client has gone, its connection no longer
    // keeps a shutdown from closing the database under a debit still being written.
    const handled = chatCompletion(request, reply);
    ctx.lifecycle.track(handled);
    return handled;
  });
}

/**
 * An LLM answer on the wire: a whole one with what it cost and the balance after; a stream with
 * only the pre-request balance (the cost is unknown until the stream ends).
 */
export function sendLlmAnswer(ctx: GatewayContext, reply: FastifyReply, answer: LlmAnswer): FastifyReply {
  if (answer.kind === 'whole') {
    setSpendHeaders(reply, answer.cost, answer.remaining);
    return reply.code(200).type(answer.contentType).send(answer.body);
  }
  setSpendHeaders(reply, null, reply.request.auth.balanceMicros);
  reply.code(200).headers({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  return sendStream(reply, ctx.metrics, answer.events);
}
