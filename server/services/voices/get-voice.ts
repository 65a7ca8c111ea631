import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { presentVoice, voiceInclude, type VoiceRecord, type VoiceWithRelations } from './present-voice.ts';
import { visibleVoiceWhere } from './resolve-voice-profile.ts';

export const voiceNotFound = (voiceId: string) => new ServiceError('voice_not_found', `No voice with id '${voiceId}' is visible to this organization.`, 'id');

/** A voice the org can see (platform or own, not deleted); another org's voice is "not found". */
export async function getVisibleVoiceOrThrow(prisma: Prisma, orgId: string, voiceId: string): Promise<VoiceWithRelations> {
  const voice = await prisma.voice.findFirst({ where: { id: voiceId, ...visibleVoiceWhere(orgId) }, include: voiceInclude(orgId) });
  if (!voice) throw voiceNotFound(voiceId);
  return voice;
}

/** Same, for changing it: platform voices are read-only (403 voice_read_only). */
export async function getOwnedVoiceOrThrow(prisma: Prisma, orgId: string, voiceId: string): Promise<VoiceWithRelations> {
  const voice = await getVisibleVoiceOrThrow(prisma, orgId, voiceId);
  if (voice.orgId === null)
    throw new ServiceError(
      'voice_read_only',
      `Voice '${voiceId}' is a platform voice and cannot be changed; only your organization's own voices can be renamed, retagged or deleted.`,
      'id',
    );
  return voice;
}

export async function getVoice(prisma: Prisma, orgId: string, voiceId: string): Promise<VoiceRecord> {
  return presentVoice(await getVisibleVoiceOrThrow(prisma, orgId, voiceId), orgId);
}
