// The dashboard's proxy to the gateway (server/api/gateway-proxy.ts): the signed-in user's org,
// its dashboard key, an allowlist of routes, bodies streamed both ways.
import { loadConfig } from '@/server/config/env';
import { ORG_COOKIE } from '@/server/api/context';
import { getDb } from '@/server/db/dashboard-db';
import { gatewayInternalUrl, proxyToGateway } from '@/server/api/gateway-proxy';
import { getSessionUser } from '@/server/auth/session';
import { getOrCreateDashboardKey } from '@/server/services/keys/get-dashboard-key';
import { getActiveMembership } from '@/server/services/users/get-active-membership';
import type { NextRequest } from 'next/server';

// Never cached or pre-rendered; Node runtime for the database drivers.
export const dynamic = 'force-dynamic';
export const runtime = 'nodejs';

type RouteContext = { params: Promise<{ path: string[] }> };

async function handler(request: NextRequest, context: RouteContext): Promise<Response> {
  const { path } = await context.params;
  return proxyToGateway(request, path, {
    gatewayUrl: gatewayInternalUrl(loadConfig()),
    async resolveOrg() {
      const user = await getSessionUser();
      if (!user) return null;
      const membership = await getActiveMembership(getDb().prisma, { userId: user.id, orgId: request.cookies.get(ORG_COOKIE)?.value ?? null });
      return membership ? { orgId: membership.org.id } : null;
    },
    keyFor: (orgId) => getOrCreateDashboardKey(getDb(), orgId),
  });
}

export { handler as GET, handler as POST, handler as PUT, handler as PATCH, handler as DELETE };
