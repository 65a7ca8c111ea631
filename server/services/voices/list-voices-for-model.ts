// The voices an org can synthesize with on one TTS model right now: visible (platform or own,
// not deleted) with a ready, unexpired profile for that model, the same rule as
// resolveVoiceProfile applies to a TTS request. For pickers (the dashboard's playground).
import type { Prisma } from '../../db/database.ts';
import { visibleVoiceWhere } from './resolve-voice-profile.ts';

export const MAX_PICKER_VOICES = 500;

export interface PickerVoice {
  id: string;
  name: string;
  language: string;
  gender: string;
  isOwner: boolean;
}

export async function listVoicesForModel(prisma: Prisma, input: { orgId: string; modelId: string; now?: Date }): Promise<PickerVoice[]> {
  const now = input.now ?? new Date();
  const rows = await prisma.voice.findMany({
    where: {
      ...visibleVoiceWhere(input.orgId),
      profiles: { some: { modelId: input.modelId, status: 'ready', OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] } },
    },
    // The org's own voices first (what a user came to try), then by name.
    orderBy: [{ orgId: { sort: 'asc', nulls: 'last' } }, { name: 'asc' }, { id: 'asc' }],
    take: MAX_PICKER_VOICES,
    select: { id: true, name: true, language: true, gender: true, orgId: true },
  });
  return rows.map((v) => ({ id: v.id, name: v.name, language: v.language, gender: v.gender, isOwner: v.orgId === input.orgId }));
}
