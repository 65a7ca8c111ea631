// What kind of audio a byte buffer holds, by its first bytes. The STT route accepts WAV and
// raw PCM16 and rejects compressed formats; raw PCM has no magic, so it is what 'unknown'
// stands for there. An MPEG or ADTS frame sync is easy to hit by chance in raw PCM (bytes
// FF Fx are one small negative sample), so a bare frame header counts only when confirmed:
// the next frame's header follows where the first one says it ends, or the first frame ends
// exactly at the end of the bytes. (Files with an ID3v2 tag, most MP3s, need no such luck.)
import { id3v2Length, parseMpegFrameHeader } from './mp3-frames.js';

export type SniffedAudioFormat = 'wav' | 'mp3' | 'aac' | 'ogg' | 'flac' | 'mp4' | 'webm' | 'unknown';

const tag = (b: Uint8Array, at: number, s: string) => {
  if (at + s.length > b.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

function isMpegAudio(b: Uint8Array, at: number): boolean {
  const h = parseMpegFrameHeader(b, at);
  if (!h) return false;
  const next = at + h.frameLength;
  return next === b.length || parseMpegFrameHeader(b, next) !== null;
}

/** ADTS (raw AAC): 12-bit sync, layer 00, a valid sampling frequency index; same next-frame rule. */
function adtsFrameLength(b: Uint8Array, at: number): number {
  if (at + 7 > b.length || b[at] !== 0xff || (b[at + 1]! & 0xf6) !== 0xf0 || ((b[at + 2]! >> 2) & 0xf) >= 13) return 0;
  const length = ((b[at + 3]! & 0x03) << 11) | (b[at + 4]! << 3) | (b[at + 5]! >> 5);
  return length >= 7 ? length : 0;
}

function isAdts(b: Uint8Array, at: number): boolean {
  const length = adtsFrameLength(b, at);
  if (!length) return false;
  const next = at + length;
  return next === b.length || adtsFrameLength(b, next) > 0;
}

export function sniffAudioFormat(bytes: Uint8Array): SniffedAudioFormat {
  const b = bytes;
  if ((tag(b, 0, 'RIFF') || tag(b, 0, 'RF64')) && tag(b, 8, 'WAVE')) return 'wav';
  if (tag(b, 0, 'OggS')) return 'ogg';
  if (tag(b, 0, 'fLaC')) return 'flac';
  if (tag(b, 4, 'ftyp')) return 'mp4'; // ISO BMFF: mp4, m4a, 3gp, mov
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'webm'; // EBML: WebM / Matroska
  const id3 = id3v2Length(b);
  if (id3 > 0) {
    // An ID3v2 tag prefixes MP3 mostly, but also AAC and FLAC: look past it when we can.
    const inner = id3 < b.length ? sniffAudioFormat(b.subarray(id3)) : 'unknown';
    return inner === 'unknown' || inner === 'wav' ? 'mp3' : inner;
  }
  if (isAdts(b, 0)) return 'aac';
  if (isMpegAudio(b, 0)) return 'mp3';
  return 'unknown';
}
