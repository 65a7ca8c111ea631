import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { encodeMp3 } from './mp3.ts';
import { floatToS16, s16leBytes } from './pcm.ts';
import { sniffAudioFormat, sniffNonAudio, type SniffedAudioFormat } from './sniff.ts';
import { speechLike, tone } from './test-signals.ts';
import { encodeWav, wavHeader } from './wav.ts';

const id3 = (inner: Uint8Array) => Buffer.concat([Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 10]), Buffer.alloc(10), inner]);
/** Two ADTS frames of 16 bytes each (AAC-LC, 44.1 kHz, mono). */
const adts = (() => {
  const frame = Buffer.alloc(16);
  frame.set([0xff, 0xf1, 0x50, 0x40, 0x02, 0x1f, 0xfc]);
  return Buffer.concat([frame, frame]);
})();

describe('sniffAudioFormat', () => {
  const mp3 = encodeMp3(tone(440, 24000, 0.2), 24000, 64000);
  it.each<[string, Uint8Array, SniffedAudioFormat]>([
    ['our WAV', encodeWav(tone(440, 16000, 0.01), 16000, 'pcm_s16le'), 'wav'],
    ['a streaming WAV header alone', wavHeader({ sampleRate: 8000, encoding: 'pcm_mulaw' }), 'wav'],
    ['RF64', Buffer.from('RF64\xff\xff\xff\xffWAVEds64', 'latin1'), 'wav'],
    ['our MP3 (frame sync)', mp3, 'mp3'],
    ['MP3 behind an ID3v2 tag', id3(mp3), 'mp3'],
    ['ID3v2 tag, nothing after it yet', id3(Buffer.alloc(0)), 'mp3'],
    ['FLAC behind an ID3v2 tag', id3(Buffer.from('fLaC\0\0\0\x22', 'latin1')), 'flac'],
    ['Ogg', Buffer.from('OggS\0\x02\0\0\0\0\0\0\0\0', 'latin1'), 'ogg'],
    ['FLAC', Buffer.from('fLaC\0\0\0\x22', 'latin1'), 'flac'],
    ['MP4/M4A', Buffer.from('\0\0\0\x20ftypM4A \0\0\0\0', 'latin1'), 'mp4'],
    ['MP4 isom', Buffer.from('\0\0\0\x18ftypisom', 'latin1'), 'mp4'],
    ['WebM/Matroska (EBML)', Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81]), 'webm'],
    ['AAC ADTS', adts, 'aac'],
    ['empty', new Uint8Array(0), 'unknown'],
    ['AVI (RIFF, not WAVE)', Buffer.from('RIFF\0\0\0\0AVI LIST', 'latin1'), 'unknown'],
    ['raw PCM16 tone', s16leBytes(floatToS16(tone(440, 16000, 0.1))), 'unknown'],
    ['raw PCM16 speech-like', s16leBytes(floatToS16(speechLike(16000, 1))), 'unknown'],
    ['raw PCM16 starting with -1 samples (FF FF ...)', s16leBytes(Int16Array.of(-1, -1, -1, 5, 7)), 'unknown'],
    [
      'one MPEG-looking header in PCM, no second frame where it should be',
      Buffer.concat([Buffer.from([0xff, 0xfb, 0x90, 0x64]), Buffer.alloc(2000, 0x11)]),
      'unknown',
    ],
  ])('%s -> %s', (_name, bytes, expected) => {
    expect(sniffAudioFormat(bytes)).toBe(expected);
  });

  it('property: any bytes give one of the known answers, without throwing', () => {
    const answers = new Set(['wav', 'mp3', 'aac', 'ogg', 'flac', 'mp4', 'webm', 'unknown']);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        expect(answers.has(sniffAudioFormat(b))).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  it('property: PCM16 with any first samples, then quiet noise, is not mistaken for a compressed format', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -32768, max: 32767 }), { minLength: 4, maxLength: 4 }), fc.integer(), (head, seed) => {
        expect(sniffAudioFormat(s16leBytes(quietNoiseAfter(head, seed)))).toBe('unknown');
      }),
      { numRuns: 2000 },
    );
  });

  it('the PCM that once looked like MP3 (FF FF 72 5A: a layer I header, its next frame confirmed by one noise sample) is unknown', () => {
    // The counterexample the property above found in CI (seed 1680713603): one confirming frame was not enough.
    expect(sniffAudioFormat(s16leBytes(quietNoiseAfter([-1, 23154, 0, 0], 819768370)))).toBe('unknown');
  });

  it('the PCM that once looked like ADTS (FF F8 00 02, frame claimed past the end) is unknown', () => {
    expect(sniffAudioFormat(s16leBytes(Int16Array.from({ length: 2000 }, (_, i) => (i === 0 ? -1793 : i === 1 ? 512 : 0))))).toBe('unknown');
  });

  describe('files written by ffmpeg', () => {
    // scripts/test.sh installs Debian's ffmpeg, which has every encoder below: a missing one
    // fails its test rather than passing it unchecked.
    let encoders = '';
    beforeAll(() => {
      try {
        encoders = execFileSync('ffmpeg', ['-v', 'error', '-encoders'], { encoding: 'utf8' });
      } catch (e) {
        throw new Error('these tests need ffmpeg (scripts/test.sh installs it: apt-get install ffmpeg)', { cause: e });
      }
    });
    const make = (args: string[]) =>
      execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'sine=f=440:d=0.5:r=44100', ...args, '-'], { maxBuffer: 1 << 24 });
    it.each<[string, string, string[], SniffedAudioFormat]>([
      ['flac', 'flac', ['-f', 'flac'], 'flac'],
      ['vorbis', 'libvorbis', ['-c:a', 'libvorbis', '-f', 'ogg'], 'ogg'],
      ['opus in ogg', 'libopus', ['-c:a', 'libopus', '-f', 'ogg'], 'ogg'],
      ['opus in webm', 'libopus', ['-c:a', 'libopus', '-f', 'webm'], 'webm'],
      ['aac in m4a', 'aac', ['-c:a', 'aac', '-f', 'ipod', '-movflags', 'frag_keyframe+empty_moov'], 'mp4'],
      ['aac adts', 'aac', ['-c:a', 'aac', '-f', 'adts'], 'aac'],
      ['mp3 with ID3', 'libmp3lame', ['-c:a', 'libmp3lame', '-f', 'mp3'], 'mp3'],
      ['mp3 without ID3', 'libmp3lame', ['-c:a', 'libmp3lame', '-id3v2_version', '0', '-write_xing', '0', '-f', 'mp3'], 'mp3'],
      ['wav', 'pcm_s16le', ['-f', 'wav'], 'wav'],
    ])('%s', (_name, encoder, args, expected) => {
      expect(encoders, `ffmpeg has no ${encoder} encoder`).toContain(` ${encoder} `);
      expect(sniffAudioFormat(make(args))).toBe(expected);
    });
  });
});

describe('sniffNonAudio', () => {
  it.each<[string, Uint8Array, string]>([
    ['a .txt', Buffer.from('Hello, this is a note about the meeting on Monday.\nSee you there.\n'), 'text'],
    ['UTF-8 text with accents and emoji', Buffer.from('Grüße aus Köln — 東京 🎧\r\n'), 'text'],
    ['JSON', Buffer.from('{"model":"local-flite","input":"hi"}'), 'text'],
    ['a long text cut inside a multi-byte character at the sample end', Buffer.from(`${'a'.repeat(4095)}é and more`), 'text'],
    ['PNG', Buffer.from('\x89PNG\r\n\x1a\n\0\0\0\rIHDR', 'latin1'), 'a PNG image'],
    ['JPEG', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46]), 'a JPEG image'],
    ['GIF', Buffer.from('GIF89a\x01\0\x01\0', 'latin1'), 'a GIF image'],
    ['PDF', Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3', 'latin1'), 'a PDF document'],
    ['ZIP / docx', Buffer.from('PK\x03\x04\x14\0\x06\0', 'latin1'), 'a ZIP archive (or an Office document)'],
    ['gzip', Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0]), 'a gzip archive'],
    ['AVI', Buffer.from('RIFF\0\0\0\0AVI LIST', 'latin1'), 'an AVI video'],
    ['WebP', Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1'), 'a WebP image'],
  ])('%s -> %s', (_name, bytes, expected) => {
    expect(sniffNonAudio(bytes)).toBe(expected);
  });

  it.each<[string, Uint8Array]>([
    ['empty', new Uint8Array(0)],
    ['our WAV', encodeWav(tone(440, 16000, 0.01), 16000, 'pcm_s16le')],
    ['raw PCM16 tone', s16leBytes(floatToS16(tone(440, 16000, 0.1)))],
    ['raw PCM16 speech-like', s16leBytes(floatToS16(speechLike(16000, 1)))],
    ['raw PCM16 silence', new Uint8Array(3200)],
    ['text followed by a NUL (a binary file with a text header)', Buffer.from('header text\0\x01\x02')],
    ['invalid UTF-8 (a lone continuation byte)', Buffer.from([0x41, 0x42, 0x80, 0x43])],
  ])('%s may be audio (null)', (_name, bytes) => {
    expect(sniffNonAudio(bytes)).toBeNull();
  });

  it('property: loud random PCM16 of a tenth of a second or more is never taken for text', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const pcm = new Int16Array(1600);
        let r = seed;
        for (let i = 0; i < pcm.length; i++) {
          r = (Math.imul(r, 1103515245) + 12345) | 0;
          pcm[i] = r >> 16;
        }
        expect(sniffNonAudio(s16leBytes(pcm))).toBeNull();
      }),
      { numRuns: 2000 },
    );
  });

  it('property: any printable text is text', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 300 }).filter((s) => !/[\u0000-\u0008\u000b\u000e-\u001f\u007f]/.test(s)),
        (text) => {
          expect(sniffNonAudio(Buffer.from(text))).toBe('text');
        },
      ),
      { numRuns: 2000 },
    );
  });
});

/** 4,000 samples: `head`, then quiet pseudo-random noise (within ±4,095) from `seed`. */
function quietNoiseAfter(head: number[], seed: number): Int16Array {
  const pcm = new Int16Array(4000);
  pcm.set(head);
  let r = seed;
  for (let i = head.length; i < pcm.length; i++) {
    r = (Math.imul(r, 1103515245) + 12345) | 0;
    pcm[i] = (r >> 16) % 4096;
  }
  return pcm;
}
