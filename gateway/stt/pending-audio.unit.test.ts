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

  it('keeps s16 audio as it came (the same samples, not copies), and replays it as s16', () => {
    const p = new PendingAudio(100);
    const frames = [Int16Array.of(1, 2, 3, 4), Int16Array.of(5, 6, 7, 8)];
    for (const f of frames) p.append(f);
    p.dropBefore(2);
    const replay = [...p.between(p.start, p.end)];
    expect(replay.every((c) => c instanceof Int16Array)).toBe(true);
    expect(replay.flatMap((c) => [...c])).toEqual([3, 4, 5, 6, 7, 8]);
    replay.forEach((c, i) => expect(c.buffer).toBe(frames[i]!.buffer));
  });
});
