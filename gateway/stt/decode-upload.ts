// Uploaded audio for transcription: WAV (any PCM/float width, any channel count, downmixed)
// or raw 16-bit little-endian mono PCM at the declared rate. Compressed formats are refused
// by their magic bytes. Sample rates are checked against the spec's range and the model's list.
import { SAMPLE_RATES } from '../audio/output-format.ts';
import { s16leToFloat } from '../audio/pcm.ts';
import { sniffAudioFormat, sniffNonAudio } from '../audio/sniff.ts';
import { parseWav, readWavInfo } from '../audio/wav.ts';
import { ServiceError } from '../../server/services/errors.ts';

export interface DecodedAudio {
  samples: Float32Array;
  sampleRate: number;
  durationSeconds: number;
}

/** The `sample_rate` parameter (form field or query): one of the six rates. */
export function parseSampleRateParam(value: string | undefined, allowed: readonly number[] | null): number | undefined {
  if (value === undefined || value === '') return undefined;
  const rate = Number(value);
  if (!(SAMPLE_RATES as readonly number[]).includes(rate)) {
    throw new ServiceError('invalid_sample_rate', `sample_rate must be one of ${SAMPLE_RATES.join(', ')} (got ${value}).`, 'sample_rate');
  }
  checkModelRate(rate, allowed);
  return rate;
}

function checkModelRate(rate: number, allowed: readonly number[] | null): void {
  if (rate < 8000 || rate > 48000) throw new ServiceError('invalid_sample_rate', `The audio's sample rate ${rate} Hz is outside 8000-48000 Hz.`, 'sample_rate');
  // A WAV's own rate too: the spec's six rates only (an 11025 Hz file is not one of them).
  if (!(SAMPLE_RATES as readonly number[]).includes(rate)) {
    throw new ServiceError('invalid_sample_rate', `The audio's sample rate ${rate} Hz is not one of ${SAMPLE_RATES.join(', ')}.`, 'sample_rate');
  }
  if (allowed && !allowed.includes(rate)) {
    throw new ServiceError('invalid_sample_rate', `This model accepts sample rates ${allowed.join(', ')}; the audio is ${rate} Hz.`, 'sample_rate');
  }
}

/**
 * WAV, or raw 16-bit mono PCM (anything not recognised); compressed formats are refused by
 * their magic bytes, and so are files that are certainly not audio (text, images, documents),
 * which would otherwise pass as raw PCM: "0.0 s of audio" for a .txt, noise for a PNG.
 */
function uploadKind(bytes: Buffer): 'wav' | 'raw' {
  if (bytes.length === 0) throw new ServiceError('invalid_request', 'The uploaded file is empty.', 'file');
  const format = sniffAudioFormat(bytes);
  if (format === 'wav') return 'wav';
  if (format !== 'unknown')
    throw new ServiceError('unsupported_audio_format', `The file is ${format}; send WAV or raw 16-bit mono PCM (compressed formats are not accepted).`, 'file');
  const other = sniffNonAudio(bytes);
  if (other)
    throw new ServiceError(
      'unsupported_audio_format',
      `The file is not a WAV file: it is ${other}, not audio. Send a WAV file or raw 16-bit mono PCM.`,
      'file',
    );
  return 'raw';
}

/**
 * What decodeUploadedAudio checks and measures, from the WAV header (or the raw length) alone,
 * without decoding a sample: for uploads that are only stored (blobs), whose size would make
 * decoding them a cost of its own.
 */
export function measureUploadedAudio(bytes: Buffer, declaredRate: number | undefined): { sampleRate: number; frames: number; durationSeconds: number } {
  const info = uploadKind(bytes) === 'wav' ? readWavInfo(bytes) : { sampleRate: declaredRate ?? 16000, frameCount: bytes.length >> 1 };
  checkModelRate(info.sampleRate, null);
  return { sampleRate: info.sampleRate, frames: info.frameCount, durationSeconds: info.frameCount / info.sampleRate };
}

export function decodeUploadedAudio(bytes: Buffer, declaredRate: number | undefined, allowed: readonly number[] | null): DecodedAudio {
  let samples: Float32Array;
  let sampleRate: number;
  if (uploadKind(bytes) === 'wav') {
    const wav = parseWav(bytes);
    samples = wav.samples;
    sampleRate = wav.sampleRate;
  } else {
    // Raw PCM16 mono; a trailing odd byte is not a sample and is dropped.
    sampleRate = declaredRate ?? 16000;
    samples = s16leToFloat(bytes.subarray(0, bytes.length & ~1));
  }
  checkModelRate(sampleRate, allowed);
  return { samples, sampleRate, durationSeconds: samples.length / sampleRate };
}
