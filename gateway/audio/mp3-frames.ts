// MPEG audio frame headers: enough to recognise an MP3 stream (sniffing) and to read its
// layout (bit rate, sample rate, frame count, duration) without decoding it.
export interface MpegFrameHeader {
  version: 1 | 2 | 2.5;
  layer: 1 | 2 | 3;
  /** b/s */
  bitRate: number;
  sampleRate: number;
  padding: boolean;
  channels: 1 | 2;
  /** Bytes, header included. */
  frameLength: number;
  samplesPerFrame: number;
}

const BIT_RATES_KBPS = {
  v1l1: [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  v1l2: [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  v1l3: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  v2l1: [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  v2l23: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const SAMPLE_RATES = { 1: [44100, 48000, 32000], 2: [22050, 24000, 16000], 2.5: [11025, 12000, 8000] };

/** The frame header at `offset`, or null if there is none (free-format frames count as none). */
export function parseMpegFrameHeader(b: Uint8Array, offset = 0): MpegFrameHeader | null {
  if (offset < 0 || offset + 4 > b.length) return null;
  const b1 = b[offset + 1]!;
  const b2 = b[offset + 2]!;
  if (b[offset] !== 0xff || (b1 & 0xe0) !== 0xe0) return null;
  const versionBits = (b1 >> 3) & 3;
  const layerBits = (b1 >> 1) & 3;
  const rateIndex = b2 >> 4;
  const srIndex = (b2 >> 2) & 3;
  if (versionBits === 1 || layerBits === 0 || rateIndex === 0 || rateIndex === 15 || srIndex === 3) return null;
  const version = versionBits === 3 ? 1 : versionBits === 2 ? 2 : 2.5;
  const layer = (4 - layerBits) as 1 | 2 | 3;
  const table =
    version === 1
      ? layer === 1
        ? BIT_RATES_KBPS.v1l1
        : layer === 2
          ? BIT_RATES_KBPS.v1l2
          : BIT_RATES_KBPS.v1l3
      : layer === 1
        ? BIT_RATES_KBPS.v2l1
        : BIT_RATES_KBPS.v2l23;
  const bitRate = table[rateIndex]! * 1000;
  const sampleRate = SAMPLE_RATES[version][srIndex]!;
  const padding = ((b2 >> 1) & 1) === 1;
  const channels = b[offset + 3]! >> 6 === 3 ? 1 : 2;
  let frameLength: number;
  let samplesPerFrame: number;
  if (layer === 1) {
    frameLength = (Math.floor((12 * bitRate) / sampleRate) + (padding ? 1 : 0)) * 4;
    samplesPerFrame = 384;
  } else {
    samplesPerFrame = layer === 3 && version !== 1 ? 576 : 1152;
    frameLength = Math.floor(((samplesPerFrame / 8) * bitRate) / sampleRate) + (padding ? 1 : 0);
  }
  return { version, layer, bitRate, sampleRate, padding, channels, frameLength, samplesPerFrame };
}

/** Size of an ID3v2 tag at the start (header, syncsafe size, optional footer), else 0. */
export function id3v2Length(b: Uint8Array): number {
  if (b.length < 10 || b[0] !== 0x49 || b[1] !== 0x44 || b[2] !== 0x33) return 0;
  const size = ((b[6]! & 0x7f) << 21) | ((b[7]! & 0x7f) << 14) | ((b[8]! & 0x7f) << 7) | (b[9]! & 0x7f);
  return 10 + size + (b[5]! & 0x10 ? 10 : 0);
}

export interface MpegStreamSummary {
  frames: MpegFrameHeader[];
  /** Bytes before the first frame (ID3v2 tag). */
  leadingBytes: number;
  /** Bytes after the last whole frame that do not form one (0 for a clean stream). */
  trailingBytes: number;
  durationSeconds: number;
}

/** Walks the frames from the start (after an ID3v2 tag); stops at the first non-frame. */
export function scanMpegFrames(b: Uint8Array): MpegStreamSummary {
  const leadingBytes = Math.min(id3v2Length(b), b.length);
  const frames: MpegFrameHeader[] = [];
  let at = leadingBytes;
  let duration = 0;
  for (;;) {
    const h = parseMpegFrameHeader(b, at);
    if (!h || at + h.frameLength > b.length) break;
    frames.push(h);
    duration += h.samplesPerFrame / h.sampleRate;
    at += h.frameLength;
  }
  return { frames, leadingBytes, trailingBytes: b.length - at, durationSeconds: duration };
}
