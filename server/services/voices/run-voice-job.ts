// The worker's side of every voice job: make the profile from the voice's source, fill in what
// the engine measured, report (the preview worker makes the voice's preview on the new profile).
import { getBlobOrThrow, readBlobBytes } from '../blobs/blob-store.ts';
import { ServiceError } from '../errors.ts';
import type { Job } from '../jobs/job-queue.ts';
import type { VoiceJobPayload } from '../jobs/queue-voice-job.ts';
import { applyVoiceMeasurements } from './apply-voice-measurements.ts';
import type { VoiceProfileRecord } from './present-voice.ts';
import { saveVoiceProfile } from './save-voice-profile.ts';
import type { VoiceClip, VoiceDeps } from './voice-deps.ts';

const SAMPLE_TEXT =
  'The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore, and the shells she sells are surely sea shells. ' +
  'A voice agent answers the phone, listens carefully, and replies in a calm and friendly way.';

type SourceVoice = { id: string; orgId: string | null; sourceAudioBlobId: string | null; language: string };

/** The audio a voice is made from: its clips, or (voices without one) a sample it speaks. */
async function sourceClip(deps: VoiceDeps, voice: SourceVoice, payload: VoiceJobPayload, signal: AbortSignal): Promise<VoiceClip> {
  // Each clip once: a voice made before duplicates were refused may list one several times.
  const blobIds = [...new Set(payload.blobIds ?? (voice.sourceAudioBlobId ? [voice.sourceAudioBlobId] : []))];
  if (blobIds.length > 0 && voice.orgId) {
    const clips: VoiceClip[] = [];
    // One clip at a time (each at most 25 MB), reading the next between them.
    for (const blobId of blobIds) {
      const blob = await getBlobOrThrow(deps.prisma, voice.orgId, blobId).catch(() => {
        throw new ServiceError('conflict', `The voice's source clip (blob '${blobId}') was deleted; clone the voice again from a clip.`, 'voice_id');
      });
      clips.push(deps.engines.decodeClip(await readBlobBytes(deps.dataDir, blob)));
    }
    return clips.length === 1 ? clips[0]! : deps.engines.joinClips(clips);
  }
  return speakSample(deps, payload.sampleFromVoiceId ?? voice.id, voice.language, signal);
}

/** About fifteen seconds of the voice, from any ready profile it has (platform voices). */
async function speakSample(deps: VoiceDeps, voiceId: string, language: string, signal: AbortSignal): Promise<VoiceClip> {
  const profiles = await deps.prisma.voiceProfile.findMany({ where: { voiceId, status: 'ready' } });
  const clip = await deps.engines.speak(profiles, SAMPLE_TEXT, language, signal);
  if (!clip) throw new ServiceError('model_offline', `Voice '${voiceId}' has no source clip and none of its engines is online to speak a sample.`);
  return clip;
}

export async function runVoiceJob(deps: VoiceDeps, job: Job, signal: AbortSignal): Promise<{ voice_id: string; profile: VoiceProfileRecord }> {
  const { prisma, engines } = deps;
  const payload = job.input as unknown as VoiceJobPayload;
  if (!job.voiceId) throw new ServiceError('internal_error', 'A voice job without a voice.');
  const voice = await prisma.voice.findFirst({ where: { id: job.voiceId, deletedAt: null } });
  if (!voice) throw new ServiceError('voice_not_found', 'The voice was deleted before the job ran.');
  const modelId = engines.resolveModel(payload.modelId);
  const clip = await sourceClip(deps, voice, payload, signal);
  const prepared = await engines.prepare(
    modelId,
    clip,
    { name: voice.name, language: voice.language, transcript: voice.sourceTranscript },
    payload.mode,
    signal,
  );
  const profile = await saveVoiceProfile(prisma, {
    voiceId: voice.id,
    modelId,
    prepared,
    profileVersion: payload.profileVersion,
    sourceVersion: voice.sourceVersion,
  });
  if (job.kind !== 'prepare_profile') await applyVoiceMeasurements(prisma, voice.id, prepared);
  deps.previewsWanted?.();
  return { voice_id: voice.id, profile };
}
