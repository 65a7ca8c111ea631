// A new voice of an org (a clone, a localization), written with its search fields.
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import type { Tx } from '../jobs/job-queue.ts';
import { voiceSearchFields } from './voice-search.ts';

export interface NewVoice {
  orgId: string;
  name: string;
  language: string;
  kind: 'instant_clone' | 'pro_clone' | 'localized';
  parentVoiceId?: string;
  sourceAudioBlobId: string | null;
  sourceTranscript: string | null;
  sourceMetadata: Record<string, unknown>;
  sourceVersion: string;
  description?: string;
  gender?: string;
  tags?: string[];
  /** The model the voice is made for (its model_family). */
  modelId: string;
}

/** Creates the voice and returns its id. */
export async function createVoice(prisma: Prisma | Tx, v: NewVoice): Promise<string> {
  const id = newId('voice');
  const tags = v.tags ?? [];
  await prisma.voice.create({
    data: {
      id,
      orgId: v.orgId,
      name: v.name,
      description: v.description ?? '',
      language: v.language,
      gender: v.gender ?? '',
      tags,
      kind: v.kind,
      parentVoiceId: v.parentVoiceId ?? null,
      sourceAudioBlobId: v.sourceAudioBlobId,
      sourceTranscript: v.sourceTranscript,
      sourceMetadata: v.sourceMetadata as object,
      sourceVersion: v.sourceVersion,
      modelFamily: v.modelId,
      ...voiceSearchFields({ name: v.name, description: v.description ?? '', tags }),
    },
  });
  return id;
}
