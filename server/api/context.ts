import { getSessionUser } from '../auth/session.js';
import { getDb } from './db.js';
import type { TrpcContext } from './trpc.js';

/** The cookie the browser uses to say which of the user's orgs it acts for. */
export const ORG_COOKIE = 'svc_org';

/** Context for a tRPC request arriving over HTTP (app/api/trpc/[trpc]/route.ts). */
export async function createHttpContext(req: Request): Promise<TrpcContext> {
  const user = await getSessionUser();
  const requestedOrgId = readCookie(req.headers.get('cookie'), ORG_COOKIE);
  return { db: getDb(), session: user ? { user } : null, requestedOrgId, clientIp: clientIp(req.headers.get('x-forwarded-for')) };
}

/**
 * Next passes the socket's address as X-Forwarded-For when the request has none. Behind a
 * reverse proxy that appends to the header, its last entry is the address the proxy saw; the
 * entries before it are whatever the client wrote.
 */
function clientIp(forwardedFor: string | null): string | null {
  const last = forwardedFor?.split(',').pop()?.trim();
  return last ? last.slice(0, 100) : null;
}

function readCookie(header: string | null, name: string): string | null {
  for (const part of header?.split(';') ?? []) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return null;
}
