// The models an org can call, for pickers (the dashboard's playground and clone form): active
// models with their display name and, for STT, the sample rates they accept.
import type { Prisma } from '../../db/database.ts';
import { byModality } from './list-model-health.ts';

export interface ActiveModel {
  id: string;
  modality: 'llm' | 'tts' | 'stt';
  displayName: string;
  /** STT: the sample rates the model accepts; null = all six of the API. */
  sampleRates: number[] | null;
}

export async function listActiveModels(prisma: Prisma, input: { modality?: 'llm' | 'tts' | 'stt' } = {}): Promise<ActiveModel[]> {
  const rows = await prisma.model.findMany({
    where: { status: 'active', ...(input.modality ? { modality: input.modality } : {}) },
    // Enums sort as text on SQLite and in declaration order on PostgreSQL: sort here instead.
    orderBy: { id: 'asc' },
    select: { id: true, modality: true, displayName: true, sampleRates: true },
  });
  return rows.sort(byModality).map((m) => ({
    id: m.id,
    modality: m.modality,
    displayName: m.displayName,
    sampleRates: Array.isArray(m.sampleRates) ? (m.sampleRates as unknown[]).filter((r): r is number => typeof r === 'number') : null,
  }));
}
