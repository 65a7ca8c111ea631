import type { Prisma } from '../../db/database.ts';
import type { PreparedProfile } from './voice-deps.ts';
import { voiceSearchFields } from './voice-search.ts';

/** What the engine measured fills what the caller left empty (gender, description); its facts join source_metadata. */
export async function applyVoiceMeasurements(prisma: Prisma, voiceId: string, prepared: PreparedProfile): Promise<void> {
  const voice = await prisma.voice.findUniqueOrThrow({ where: { id: voiceId } });
  const description = voice.description || prepared.description || '';
  const gender = voice.gender || prepared.gender || '';
  const metadata = { ...((voice.sourceMetadata as Record<string, unknown> | null) ?? {}), ...prepared.metadata };
  await prisma.voice.update({
    where: { id: voiceId },
    data: { description, gender, sourceMetadata: metadata as object, ...voiceSearchFields({ name: voice.name, description, tags: voice.tags as string[] }) },
  });
}
