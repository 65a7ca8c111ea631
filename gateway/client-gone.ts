import type { FastifyReply } from 'fastify';

/**
 * A signal aborted when the client goes away before its response is complete, so engine
 * work (upstream requests, child processes, decoders) stops with it.
 */
export function onClientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
