// Where a route takes Cartesia's access tokens (`at_…`, minted by POST /access-token) besides
// keys: the `credential` of its route config (gateway/app.ts). A token is presented where a key
// would be (Authorization: Bearer, X-API-Key, or on a socket ?access_token= / ?api_key=), and
// stands for the key that minted it when it carries the route's grant.
import type { FastifyRequest } from 'fastify';
import type { AccessTokenGrants } from '../../server/services/keys/create-access-token.ts';
import { isAccessToken } from '../../server/services/keys/client-secret-format.ts';
import { verifyAccessToken } from '../../server/services/keys/verify-access-token.ts';
import type { GatewayContext } from '../context.ts';
import { presentedKey } from './gateway-core.ts';

/** The route config's `credential` for a route `grant` opens; `onUpgrade`: a WebSocket route (the token may come in the query). */
export function accessTokenCredential(ctx: GatewayContext, grant: keyof AccessTokenGrants, onUpgrade: boolean) {
  return async (request: FastifyRequest): Promise<{ keyHash: string } | null> => {
    const presented = presentedKey(request, onUpgrade);
    if (!presented || !isAccessToken(presented)) return null;
    const { keyHash } = await verifyAccessToken(ctx.db.prisma, presented, grant, ctx.clock.now());
    return { keyHash };
  };
}
