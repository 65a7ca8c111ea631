import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { PLATFORM_VOICES } from './platform-voices.ts';
import { voiceSearchFields } from './voice-search.ts';

// Lists are newest first: seeded voices get fixed creation times a second apart, in the order
// of PLATFORM_VOICES, so the library reads as that list does (English first, not Hindi) and
// every voice an org makes, being newer, comes before them.
const SEEDED_AT = Date.UTC(2025, 0, 1);

/**
 * Creates or refreshes the platform voices and their ready profiles, for the models that
 * exist in the registry. Idempotent; runs at gateway start.
 */
export async function seedPlatformVoices(prisma: Prisma): Promise<number> {
  const models = new Set((await prisma.model.findMany({ select: { id: true } })).map((m) => m.id));
  let seeded = 0;
  for (const [i, v] of PLATFORM_VOICES.entries()) {
    if (!models.has(v.modelId)) continue;
    const createdAt = new Date(SEEDED_AT - i * 1000);
    const data = {
      name: v.name,
      description: v.description,
      language: v.language,
      gender: v.gender,
      tags: v.tags,
      featured: v.featured,
      modelFamily: v.modelId,
      createdAt,
      ...voiceSearchFields(v),
    };
    await prisma.voice.upsert({ where: { id: v.id }, create: { id: v.id, orgId: null, kind: 'library', ...data }, update: data });
    await prisma.voiceProfile.upsert({
      where: { voiceId_modelId: { voiceId: v.id, modelId: v.modelId } },
      create: { id: newId('vpr'), voiceId: v.id, modelId: v.modelId, upstreamId: v.engineVoice, status: 'ready' },
      update: { upstreamId: v.engineVoice, status: 'ready' },
    });
    seeded++;
  }
  return seeded;
}
