import { describe, expect, it } from 'vitest';
import { MARK_EVERY_MS, Playback, type PlayOut } from './playback.ts';

const FRAME_BYTES = 160; // 20 ms of μ-law at 8 kHz

const ms = (n: number) => Buffer.alloc(n * 8, 0x7f);
const summary = (out: PlayOut[]) => out.map((o) => (o.kind === 'media' ? o.audio.length : o.name));

describe('Playback', () => {
  it('sends 20 ms frames, a mark every 100 ms and at the end, with the tail of a frame last', () => {
    const p = new Playback();
    // 130 ms in two pieces that do not fall on frame boundaries.
    const first = p.audio('item_a', ms(45));
    expect(summary(first)).toEqual([FRAME_BYTES, FRAME_BYTES]);
    const second = p.audio('item_a', ms(85));
    expect(summary(second)).toEqual([FRAME_BYTES, FRAME_BYTES, FRAME_BYTES, 'item_a:1', FRAME_BYTES]);
    expect(summary(p.end('item_a'))).toEqual([10 * 8, 'item_a:end']);
    expect(p.unplayed).toBe(true);
    expect(p.heardMs('item_a')).toBe(0);
    p.played('item_a:1');
    expect(p.heardMs('item_a')).toBe(MARK_EVERY_MS);
    p.played('item_a:end');
    expect(p.heardMs('item_a')).toBe(130);
    expect(p.unplayed).toBe(false);
  });

  it('an echoed mark counts every mark before it; names it did not send are ignored', () => {
    const p = new Playback();
    p.audio('item_b', ms(400));
    p.played('item_b:9');
    p.played('not-ours');
    expect(p.heardMs('item_b')).toBe(0);
    p.played('item_b:3');
    expect(p.heardMs('item_b')).toBe(300);
    // An echo of a mark already counted changes nothing.
    p.played('item_b:1');
    expect(p.heardMs('item_b')).toBe(300);
  });

  it('after a clear, the marks the carrier echoes for the dropped audio say nothing of what was heard', () => {
    const p = new Playback();
    p.audio('item_c', ms(500));
    p.played('item_c:2');
    expect(p.unplayed).toBe(true);
    p.clear();
    expect(p.unplayed).toBe(false);
    for (const n of [3, 4, 5]) p.played(`item_c:${n}`);
    expect(p.heardMs('item_c')).toBe(200);
    // The next answer starts clean.
    expect(summary(p.audio('item_d', ms(20)))).toEqual([FRAME_BYTES]);
    expect(p.heardMs('item_d')).toBe(0);
  });

  it("a new answer's audio ends the last one first", () => {
    const p = new Playback();
    p.audio('item_e', ms(30));
    expect(summary(p.audio('item_f', ms(20)))).toEqual([10 * 8, 'item_e:end', FRAME_BYTES]);
    p.played('item_e:end');
    expect(p.heardMs('item_e')).toBe(30);
  });

  it('frames of the line: 100 ms of 16-bit PCM at 8 kHz a message, the last padded with silence to whole 20 ms, only the audio counted', () => {
    const p = new Playback({ bytesPerMs: 16, frameMs: 100, padByte: 0 });
    const pcm = (n: number) => Buffer.alloc(n * 16, 0x11);
    expect(summary(p.audio('item_g', pcm(250)))).toEqual([1600, 'item_g:1', 1600, 'item_g:2']);
    const end = p.end('item_g');
    expect(summary(end)).toEqual([60 * 16, 'item_g:end']);
    // 50 ms of audio and 10 ms of silence.
    const tail = (end[0] as { audio: Buffer }).audio;
    expect(tail.subarray(0, 50 * 16).every((b) => b === 0x11)).toBe(true);
    expect(tail.subarray(50 * 16).every((b) => b === 0)).toBe(true);
    p.played('item_g:end');
    expect(p.heardMs('item_g')).toBe(250);
  });

  it('unplayedMs: what was sent that no echoed mark or clear has accounted for', () => {
    const p = new Playback();
    p.audio('item_h', ms(300));
    expect(p.unplayedMs).toBe(300);
    p.played('item_h:2');
    expect(p.unplayedMs).toBe(100);
    p.audio('item_h', ms(200));
    p.clear();
    expect(p.unplayedMs).toBe(0);
  });
});
