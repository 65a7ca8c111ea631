// Opus on RTP both ways for a WebRTC audio track (RFC 7587), at the realtime session's own rate:
// Opus decodes to and encodes from 24 kHz itself (its RTP clock stays 48 kHz), so no resampling
// step sits on either path and every 20 ms frame is exactly 480 samples.
import type { RtpPacket } from 'werift';
import type { WebRtcLibs } from './webrtc-libs.ts';

export const RATE = 24_000;
export const FRAME_MS = 20;
export const FRAME_SAMPLES = (RATE * FRAME_MS) / 1000;
export const FRAME_BYTES = FRAME_SAMPLES * 2;
/** The Opus RTP clock (RFC 7587: always 48 kHz) per sample at RATE. */
const RTP_TICKS_PER_SAMPLE = 48_000 / RATE;
/** A gap in the caller's audio (lost packets, DTX) filled with at most this much silence: the turn detector needs the silence to end a turn. */
const MAX_GAP_FILL_MS = 1000;
/**
 * The answer's Opus bit rate. Its mode, restricted low delay (CELT only), looks 2.5 ms ahead where
 * the speech modes (VOIP, AUDIO) look 6.5 ms ahead: the caller hears each sample ~4 ms sooner, and
 * a frame encodes in a fifth of the time (0.12 against 0.6 ms). CELT needs more bits for speech
 * than SILK: 32 kb/s, what browsers send a microphone at (docs/performance.md#webrtc).
 */
const ANSWER_BITRATE = 32_000;

/**
 * The caller's audio: each RTP packet decoded to pcm16 at 24 kHz in arrival order. A packet
 * older than one already played (reordered) is dropped; a gap in the RTP timestamps (packets
 * lost, or a sender in DTX that stops sending during silence) becomes silence, up to a second.
 */
export class OpusReceiver {
  private readonly decoder;
  private nextTimestamp: number | undefined;
  /** Packets that could not be decoded (for logs and tests). */
  undecodable = 0;

  constructor(libs: WebRtcLibs) {
    this.decoder = new libs.OpusScript(RATE, 1);
  }

  /** The packet's audio (with the silence before it, if a gap was filled); empty when it is dropped. */
  receive(rtp: RtpPacket): Buffer {
    const ts = rtp.header.timestamp;
    let silence = 0;
    if (this.nextTimestamp !== undefined) {
      const ahead = (ts - this.nextTimestamp) >>> 0;
      if (ahead >= 0x8000_0000) return Buffer.alloc(0); // behind: late or repeated
      silence = Math.min(Math.floor(ahead / RTP_TICKS_PER_SAMPLE), (RATE * MAX_GAP_FILL_MS) / 1000);
    }
    let pcm: Buffer;
    try {
      pcm = this.decoder.decode(rtp.payload);
    } catch {
      this.undecodable++;
      return Buffer.alloc(0);
    }
    this.nextTimestamp = (ts + (pcm.length / 2) * RTP_TICKS_PER_SAMPLE) >>> 0;
    return silence ? Buffer.concat([Buffer.alloc(silence * 2), pcm]) : pcm;
  }

  close(): void {
    this.decoder.delete();
  }
}

/** The answer's audio: 20 ms pcm16 frames at 24 kHz encoded into RTP packets (sequence and timestamp random at first, as RFC 3550 asks), Opus in its low-delay mode. */
export class OpusSender {
  private readonly encoder;
  private sequence = Math.floor(Math.random() * 0x1_0000);
  private timestamp = Math.floor(Math.random() * 0x1_0000_0000);

  constructor(
    private readonly libs: WebRtcLibs,
    private readonly send: (packet: RtpPacket) => void,
  ) {
    this.encoder = new libs.OpusScript(RATE, 1, libs.OpusScript.Application.RESTRICTED_LOWDELAY);
    this.encoder.setBitrate(ANSWER_BITRATE);
  }

  /** One frame; `gapFrames`: frames of time that passed without audio before it (the timestamp moves on by them), `marker` at the start of a talkspurt. */
  frame(pcm: Buffer, gapFrames: number, marker: boolean): void {
    const payload = this.encoder.encode(pcm, FRAME_SAMPLES);
    this.timestamp = (this.timestamp + gapFrames * FRAME_SAMPLES * RTP_TICKS_PER_SAMPLE) >>> 0;
    const { RtpHeader, RtpPacket } = this.libs.werift;
    this.send(new RtpPacket(new RtpHeader({ sequenceNumber: this.sequence, timestamp: this.timestamp, marker }), payload));
    this.sequence = (this.sequence + 1) & 0xffff;
    this.timestamp = (this.timestamp + FRAME_SAMPLES * RTP_TICKS_PER_SAMPLE) >>> 0;
  }

  close(): void {
    this.encoder.delete();
  }
}
