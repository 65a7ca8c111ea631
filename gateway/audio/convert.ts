// The one entry point the TTS routes use: engine samples (float or s16, any rate) to the
// requested output_format, streamed or in one go.
//
//   const conv = createAudioConverter({ inputSampleRate: 22050, output, volume });
//   send(conv.header());                       // wav: streaming header; raw, mp3: empty
//   for await (const chunk of engine) send(conv.push(chunk));
//   send(conv.end());                          // or conv.close() if the client went away
//
// Per chunk: resample (speex, state kept across chunks) -> volume with soft limiting ->
// encode (s16 / f32 / mu-law / A-law bytes, or LAME frames). Chunked output is byte-for-byte
// the output of convertAll() minus the header, for any chunking. s16 in and s16 out at the same
// rate and volume 1 (a live socket's usual case) passes through as it is, with no float round
// trip: with no gain and no resampling nothing can go past full scale, so there is nothing to limit.
import { createMp3Encoder, type Mp3Encoder } from './mp3.ts';
import { checkVolume, resolveOutputFormat, type OutputFormat, type ResolvedOutputFormat } from './output-format.ts';
import { s16leView, toFloat32, type PcmSamples } from './pcm.ts';
import { createResampler, type Resampler } from './resample.ts';
import { encodeSamples } from './sample-encoding.ts';
import { applyVolume } from './volume.ts';
import { wavHeader } from './wav.ts';

export { sniffAudioFormat, type SniffedAudioFormat } from './sniff.ts';
export type { OutputFormat, ResolvedOutputFormat } from './output-format.ts';

export interface AudioConverterOptions {
  /** Sample rate of the samples that will be pushed (the engine's rate). */
  inputSampleRate: number;
  output: OutputFormat;
  /** generation_config.volume, 0.5-2; default 1. */
  volume?: number;
}

export interface AudioConverter {
  readonly format: ResolvedOutputFormat;
  readonly contentType: string;
  /** Bytes to send before the first chunk: a WAV header with streaming sizes (0xFFFFFFFF); empty for raw and mp3. */
  header(): Buffer;
  /** Converts the next chunk; may be empty (resampler delay, or an MP3 frame not yet full), or share memory with `samples` (s16 passed through). */
  push(samples: PcmSamples): Buffer;
  /** The remaining bytes; frees the converter. */
  end(): Buffer;
  /** Frees the converter without flushing (client gone); idempotent. */
  close(): void;
}

export function contentTypeFor(output: Pick<OutputFormat, 'container'>): string {
  switch (output.container) {
    case 'wav':
      return 'audio/wav';
    case 'mp3':
      return 'audio/mpeg';
    case 'raw':
      return 'application/octet-stream';
  }
}

class Converter implements AudioConverter {
  readonly contentType: string;
  private readonly resampler: Resampler;
  private readonly mp3: Mp3Encoder | null;
  /** s16 in goes out as it came: same rate, volume 1, s16 out (raw or WAV). */
  private readonly s16Through: boolean;
  private done = false;

  constructor(
    readonly format: ResolvedOutputFormat,
    inputSampleRate: number,
    private readonly volume: number,
  ) {
    this.contentType = contentTypeFor(format);
    this.s16Through = format.container !== 'mp3' && format.encoding === 'pcm_s16le' && inputSampleRate === format.sampleRate && volume === 1;
    this.resampler = createResampler(inputSampleRate, format.sampleRate);
    try {
      this.mp3 = format.container === 'mp3' ? createMp3Encoder({ sampleRate: format.sampleRate, bitRate: format.bitRate }) : null;
    } catch (err) {
      this.resampler.close();
      throw err;
    }
  }

  header(): Buffer {
    const f = this.format;
    return f.container === 'wav' ? wavHeader({ sampleRate: f.sampleRate, encoding: f.encoding }) : Buffer.alloc(0);
  }

  private encode(samples: Float32Array): Buffer {
    const out = applyVolume(samples, this.volume);
    return this.format.container === 'mp3' ? this.mp3!.encode(out) : encodeSamples(out, this.format.encoding);
  }

  push(samples: PcmSamples): Buffer {
    if (this.done) throw new Error('audio converter already ended');
    if (this.s16Through && samples instanceof Int16Array) return s16leView(samples);
    try {
      return this.encode(this.resampler.push(toFloat32(samples)));
    } catch (err) {
      this.close();
      throw err;
    }
  }

  end(): Buffer {
    if (this.done) throw new Error('audio converter already ended');
    try {
      const tail = this.encode(this.resampler.end());
      return this.mp3 ? Buffer.concat([tail, this.mp3.end()]) : tail;
    } finally {
      this.close();
    }
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.resampler.close();
    this.mp3?.close();
  }
}

/**
 * A streaming converter. Throws AudioError unsupported_output_format / volume_out_of_range
 * for formats or volumes outside the spec; a TypeError for a bad inputSampleRate.
 */
export function createAudioConverter(options: AudioConverterOptions): AudioConverter {
  const format = resolveOutputFormat(options.output);
  const volume = checkVolume(options.volume ?? 1);
  return new Converter(format, options.inputSampleRate, volume);
}

/**
 * One-shot conversion of a whole utterance. For wav the header carries the exact sizes
 * (and an odd-sized data chunk gets its pad byte).
 */
export function convertAll(samples: PcmSamples, inputSampleRate: number, output: OutputFormat, volume = 1): Buffer {
  const conv = createAudioConverter({ inputSampleRate, output, volume });
  const body = Buffer.concat([conv.push(samples), conv.end()]);
  const f = conv.format;
  if (f.container !== 'wav') return body;
  const parts = [wavHeader({ sampleRate: f.sampleRate, encoding: f.encoding, dataByteLength: body.length }), body];
  if (body.length % 2) parts.push(Buffer.alloc(1));
  return Buffer.concat(parts);
}
