import { getSessionUser } from '../auth/session.js';
import { getDb } from './db.js';
import type { TrpcContext } from './trpc.js';

/** The cookie the browser uses to say which of the user's orgs it acts for. */
export const ORG_COOKIE = 'svc_org';

/** Context for a tRPC request arriving over HTTP (app/api/trpc/[trpc]/route.ts). */
export async function createHttpContext(req: Request): Promise<TrpcContext> {
  const user = await getSessionUser();
  const requestedOrgId = readCookie(req.headers.get('cookie'), ORG_COOKIE);
  return { db: getDb(), session: user ? { user } : null, requestedOrgId };
}

function readCookie(header: string | null, name: string): string | null {
  for (const part of header?.split(';') ?? []) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return null;
}
