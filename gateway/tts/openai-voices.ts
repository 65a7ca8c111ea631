// OpenAI's voice names (alloy, ash, …): the defaults of OpenAI's clients, and the only voices some
// plugins accept (pipecat's OpenAI TTS). On /v1/audio/speech and /v1/realtime such a name stands
// for a voice of the gateway, per model (docs/voices.md, "OpenAI's voice names").
import type { Prisma } from '../../server/db/database.ts';
import { defaultVoiceFor } from '../../server/services/voices/default-voice.ts';
import { visibleVoiceWhere } from '../../server/services/voices/resolve-voice-profile.ts';

export const OPENAI_VOICES = new Set(['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse', 'marin', 'cedar']);

/**
 * The gateway voice `asked` names on `modelId`. Anything but an OpenAI voice name is a voice id
 * already. An OpenAI name is, in order: a visible voice with that very id (how an operator
 * overrides the mapping), a voice whose ready profile on the model is the engine's own voice of
 * that name (an OpenAI upstream's `alloy`), `preferred` (a realtime profile's voice), the model's
 * default voice. Unchanged when none fits: the request then fails as for any unknown voice.
 */
export async function voiceForOpenAiName(prisma: Prisma, orgId: string, modelId: string, asked: string, preferred?: string): Promise<string> {
  if (!OPENAI_VOICES.has(asked)) return asked;
  const byId = await prisma.voice.findFirst({ where: { id: asked, ...visibleVoiceWhere(orgId) }, select: { id: true } });
  if (byId) return byId.id;
  const engines = await prisma.voiceProfile.findFirst({
    where: { modelId, upstreamId: asked, status: 'ready', voice: visibleVoiceWhere(orgId) },
    orderBy: [{ voice: { orgId: 'asc' } }, { voiceId: 'asc' }],
    select: { voiceId: true },
  });
  return engines?.voiceId ?? preferred ?? (await defaultVoiceFor(prisma, modelId)) ?? asked;
}
