// What the audio functions refuse, in their own terms: they know neither HTTP nor the API's
// field names. The gateway turns an AudioError into the API's error in its one error handler
// (gateway/errors.ts, toServiceError), so the routes need no try/catch.
import type { OutputFormat } from './output-format.ts';

export type AudioErrorCode =
  /** Input bytes that are not a WAV file parseWav can read (AudioFormatError says why). */
  | 'unreadable_wav'
  /** An output container, sample rate, encoding or MP3 bit rate outside the lists of output-format.ts. */
  | 'unsupported_output_format'
  /** A volume outside VOLUME_MIN..VOLUME_MAX. */
  | 'volume_out_of_range';

/** The output setting an error is about. */
export type AudioSetting = keyof OutputFormat | 'volume';

export class AudioError extends Error {
  constructor(
    readonly code: AudioErrorCode,
    message: string,
    readonly setting: AudioSetting | null = null,
  ) {
    super(message);
    this.name = 'AudioError';
  }
}
