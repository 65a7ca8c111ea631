import { storeBlob } from '../blobs/blob-store.ts';
import type { VoiceDeps } from './voice-deps.ts';

/**
 * The greeting every new voice speaks for its sample: fixed, never built from what the client
 * sent (a voice's name in it would make `name` + GET /blobs/{sample}/content free TTS).
 */
export const GREETING_TEXT = 'Hello! Thank you for calling. How can I help you today?';

/**
 * A new voice's `sample_blob_id`: the greeting in the voice, stored as a blob of its org so
 * that people can hear it before using it. Best effort: a voice without a sample works the same.
 */
export async function storeVoiceSample(deps: VoiceDeps, voiceId: string, signal: AbortSignal): Promise<void> {
  const { prisma } = deps;
  try {
    const voice = await prisma.voice.findUniqueOrThrow({ where: { id: voiceId }, include: { profiles: { where: { status: 'ready' } } } });
    if (!voice.orgId || voice.sampleBlobId) return;
    const clip = await deps.engines.speak(voice.profiles, GREETING_TEXT, voice.language, signal);
    if (!clip) return;
    const blob = await storeBlob(prisma, deps.dataDir, { orgId: voice.orgId, contentType: 'audio/wav', bytes: clip.wav, durationMs: clip.durationMs });
    await prisma.voice.update({ where: { id: voiceId }, data: { sampleBlobId: blob.id } });
  } catch {
    // over the storage quota, engine busy or gone: the voice simply has no sample
  }
}
