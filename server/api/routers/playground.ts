// The playground (app/(dashboard)/playground): what its sections need of the server besides the
// gateway proxy. The streaming-speech section opens the gateway's /tts/websocket from the
// browser with a 60 s Cartesia access token (`at_…`) minted here, through the gateway's
// POST /access-token with the org's dashboard key, as the Talk page mints its client secret:
// the page never holds a key. The chat section reads what an answer cost from the ledger by its
// request id (a streamed answer's headers are sent before its cost is known).
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { formatUsd } from '../../money.ts';
import { getRequestCharge } from '../../services/credits/get-request-charge.ts';
import { getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { postToGateway } from '../gateway-proxy.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, gatewayUrlOf, orgProcedure } from '../trpc.ts';

// The token only has to outlive opening the socket; an open socket lives on.
export const SPEECH_TOKEN_SECONDS = 60;

const MintedToken = z.object({ token: z.string().startsWith('at_') });

export const playgroundRouter = createTRPCRouter({
  /** An access token with the tts grant for one streaming synthesis, and the socket's URL at the gateway's public address. */
  speechToken: orgProcedure.mutation(async ({ ctx }) => {
    const key = await getOrCreateDashboardKey(ctx.db, ctx.org.id);
    const answer = await postToGateway({ gatewayUrl: gatewayUrlOf(ctx), key }, ['access-token'], {
      grants: { tts: true },
      expires_in: SPEECH_TOKEN_SECONDS,
    });
    const { token } = MintedToken.parse(answer);
    return { token, expiresInSeconds: SPEECH_TOKEN_SECONDS, websocketUrl: `${loadConfig().publicBaseUrl.replace(/^http/, 'ws')}/tts/websocket` };
  }),

  /** What a recent request of the org cost (its usage debits), or null while none is written. */
  charge: orgProcedure.input(inputOf(z.strictObject({ requestId: z.string().min(1).max(128) }))).query(async ({ ctx, input }) => {
    const charge = await getRequestCharge(ctx.db.prisma, { orgId: ctx.org.id, requestId: input.requestId, now: Date.now() });
    if (!charge) return null;
    return {
      costUsd: formatUsd(charge.costMicros),
      remainingUsd: formatUsd(charge.balanceAfterMicros),
      inputTokens: charge.inputTokens,
      outputTokens: charge.outputTokens,
    };
  }),
});
