// A call's audio between the carrier's line and its realtime session.
//
// - μ-law at 8 kHz (Twilio, Telnyx, Plivo's audio/x-mulaw) is a format the session takes and
//   makes itself (g711_ulaw): nothing is converted.
// - 16-bit little-endian PCM at 8 kHz (Plivo's and Exotel's defaults, Vonage's 8 kHz) runs the
//   session in g711_ulaw too, each sample companded with gateway/audio's G.711 (no delay, a
//   byte a sample). Not resampled: the recognizers hear 8 kHz input as telephone audio and
//   decode it with their narrow-band settings, while the same audio upsampled reads to them as
//   wide-band speech missing its top half (the local recognizer lost most of the words so).
// - 16-bit PCM at 16 or 24 kHz (Plivo's and Exotel's wide-band, Vonage's default) runs the
//   session in pcm16 at 24 kHz, resampled both ways with gateway/audio's resampler. The caller's
//   audio is resampled with the filter's delay kept (a few ms of lag): every chunk comes out
//   whole at once, so the session counts, and bills, exactly the audio the carrier sent,
//   whenever the call ends. The answers' audio is resampled time-aligned, one resampler per
//   answer, flushed at the answer's end so its last milliseconds are played too.
import { decodeMulaw, encodeMulaw } from '../audio/g711.ts';
import { FrameAligner, floatToS16, s16leBytes, s16leToFloat, s16leToS16 } from '../audio/pcm.ts';
import { createResampler, type Resampler } from '../audio/resample.ts';
import { FORMAT_AUDIO, type RealtimeAudioFormat } from '../realtime/session-config.ts';
import type { LineFraming } from './playback.ts';

/** The call's audio as a carrier streams it (both ways: carriers play what they send). */
export interface LineFormat {
  encoding: 'pcm_mulaw' | 'pcm_s16le';
  sampleRate: 8000 | 16000 | 24000;
}

export const MULAW_8K: LineFormat = { encoding: 'pcm_mulaw', sampleRate: 8000 };

const SESSION_RATE = FORMAT_AUDIO.pcm16.sampleRate;
/** A 16-bit sample's bytes: chunks that end mid-sample carry the rest over. */
const SAMPLE_BYTES = 2;

export class LineAudio {
  /** What the session takes and makes: μ-law at 8 kHz, or pcm16 at 24 kHz. */
  readonly sessionFormat: RealtimeAudioFormat;
  /** How the line's samples become the session's: as they are, companded, or resampled. */
  private readonly kind: 'same' | 'g711' | 'resampled';
  private readonly input: { aligner: FrameAligner; resampler: Resampler | null } | null;
  private output: { itemId: string; aligner: FrameAligner; resampler: Resampler } | null = null;

  constructor(readonly format: LineFormat) {
    this.kind = format.encoding === 'pcm_mulaw' ? 'same' : format.sampleRate === 8000 ? 'g711' : 'resampled';
    this.sessionFormat = this.kind === 'resampled' ? 'pcm16' : 'g711_ulaw';
    if (this.kind === 'same') this.input = null;
    else
      this.input = {
        aligner: new FrameAligner(SAMPLE_BYTES),
        resampler: this.kind === 'resampled' ? createResampler(format.sampleRate, SESSION_RATE, { keepDelay: true }) : null,
      };
  }

  /** How the answers' audio is cut into messages of `frameMs`; `padded`: the last one made whole 20 ms with silence. */
  framing(frameMs: number, padded: boolean): LineFraming {
    const pcm = this.format.encoding === 'pcm_s16le';
    const bytesPerMs = ((pcm ? SAMPLE_BYTES : 1) * this.format.sampleRate) / 1000;
    return { bytesPerMs, frameMs, padByte: padded ? (pcm ? 0 : 0xff) : null };
  }

  /** The caller's audio, as the session takes it. */
  toSession(line: Buffer): Buffer {
    if (!this.input) return line;
    const whole = this.input.aligner.push(line);
    if (!this.input.resampler) return encodeMulaw(s16leToS16(whole));
    return pcm(this.input.resampler.push(s16leToFloat(whole)));
  }

  /** An answer's audio (as the session makes it), as the line plays it. */
  toLine(itemId: string, audio: Buffer): Buffer {
    if (this.kind === 'same') return audio;
    if (this.kind === 'g711') return s16leBytes(decodeMulaw(audio));
    // Another answer's audio: what the filter held of the last one (a few ms) is dropped, as a barge-in would.
    if (this.output?.itemId !== itemId) this.dropLine();
    const o = (this.output ??= { itemId, aligner: new FrameAligner(SAMPLE_BYTES), resampler: createResampler(SESSION_RATE, this.format.sampleRate) });
    return pcm(o.resampler.push(s16leToFloat(o.aligner.push(audio))));
  }

  /** The answer's audio is over: what the resampler still holds of it. */
  endLine(itemId: string): Buffer {
    const o = this.output;
    if (!o || o.itemId !== itemId) return Buffer.alloc(0);
    this.output = null;
    return pcm(o.resampler.end());
  }

  /** The answer playing was cut (barge-in): what is held of it goes. */
  dropLine(): void {
    this.output?.resampler.close();
    this.output = null;
  }

  /** The call is over: the resamplers' state is freed. */
  close(): void {
    this.dropLine();
    this.input?.resampler?.close();
  }
}

const pcm = (samples: Float32Array): Buffer => s16leBytes(floatToS16(samples));
