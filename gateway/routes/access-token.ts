// POST /access-token: Cartesia's access tokens (docs.cartesia.ai/api-reference/auth/access-token;
// "Authenticate your client applications"): a backend mints, with its key, a short-lived token
// for a browser, `{grants: {tts?, stt?}, expires_in?}` → `{token}`. The token (`at_…`, stateless
// and signed: server/services/keys/client-secret-format.ts) stands for that key, in its org, on
// the routes its grants open (tts: /tts/bytes, /tts/sse, /tts/websocket; stt: /stt/websocket,
// /stt/turns/websocket), until it expires; the key's revocation, expiry, budget and model scope
// apply to it as to the key. The dashboard's streaming playground opens /tts/websocket with one.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ServiceError } from '../../server/services/errors.ts';
import { hashApiKey } from '../../server/services/keys/api-key-format.ts';
import { isAccessToken, isClientSecret } from '../../server/services/keys/client-secret-format.ts';
import { ACCESS_TOKEN_MAX_SECONDS, createAccessToken } from '../../server/services/keys/create-access-token.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import type { GatewayContext } from '../context.ts';
import { presentedKey } from '../core/gateway-core.ts';

/** The body as Cartesia's SDKs send it (each field may be null); `agent` is Cartesia's Agents endpoint, which this gateway has not. */
export const AccessTokenRequestSchema = z.strictObject({
  grants: z
    .strictObject({ tts: z.boolean().nullish(), stt: z.boolean().nullish(), agent: z.boolean().nullish() })
    .nullish()
    .meta({ description: 'What the token opens: tts (/tts/bytes, /tts/sse, /tts/websocket), stt (/stt/websocket, /stt/turns/websocket). At least one.' }),
  expires_in: z
    .number()
    .int()
    .min(1)
    .max(ACCESS_TOKEN_MAX_SECONDS)
    .nullish()
    .meta({ description: `Seconds the token is valid for, from now (at most ${ACCESS_TOKEN_MAX_SECONDS}; default 600).` }),
});

export function registerAccessTokenRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  app.post('/access-token', {
    config: {
      // Minted with a key only: a token (or a realtime client secret) does not mint another.
      credential: async (request) => {
        const presented = presentedKey(request);
        if (presented && (isAccessToken(presented) || isClientSecret(presented)))
          throw new ServiceError(
            'invalid_api_key',
            'An access token cannot be minted with a token or a client secret: mint it from your backend with an API key.',
          );
        return null;
      },
    },
    handler: async (request) => {
      const { grants, expires_in } = parseInput(AccessTokenRequestSchema, request.body);
      // Cartesia's own examples ask for agent beside tts and stt: ignored then, refused alone.
      if (grants?.agent && !grants.tts && !grants.stt)
        throw new ServiceError('invalid_request', 'grants.agent: this gateway has no Agents endpoint; grant tts or stt.', 'grants.agent');
      const { token } = await createAccessToken(ctx.db.prisma, {
        orgId: request.auth.orgId,
        keyHash: hashApiKey(presentedKey(request)!),
        grants: { tts: grants?.tts === true, stt: grants?.stt === true },
        expiresInSeconds: expires_in ?? undefined,
        now: ctx.clock.now(),
      });
      return { token };
    },
  });
}
