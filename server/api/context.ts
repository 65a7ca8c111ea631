import { sharedCredentialThrottle } from '../auth/credential-throttle.ts';
import { getSessionUser } from '../auth/session.ts';
import { clientAddress } from '../config/client-address.ts';
import { loadConfig } from '../config/env.ts';
import { getDb } from '../db/dashboard-db.ts';
import { getMailer } from './mailer.ts';
import { ORG_COOKIE } from './org-cookie.ts';
import type { TrpcContext } from './trpc.ts';

export { ORG_COOKIE };

/** Context for a tRPC request arriving over HTTP (app/api/trpc/[trpc]/route.ts). */
export async function createHttpContext(req: Request): Promise<TrpcContext> {
  const user = await getSessionUser();
  const requestedOrgId = readCookie(req.headers.get('cookie'), ORG_COOKIE);
  return {
    db: getDb(),
    session: user ? { user } : null,
    requestedOrgId,
    clientIp: dashboardClientIp(req.headers.get('x-forwarded-for')),
    credentialThrottle: sharedCredentialThrottle(),
    mailer: getMailer(),
  };
}

const holder = globalThis as typeof globalThis & { __svcTrustedProxies?: number };

/**
 * Next does not expose the socket: it only fills X-Forwarded-For with the socket's address
 * when the request has none, so without a trusted proxy the header may be the client's own
 * invention and the dashboard knows no address (its per-address limits are off; the
 * per-user and per-code ones still hold).
 */
export function dashboardClientIp(forwardedFor: string | null, trustedProxies = (holder.__svcTrustedProxies ??= loadConfig().trustedProxies)): string | null {
  return clientAddress({ socketAddress: null, forwardedFor, trustedProxies });
}

function readCookie(header: string | null, name: string): string | null {
  for (const part of header?.split(';') ?? []) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return null;
}
