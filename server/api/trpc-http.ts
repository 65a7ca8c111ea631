// The dashboard's tRPC endpoint (app/api/trpc/[trpc]/route.ts), with the two bounds tRPC does
// not set by default: calls per batch (one POST once carried ~1,000 signUp calls, each a
// bcrypt hash) and body size (a body is read whole before any procedure sees it). Both are
// refused before the body is parsed, with a tRPC-shaped error that says which bound.
import type { TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { appRouter } from './root.ts';
import type { TrpcContext } from './trpc.ts';

export const TRPC_ENDPOINT = '/api/trpc';
/** The client batches at most this many calls too (app/providers.tsx). */
export const MAX_BATCH_CALLS = 10;
export const MAX_BODY_BYTES = 1024 * 1024;
// A dictionary is saved as a whole table; the API takes up to 8 MiB for one
// (gateway/routes/pronunciation-dicts.ts, DICT_BODY_LIMIT), so these two may send as much.
const LARGE_INPUT_BYTES = 8 * 1024 * 1024;
const LARGE_INPUT_PROCEDURES = new Set(['dicts.create', 'dicts.update']);

/** The JSON-RPC code tRPC uses for each HTTP status it answers here. */
const RPC_CODES = { 400: [-32600, 'BAD_REQUEST'], 413: [-32013, 'PAYLOAD_TOO_LARGE'] } as const;

function refuse(status: 400 | 413, message: string): Response {
  const [code, name] = RPC_CODES[status];
  const body = { error: { message, code, data: { code: name, httpStatus: status, path: null, serviceCode: null } } };
  return Response.json(body, { status });
}

/** Reads at most `limit` bytes of the body; null when there is more. */
async function readCapped(req: Request, limit: number): Promise<Uint8Array<ArrayBuffer> | null> {
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (declared > limit) return null;
  if (!req.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

/** The procedure paths a request names ("a.b,c.d" in a batch). */
function procedurePaths(url: URL): string[] {
  const raw = url.pathname.slice(url.pathname.indexOf(TRPC_ENDPOINT) + TRPC_ENDPOINT.length).replace(/^\/+/, '');
  try {
    return decodeURIComponent(raw).split(',');
  } catch {
    return raw.split(',');
  }
}

export async function handleTrpcRequest(
  req: Request,
  createContext: () => Promise<TrpcContext>,
  onError?: (opts: { error: TRPCError; path: string | undefined }) => void,
): Promise<Response> {
  const url = new URL(req.url);
  const paths = procedurePaths(url);
  if (url.searchParams.get('batch') === '1' && paths.length > MAX_BATCH_CALLS) {
    return refuse(400, `A request may carry at most ${MAX_BATCH_CALLS} calls; this one carries ${paths.length}. Send them in several requests.`);
  }
  let forwarded = req;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const limit = paths.every((p) => LARGE_INPUT_PROCEDURES.has(p)) ? LARGE_INPUT_BYTES : MAX_BODY_BYTES;
    const body = await readCapped(req, limit);
    if (!body) return refuse(413, `The request body is larger than ${limit / (1024 * 1024)} MiB, the most this endpoint reads.`);
    forwarded = new Request(req.url, { method: req.method, headers: req.headers, body });
  }
  return fetchRequestHandler({
    endpoint: TRPC_ENDPOINT,
    req: forwarded,
    router: appRouter,
    createContext,
    onError: onError && (({ error, path }) => onError({ error, path })),
  });
}
