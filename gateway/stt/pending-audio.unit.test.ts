// The audio a failover replays: what no final covers, in order, bounded (oldest dropped first).
import { describe, expect, it } from 'vitest';
import { PendingAudio } from './pending-audio.ts';

const ramp = (from: number, n: number) => Float32Array.from({ length: n }, (_, i) => from + i);
const collect = (p: PendingAudio, from = p.start, to = p.end) => [...p.between(from, to)].flatMap((c) => [...c]);

describe('PendingAudio', () => {
  it('keeps what was appended since the last final, split anywhere', () => {
    const p = new PendingAudio(100);
    p.append(ramp(0, 10));
    p.append(ramp(10, 10));
    p.dropBefore(7);
    expect([p.start, p.end]).toEqual([7, 20]);
    expect(collect(p)).toEqual([...ramp(7, 13)]);
    expect(collect(p, 9, 12)).toEqual([9, 10, 11]);
    // A final before what is kept, or past the end, drops nothing more than there is.
    p.dropBefore(3);
    expect(p.start).toBe(7);
    p.dropBefore(50);
    expect([p.start, p.end, collect(p).length]).toEqual([20, 20, 0]);
  });

  it('holds at most its bound: past it the oldest audio is dropped and a replay starts later', () => {
    const p = new PendingAudio(25);
    for (let i = 0; i < 10; i++) p.append(ramp(i * 10, 10));
    expect([p.start, p.end]).toEqual([75, 100]);
    expect(collect(p)).toEqual([...ramp(75, 25)]);
  });

  it('keeps s16 audio as s16, in copies (the frames it was given may be reused), across blocks, and replays any range of it', () => {
    const p = new PendingAudio(100_000);
    const ramp16 = (from: number, n: number) => Int16Array.from({ length: n }, (_, i) => (from + i) % 30_000);
    let at = 0;
    for (const n of [320, 5000, 1, 2047, 320]) {
      const frame = ramp16(at, n);
      p.append(frame);
      frame.fill(-1);
      at += n;
    }
    p.dropBefore(2100);
    const replay = [...p.between(p.start, p.end)];
    expect(replay.every((c) => c instanceof Int16Array)).toBe(true);
    expect(replay.flatMap((c) => [...c])).toEqual([...ramp16(2100, at - 2100)]);
    expect([...p.between(4000, 4100)].flatMap((c) => [...c])).toEqual([...ramp16(4000, 100)]);
  });

  it('a long session keeps only what no final covers, within its bound', () => {
    const p = new PendingAudio(16_000);
    for (let t = 0; t < 2000; t++) {
      p.append(ramp(t * 320, 320));
      // A final every 25 frames (half a second), covering all but the last frame.
      if (t % 25 === 24) p.dropBefore(p.end - 320);
    }
    expect(p.end - p.start).toBeLessThanOrEqual(16_000);
    expect(collect(p)).toEqual([...ramp(p.start, p.end - p.start)]);
  });
});
