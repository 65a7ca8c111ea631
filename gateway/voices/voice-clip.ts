// A clone clip: WAV or raw 16-bit mono PCM (at `sample_rate`), measured from the audio itself.
import { ServiceError } from '../../server/services/errors.js';
import { encodeWav } from '../audio/wav.js';
import { decodeUploadedAudio } from '../stt/decode-upload.js';
import type { VoiceClip } from '../upstreams/clone-types.js';

export const MIN_CLIP_SECONDS = 10;
export const MIN_PRO_CLIP_SECONDS = 30;

export interface MeasuredClip extends VoiceClip {
  durationMs: number;
}

export function decodeClip(bytes: Buffer, declaredRate: number | undefined): MeasuredClip {
  const audio = decodeUploadedAudio(bytes, declaredRate, null);
  const isWav = bytes.subarray(0, 4).toString('latin1') === 'RIFF';
  return {
    samples: audio.samples,
    sampleRate: audio.sampleRate,
    durationMs: Math.round(audio.durationSeconds * 1000),
    wav: isWav ? bytes : encodeWav(audio.samples, audio.sampleRate, 'pcm_s16le'),
  };
}

export function requireClipLength(clip: MeasuredClip, minSeconds: number, param = 'file'): void {
  if (clip.durationMs < minSeconds * 1000) {
    throw new ServiceError('clip_too_short', `The clip is ${(clip.durationMs / 1000).toFixed(1)} s long (measured from the audio); a voice needs at least ${minSeconds} s of audio.`, param);
  }
}

/** Several clips as one (professional clones); they must share a sample rate. */
export function joinClips(clips: MeasuredClip[]): MeasuredClip {
  const rate = clips[0]!.sampleRate;
  if (clips.some((c) => c.sampleRate !== rate)) {
    throw new ServiceError('invalid_request', 'All clips of a professional clone must have the same sample rate.', 'blob_ids');
  }
  const total = clips.reduce((n, c) => n + c.samples.length, 0);
  const samples = new Float32Array(total);
  let at = 0;
  for (const c of clips) {
    samples.set(c.samples, at);
    at += c.samples.length;
  }
  return { samples, sampleRate: rate, durationMs: Math.round((total / rate) * 1000), wav: encodeWav(samples, rate, 'pcm_s16le') };
}
