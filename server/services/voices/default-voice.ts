import type { Prisma } from '../../db/database.ts';

/** A platform voice with a ready profile for `modelId` (featured first, then by id), for clients that name no voice of ours; null: none. */
export async function defaultVoiceFor(prisma: Prisma, modelId: string): Promise<string | null> {
  const profile = await prisma.voiceProfile.findFirst({
    where: { modelId, status: 'ready', voice: { orgId: null, deletedAt: null } },
    orderBy: [{ voice: { featured: 'desc' } }, { voiceId: 'asc' }],
    select: { voiceId: true },
  });
  return profile?.voiceId ?? null;
}
