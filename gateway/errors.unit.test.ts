import { describe, expect, it } from 'vitest';
import { createAudioConverter } from './audio/convert.ts';
import { parseWav } from './audio/wav.ts';
import { envelope, toServiceError } from './errors.ts';

const thrown = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
};

describe('audio errors at the edge', () => {
  it('an upload that is not a readable WAV is 400 unsupported_audio_format on the file', () => {
    const { status, body } = envelope(toServiceError(thrown(() => parseWav(Buffer.from('RIFF\x24\x00\x00\x00WAVEjunk', 'latin1')))));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 'unsupported_audio_format', type: 'invalid_request_error', param: 'file' });
    expect(body.error.message).toMatch(/^Unreadable WAV audio: /);
  });

  it.each([
    ['sample rate', { container: 'wav', sampleRate: 11025 as 8000 }, 'output_format.sample_rate'],
    ['mp3 bit rate', { container: 'mp3', sampleRate: 16000, bitRate: 100000 }, 'output_format.bit_rate'],
  ] as const)('an unsupported output %s is 400 invalid_output_format on %s', (_name, output, param) => {
    const { status, body } = envelope(toServiceError(thrown(() => createAudioConverter({ inputSampleRate: 16000, output }))));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 'invalid_output_format', param });
  });

  it('a volume out of range is 400 invalid_generation_config on generation_config.volume', () => {
    const err = thrown(() => createAudioConverter({ inputSampleRate: 16000, output: { container: 'raw', sampleRate: 8000 }, volume: 3 }));
    const { status, body } = envelope(toServiceError(err));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 'invalid_generation_config', param: 'generation_config.volume' });
  });
});
