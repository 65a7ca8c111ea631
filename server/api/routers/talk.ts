// The Talk page (app/(dashboard)/talk): the gateway's realtime profiles to pick from (or an LLM,
// a TTS model and one of its voices: the session's other legs the gateway's defaults), and a
// short-lived client secret for one call. The page never holds a key: the secret is minted here,
// through the gateway's POST /v1/realtime/client_secrets with the org's dashboard key, and the
// browser sends its SDP offer with it to the gateway's public URL (docs/realtime.md, "WebRTC").
import { z } from 'zod';
import { loadRealtimeProfiles } from '../../config/realtime-profiles.ts';
import { loadConfig } from '../../config/env.ts';
import { ServiceError } from '../../services/errors.ts';
import { getOrCreateDashboardKey } from '../../services/keys/get-dashboard-key.ts';
import { listActiveModels } from '../../services/models/list-active-models.ts';
import { postToGateway } from '../gateway-proxy.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, gatewayUrlOf, orgProcedure } from '../trpc.ts';

// A call from the page is short; the secret only has to outlive the SDP exchange.
const SECRET_SECONDS = 60;

const StartCall = z.union([
  z.strictObject({ profile: z.string().min(1).max(200), instructions: z.string().max(4_000).optional() }),
  z.strictObject({
    llm: z.string().min(1).max(200),
    tts: z.string().min(1).max(200),
    voice: z.string().min(1).max(200),
    instructions: z.string().max(4_000).optional(),
  }),
]);

const MintedSecret = z.object({ value: z.string().startsWith('ek_'), expires_at: z.number() });

const profilesFile = () => loadConfig().realtimeProfilesFile;

export const talkRouter = createTRPCRouter({
  /** The realtime profiles the gateway reads (the same file), and whether the org has credit to talk. */
  profiles: orgProcedure.query(async ({ ctx }) => ({
    profiles: [...loadRealtimeProfiles(profilesFile()).values()].map((p) => ({
      id: p.id,
      llm: p.llm,
      stt: p.stt ?? null,
      tts: p.tts ?? null,
      voice: p.voice ?? null,
      instructions: p.instructions ?? null,
    })),
    /** For a call without a profile: the LLMs and TTS models (the voices of one: voices.forModel). */
    llms: (await listActiveModels(ctx.db.prisma, { modality: 'llm' })).map((m) => ({ id: m.id, name: m.displayName })),
    ttsModels: (await listActiveModels(ctx.db.prisma, { modality: 'tts' })).map((m) => ({ id: m.id, name: m.displayName })),
    hasCredit: ctx.org.balanceMicros > 0n,
  })),

  /** A client secret for one call of the profile (or of the LLM with the voice), and where the browser sends its offer. */
  startCall: orgProcedure.input(inputOf(StartCall)).mutation(async ({ ctx, input }) => {
    if ('profile' in input && !loadRealtimeProfiles(profilesFile()).has(input.profile)) {
      throw new ServiceError('model_not_found', `There is no realtime profile "${input.profile}".`, 'profile');
    }
    const key = await getOrCreateDashboardKey(ctx.db, ctx.org.id);
    const instructions = input.instructions?.trim();
    // The gateway checks the models and the voice when it mints the secret (404 model_not_found, voice_not_found).
    const legs = 'profile' in input ? { model: input.profile } : { model: input.llm, audio: { output: { model: input.tts, voice: input.voice } } };
    const answer = await postToGateway({ gatewayUrl: gatewayUrlOf(ctx), key }, ['v1', 'realtime', 'client_secrets'], {
      expires_after: { anchor: 'created_at', seconds: SECRET_SECONDS },
      session: { type: 'realtime', ...legs, ...(instructions ? { instructions } : {}) },
    });
    const secret = MintedSecret.parse(answer);
    return { secret: secret.value, expiresAt: secret.expires_at, callsUrl: `${loadConfig().publicBaseUrl}/v1/realtime/calls` };
  }),
});
