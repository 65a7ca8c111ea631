// POST /v1/responses (OpenAI's Responses API; what the Vercel AI SDK's default `openai(model)`
// calls): the request parsed, the response asked through the LLM pipeline
// (gateway/llm/create-response.ts: relayed from an engine that serves the Responses API,
// translated through chat completions for one that does not), the answer sent. Metered like
// chat: the same errors (401, 402, 429, 404 model_not_found).
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../context.ts';
import { parseJsonObject } from '../json-body.ts';
import type { LlmAnswer } from '../llm/chat-completion.ts';
import { refuseManyReferences, type ResponseCreator } from '../llm/create-response.ts';
import { upstreamCall } from '../core/try-upstreams.ts';
import { onResponseClose } from '../client-gone.ts';
import { LLM_BODY_LIMIT, sendLlmAnswer } from './chat-completions.ts';

/** `responses` is shared with the Responses socket (routes/responses-websocket.ts): one item store, one memory of chat-only upstreams. */
export function registerResponsesRoutes(app: FastifyInstance, ctx: GatewayContext, responses: ResponseCreator): void {
  // Registered in chat's scope, whose JSON parser keeps the raw bytes (forwarded as they are).
  app.post('/v1/responses', { bodyLimit: LLM_BODY_LIMIT, config: { metered: true } }, async (request, reply) => {
    const raw = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
    refuseManyReferences(raw);
    const body = parseJsonObject(raw);
    const model = ctx.registry.resolve(body.model, 'llm', request.auth);
    request.modelId = model.id;
    const run = await responses.reserve(ctx, { auth: request.auth, requestId: request.id }, model, raw, body, LLM_BODY_LIMIT);
    onResponseClose(reply, run.releaseUnlessStreaming);
    // As for chat completions: an overall deadline for a whole answer only.
    const engine = upstreamCall(ctx, reply, request.ticket, { deadline: body.stream !== true });
    const firstOutput = () => ctx.metrics.firstOutput('llm_first_token', model.id, reply.elapsedTime / 1000);
    let answer: LlmAnswer | null;
    try {
      answer = await responses.create(run, { raw, body, engine, log: request.log, firstOutput });
    } catch (e) {
      if (engine.clientGone) return reply; // the client left before the engine answered
      throw e;
    }
    return answer ? sendLlmAnswer(ctx, reply, answer) : reply;
  });
}
