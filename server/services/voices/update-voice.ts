// Rename, retag, re-describe an owned voice (PATCH /voices/{id}).
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { getOwnedVoiceOrThrow } from './get-voice.ts';
import { canonicalLanguage } from './list-voices.ts';
import { presentVoice, voiceInclude, type VoiceRecord } from './present-voice.ts';
import { MAX_TAG_LENGTH, MAX_TAGS, normalizeTags, voiceSearchFields } from './voice-search.ts';

export const VoiceName = z.string().trim().min(1, 'must not be empty').max(100);
export const VoiceDescription = z.string().trim().max(1000);
export const VoiceTags = z.array(z.string().trim().min(1).max(MAX_TAG_LENGTH)).max(MAX_TAGS).transform(normalizeTags);
export const VoiceGender = z.enum(['female', 'male', 'neutral', '']);
export const VoiceLanguage = z
  .string()
  .trim()
  .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/, 'a language tag such as en or en-US')
  .transform(canonicalLanguage);

export const UpdateVoiceInput = z
  .strictObject({ name: VoiceName, description: VoiceDescription, tags: VoiceTags, gender: VoiceGender, language: VoiceLanguage })
  .partial()
  .refine((v) => Object.keys(v).length > 0, 'send at least one of name, description, tags, gender, language');
export type UpdateVoiceInput = z.infer<typeof UpdateVoiceInput>;

export async function updateVoice(prisma: Prisma, orgId: string, voiceId: string, input: UpdateVoiceInput): Promise<VoiceRecord> {
  const voice = await getOwnedVoiceOrThrow(prisma, orgId, voiceId);
  const merged = {
    name: input.name ?? voice.name,
    description: input.description ?? voice.description,
    tags: input.tags ?? (voice.tags as string[]),
  };
  const updated = await prisma.voice.update({
    where: { id: voice.id },
    data: { ...input, ...voiceSearchFields(merged) },
    include: voiceInclude(orgId),
  });
  return presentVoice(updated, orgId);
}
