// Input audio the gateway cannot read (a malformed or unsupported WAV). A ServiceError, so
// the routes need no try/catch: the gateway's one error handler answers 400
// unsupported_audio_format. `reason` says what was wrong, for tests and logs.
import { ServiceError } from '../../server/services/errors.js';

export type AudioFormatErrorReason =
  | 'not_riff'
  | 'truncated'
  | 'missing_fmt'
  | 'missing_data'
  | 'bad_fmt'
  | 'unsupported_encoding';

export class AudioFormatError extends ServiceError {
  constructor(
    readonly reason: AudioFormatErrorReason,
    detail: string,
  ) {
    super('unsupported_audio_format', `Unreadable WAV audio: ${detail}`, 'file');
    this.name = 'AudioFormatError';
  }
}
