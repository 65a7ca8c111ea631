// Input audio the gateway cannot read (a malformed or unsupported WAV). An AudioError, so
// the routes need no try/catch: the gateway's one error handler answers 400
// unsupported_audio_format. `reason` says what was wrong, for tests and logs.
import { AudioError } from './audio-error.ts';

export type AudioFormatErrorReason = 'not_riff' | 'truncated' | 'missing_fmt' | 'missing_data' | 'bad_fmt' | 'unsupported_encoding';

export class AudioFormatError extends AudioError {
  constructor(
    readonly reason: AudioFormatErrorReason,
    detail: string,
  ) {
    super('unreadable_wav', `Unreadable WAV audio: ${detail}`);
    this.name = 'AudioFormatError';
  }
}
