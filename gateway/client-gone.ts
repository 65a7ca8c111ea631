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

/**
 * The signal for an engine request: aborted when the client goes away (`clientGone`), or
 * with the shutdown error when `streamsEnded` fires at the end of a shutdown's grace period.
 * Done by hand rather than with AbortSignal.any, which keeps weak references per request on
 * the process-long shutdown signal and showed up in profiles of the chat hot path; here the
 * one listener on the shutdown signal is removed when the response closes.
 */
export function engineSignal(reply: FastifyReply, clientGone: AbortSignal, streamsEnded: AbortSignal): AbortSignal {
  if (streamsEnded.aborted) return AbortSignal.abort(streamsEnded.reason);
  if (clientGone.aborted) return clientGone;
  const controller = new AbortController();
  const onShutdown = () => controller.abort(streamsEnded.reason);
  streamsEnded.addEventListener('abort', onShutdown, { once: true });
  clientGone.addEventListener('abort', () => controller.abort(clientGone.reason), { once: true });
  reply.raw.once('close', () => streamsEnded.removeEventListener('abort', onShutdown));
  return controller.signal;
}
