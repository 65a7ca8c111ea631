// The output formats the TTS routes accept (spec: TtsRequest.output_format), as data that both
// the routes' validation and the converter read, so the two lists cannot drift apart.
import { AudioError } from './audio-error.ts';

export const CONTAINERS = ['wav', 'mp3', 'raw'] as const;
export const ENCODINGS = ['pcm_f32le', 'pcm_s16le', 'pcm_mulaw', 'pcm_alaw'] as const;
export const SAMPLE_RATES = [8000, 16000, 22050, 24000, 44100, 48000] as const;
export const MP3_BIT_RATES = [32000, 64000, 96000, 128000, 192000, 256000, 320000] as const;

export type Container = (typeof CONTAINERS)[number];
export type Encoding = (typeof ENCODINGS)[number];
export type SampleRate = (typeof SAMPLE_RATES)[number];
export type Mp3BitRate = (typeof MP3_BIT_RATES)[number];

export const DEFAULT_ENCODING: Encoding = 'pcm_s16le';
export const DEFAULT_MP3_BIT_RATE: Mp3BitRate = 128000;

export interface OutputFormat {
  container: Container;
  sampleRate: SampleRate;
  /** Used by wav and raw (default pcm_s16le); ignored for mp3. */
  encoding?: Encoding;
  /** Used by mp3 (default 128000, one of MP3_BIT_RATES); ignored for wav and raw. */
  bitRate?: number;
}

/** An OutputFormat with its defaults filled in and checked. */
export type ResolvedOutputFormat =
  { container: 'wav' | 'raw'; sampleRate: SampleRate; encoding: Encoding } | { container: 'mp3'; sampleRate: SampleRate; bitRate: Mp3BitRate };

export const VOLUME_MIN = 0.5;
export const VOLUME_MAX = 2;

const bad = (setting: keyof OutputFormat, message: string) => new AudioError('unsupported_output_format', message, setting);

/**
 * Fills defaults and checks values against the lists (AudioError unsupported_output_format otherwise).
 * The field that does not apply to the container (encoding for mp3, bitRate for wav/raw) is
 * ignored here, so callers may pass a format with every default filled in: rejecting a field
 * the client sent where it does not belong is the request validation's job, which alone
 * knows what was sent.
 */
export function resolveOutputFormat(output: OutputFormat): ResolvedOutputFormat {
  if (!(CONTAINERS as readonly string[]).includes(output.container)) {
    throw bad('container', `The output container must be one of ${CONTAINERS.join(', ')}.`);
  }
  if (!(SAMPLE_RATES as readonly number[]).includes(output.sampleRate)) {
    throw bad('sampleRate', `The output sample rate must be one of ${SAMPLE_RATES.join(', ')}.`);
  }
  if (output.container === 'mp3') {
    const bitRate = output.bitRate ?? DEFAULT_MP3_BIT_RATE;
    if (!(MP3_BIT_RATES as readonly number[]).includes(bitRate)) {
      throw bad('bitRate', `The MP3 bit rate must be one of ${MP3_BIT_RATES.join(', ')}.`);
    }
    return { container: 'mp3', sampleRate: output.sampleRate, bitRate: bitRate as Mp3BitRate };
  }
  const encoding = output.encoding ?? DEFAULT_ENCODING;
  if (!(ENCODINGS as readonly string[]).includes(encoding)) {
    throw bad('encoding', `The output encoding must be one of ${ENCODINGS.join(', ')}.`);
  }
  return { container: output.container, sampleRate: output.sampleRate, encoding };
}

export function checkVolume(volume: number): number {
  if (!Number.isFinite(volume) || volume < VOLUME_MIN || volume > VOLUME_MAX) {
    throw new AudioError('volume_out_of_range', `The volume must be between ${VOLUME_MIN} and ${VOLUME_MAX}.`, 'volume');
  }
  return volume;
}
