// A clone clip: WAV or raw 16-bit mono PCM (at `sample_rate`), measured from the audio itself.
// How long clips must be is the voice services' rule (server/services/voices/clone-voice.ts, pro-clone-voice.ts).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ServiceError } from '../../server/services/errors.ts';
import { floatToS16, s16leBytes } from '../audio/pcm.ts';
import { wavHeader } from '../audio/wav.ts';
import { decodeUploadedAudio, measureUploadedAudio } from '../stt/decode-upload.ts';
import type { VoiceClip } from '../upstreams/contract.ts';

/** Samples converted between two pauses when joining clips: a few milliseconds of work, so other requests run in between. */
const JOIN_SLICE = 1 << 18;

export interface MeasuredClip extends VoiceClip {
  durationMs: number;
}

/**
 * The clip checked and measured from its header (the same refusals as decoding it), its samples
 * decoded when first read, then kept: an engine that takes the file (a cloud clone) or a refusal
 * (a quota) never decodes them, and a local clone decodes them when its analysis starts
 * (gateway/audio/voice-analysis.ts), so clips waiting their turn hold only their bytes.
 */
export function decodeClip(bytes: Buffer, declaredRate: number | undefined): MeasuredClip {
  const audio = measureUploadedAudio(bytes, declaredRate);
  const isWav = bytes.subarray(0, 4).toString('latin1') === 'RIFF';
  // Raw PCM is already the WAV's data: a header in front is the same file as re-encoding the
  // samples (s16 -> float -> s16 is exact), without a pass over 25 MB.
  const pcm = bytes.subarray(0, audio.frames * 2);
  let samples: Float32Array | undefined;
  return {
    get samples() {
      return (samples ??= decodeUploadedAudio(bytes, declaredRate, null).samples);
    },
    sampleRate: audio.sampleRate,
    durationMs: Math.round(audio.durationSeconds * 1000),
    wav: isWav ? bytes : Buffer.concat([wavHeader({ sampleRate: audio.sampleRate, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]),
  };
}

/**
 * A clip to store (a blob): checked and measured from its header, not decoded; raw PCM gets a
 * WAV header in front. `frames` 0 means the audio holds no samples.
 */
export function measureClipFile(bytes: Buffer, declaredRate: number | undefined): { wav: Buffer; durationMs: number; frames: number } {
  const audio = measureUploadedAudio(bytes, declaredRate);
  const isWav = bytes.subarray(0, 4).toString('latin1') === 'RIFF';
  const pcm = bytes.subarray(0, audio.frames * 2);
  return {
    frames: audio.frames,
    durationMs: Math.round(audio.durationSeconds * 1000),
    wav: isWav ? bytes : Buffer.concat([wavHeader({ sampleRate: audio.sampleRate, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]),
  };
}

/**
 * Several clips as one (professional clones); they must share a sample rate. Minutes of audio
 * take a few hundred milliseconds to copy and encode, so the work is done in slices of
 * JOIN_SLICE samples with a pause (the event loop runs) between them; `onSlice` counts them.
 */
export async function joinClips(clips: MeasuredClip[], onSlice: () => void = () => {}): Promise<MeasuredClip> {
  const rate = clips[0]!.sampleRate;
  if (clips.some((c) => c.sampleRate !== rate)) {
    throw new ServiceError('invalid_request', 'All clips of a professional clone must have the same sample rate.', 'blob_ids');
  }
  const total = clips.reduce((n, c) => n + c.samples.length, 0);
  const samples = new Float32Array(total);
  const header = wavHeader({ sampleRate: rate, encoding: 'pcm_s16le', dataByteLength: total * 2 });
  const wav = Buffer.allocUnsafe(header.length + total * 2);
  header.copy(wav);
  let at = 0;
  for (const c of clips) {
    for (let from = 0; from < c.samples.length; from += JOIN_SLICE) {
      const part = c.samples.subarray(from, from + JOIN_SLICE);
      samples.set(part, at);
      s16leBytes(floatToS16(part)).copy(wav, header.length + at * 2);
      at += part.length;
      onSlice();
      await nextTurn();
    }
  }
  return { samples, sampleRate: rate, durationMs: Math.round((total / rate) * 1000), wav };
}
