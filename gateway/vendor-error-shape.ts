// A vendor-compatible scope's error answers: the gateway's envelope, with the fields the vendor's
// own clients read beside it (ElevenLabs' `detail`, Deepgram's `err_code` …), so both kinds of
// client find what they look for in one body.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type VendorErrorFields = (error: { code: string; message: string }, request: FastifyRequest, reply: FastifyReply) => Record<string, unknown>;

export function useVendorErrorShape(scope: FastifyInstance, fields: VendorErrorFields): void {
  scope.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
    let body: { error?: { code?: unknown; message?: unknown } };
    try {
      body = JSON.parse(payload) as typeof body;
    } catch {
      return payload;
    }
    const { code, message } = body.error ?? {};
    if (typeof code !== 'string' || typeof message !== 'string') return payload;
    return JSON.stringify({ ...fields({ code, message }, request, reply), ...body });
  });
}
