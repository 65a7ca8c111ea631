// What kind of audio a byte buffer holds, by its first bytes. The STT route accepts WAV and
// raw PCM16 and rejects compressed formats; raw PCM has no magic, so it is what 'unknown'
// stands for there. An MPEG or ADTS frame sync is easy to hit by chance in raw PCM (bytes
// FF Fx are one small negative sample, and quiet audio is full of them), so a bare frame header
// counts only when confirmed: the next two frames' headers follow where each frame says it ends
// and agree with the first on what a stream's frames share (MPEG version, layer and sample rate;
// ADTS profile and rate), or the frames end exactly at the end of the bytes. One confirming
// frame was not enough: of 300,000 buffers of quiet PCM noise opening with an FF byte, 8 passed
// as MP3 (none now).
// (Files with an ID3v2 tag, most MP3s, need no such luck.)
import { id3v2Length, parseMpegFrameHeader } from './mp3-frames.ts';

export type SniffedAudioFormat = 'wav' | 'mp3' | 'aac' | 'ogg' | 'flac' | 'mp4' | 'webm' | 'unknown';

const tag = (b: Uint8Array, at: number, s: string) => {
  if (at + s.length > b.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

/** Frames that confirm a chance frame header at 0 (see above). */
const CONFIRMING_FRAMES = 2;

interface Frame {
  /** 0: no frame there. */
  length: number;
  /** What every frame of one stream shares. */
  kind: string;
}
const NO_FRAME: Frame = { length: 0, kind: '' };

/** Whether frames chain from 0 as described above; `frame` reads the frame at an offset. */
function framesChain(b: Uint8Array, frame: (b: Uint8Array, at: number) => Frame): boolean {
  const first = frame(b, 0);
  if (!first.length) return false;
  let next = first.length;
  for (let i = 0; i < CONFIRMING_FRAMES; i++) {
    if (next === b.length) return true;
    const f = frame(b, next);
    if (!f.length || f.kind !== first.kind) return false;
    next += f.length;
  }
  return true;
}

function mpegFrame(b: Uint8Array, at: number): Frame {
  const h = parseMpegFrameHeader(b, at);
  return h ? { length: h.frameLength, kind: `${h.version}/${h.layer}/${h.sampleRate}` } : NO_FRAME;
}

/** ADTS (raw AAC): 12-bit sync, layer 00, a valid sampling frequency index. */
function adtsFrame(b: Uint8Array, at: number): Frame {
  if (at + 7 > b.length || b[at] !== 0xff || (b[at + 1]! & 0xf6) !== 0xf0 || ((b[at + 2]! >> 2) & 0xf) >= 13) return NO_FRAME;
  const length = ((b[at + 3]! & 0x03) << 11) | (b[at + 4]! << 3) | (b[at + 5]! >> 5);
  // Byte 2's top six bits: the profile and the sampling frequency index.
  return length >= 7 ? { length, kind: String(b[at + 2]! >> 2) } : NO_FRAME;
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
  if (framesChain(b, adtsFrame)) return 'aac';
  if (framesChain(b, mpegFrame)) return 'mp3';
  return 'unknown';
}

// How much of a file the non-audio check reads: enough to tell text from PCM with certainty
// (PCM16 of any real sound has NUL or control bytes within a few samples), little enough that
// a 25 MB upload costs nothing to check.
const TEXT_SAMPLE_BYTES = 4096;

/**
 * What a file that is certainly not audio looks like, named for an error message ("text",
 * "a PNG image"...); null when it may be audio. Raw PCM has no magic, so the upload routes
 * take whatever no format claims as PCM: without this, a .txt or an image renamed .wav was
 * "0.0 s of audio" or noise instead of a refusal.
 */
export function sniffNonAudio(bytes: Uint8Array): string | null {
  const b = bytes;
  if (b.length === 0) return null;
  if (tag(b, 0, 'RIFF') && !tag(b, 8, 'WAVE')) return tag(b, 8, 'WEBP') ? 'a WebP image' : tag(b, 8, 'AVI ') ? 'an AVI video' : 'a RIFF file that is not WAVE';
  if (tag(b, 0, '\x89PNG\r\n\x1a\n')) return 'a PNG image';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'a JPEG image';
  if (tag(b, 0, 'GIF87a') || tag(b, 0, 'GIF89a')) return 'a GIF image';
  if (tag(b, 0, '%PDF-')) return 'a PDF document';
  if (tag(b, 0, 'PK\x03\x04')) return 'a ZIP archive (or an Office document)';
  if (b.length >= 3 && b[0] === 0x1f && b[1] === 0x8b && b[2] === 0x08) return 'a gzip archive';
  return isText(b.subarray(0, TEXT_SAMPLE_BYTES), b.length > TEXT_SAMPLE_BYTES) ? 'text' : null;
}

/**
 * Printable UTF-8 (tabs, line breaks and form feeds allowed; no other control byte, no DEL):
 * what text files are and PCM16 never is beyond a handful of bytes. `cut`: the sample ends
 * inside the file, so a multi-byte character may be cut at its end.
 */
function isText(b: Uint8Array, cut: boolean): boolean {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0c && c !== 0x0d) || c === 0x7f) return false;
      i++;
      continue;
    }
    // Lead byte of a 2-, 3- or 4-byte sequence (overlong C0/C1 and past-U+10FFFF F5+ are not UTF-8).
    const length = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (length === 0) return false;
    if (i + length > b.length) return cut;
    for (let k = 1; k < length; k++) if ((b[i + k]! & 0xc0) !== 0x80) return false;
    i += length;
  }
  return true;
}
