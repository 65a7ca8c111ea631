// A vendor-compatible scope's error answers: the gateway's envelope, with the fields the vendor's
// own clients read beside it (ElevenLabs' `detail`, Deepgram's `err_code` …), so both kinds of
// client find what they look for in one body. The scope's hook shapes what its routes answer;
// what is answered before routing reaches the scope (a path that does not decode, an id longer
// than the router takes, a method the path does not have: gateway/app.ts) is shaped by its path.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type VendorErrorFields = (error: { code: string; message: string }, request: FastifyRequest, reply: FastifyReply) => Record<string, unknown>;

export interface VendorErrorShape {
  fields: VendorErrorFields;
  /** The vendor's paths (the query left out): every error on them carries the fields, routed or not. */
  paths: RegExp;
}

export function useVendorErrorShape(scope: FastifyInstance, shape: VendorErrorShape): void {
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
    return JSON.stringify({ ...shape.fields({ code, message }, request, reply), ...body });
  });
}

/** For an error answered before routing: the fields of the vendor whose paths hold the request's, if any. */
export function vendorFieldsByPath(shapes: readonly VendorErrorShape[], url: string): VendorErrorFields | undefined {
  const path = url.split('?', 1)[0]!;
  return shapes.find((shape) => shape.paths.test(path))?.fields;
}
