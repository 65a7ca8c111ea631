// The engines' copies of voices cloned here, deleted once nothing speaks through them: their voice
// was deleted, its profile replaced by a new clone, or the clone refused after the engine made it.
// Each takes one of the operator's voice slots at the engine (Cartesia, ElevenLabs). Done by a
// housekeeping job (kind delete_engine_copies, never listed), so that a delete from the dashboard,
// which has no engines, is carried out by a gateway's worker, and an engine that is down is tried
// again later.
import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { enqueueJob, type Job, type Tx } from '../jobs/job-queue.ts';
import type { VoiceDeps } from './voice-deps.ts';

/** An engine's voice, as a profile names it: the model it was cloned with and the engine's id. */
export interface EngineCopy {
  modelId: string;
  upstreamId: string;
}

/** Queues the deletion of these engine copies (nothing when there are none). */
export async function queueEngineCopyDeletion(prisma: Prisma | Tx, orgId: string, voiceId: string | null, copies: EngineCopy[]): Promise<void> {
  const named = copies.filter((c) => c.upstreamId !== '');
  if (named.length === 0) return;
  await enqueueJob(prisma, { orgId, kind: 'delete_engine_copies', voiceId, payload: { copies: named } });
}

/** The worker's side: each copy deleted at its model's engines where they can (a copy already gone is fine). */
export async function deleteEngineCopies(deps: VoiceDeps, job: Job, signal: AbortSignal): Promise<{ deleted: number }> {
  const { copies } = job.input as { copies?: EngineCopy[] };
  if (!Array.isArray(copies)) throw new ServiceError('internal_error', 'A delete_engine_copies job without copies.');
  let deleted = 0;
  for (const copy of copies) if (await deps.engines.deleteEngineCopy(copy.modelId, copy.upstreamId, signal)) deleted++;
  return { deleted };
}
