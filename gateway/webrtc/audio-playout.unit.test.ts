// The answer's audio paced onto a WebRTC track: frames at 20 ms on the process's timers (faked
// here, performance.now included), what was heard when it stops, and the bounds on what waits.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AudioPlayout, type PlayoutHandlers } from './audio-playout.ts';
import { FRAME_BYTES } from './opus-rtp.ts';

/** `ms` of pcm16 at 24 kHz, every sample `value`. */
const audio = (ms: number, value = 1000) => {
  const b = Buffer.alloc((ms / 20) * FRAME_BYTES);
  for (let i = 0; i < b.length; i += 2) b.writeInt16LE(value, i);
  return b;
};

function recorder() {
  const log: string[] = [];
  const frames: { pcm: Buffer; gapFrames: number; marker: boolean }[] = [];
  const handlers: PlayoutHandlers = {
    frame: (pcm, gapFrames, marker) => frames.push({ pcm, gapFrames, marker }),
    started: (id) => log.push(`started ${id}`),
    stopped: (id) => log.push(`stopped ${id}`),
    overflow: () => log.push('overflow'),
  };
  return { log, frames, handlers };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('AudioPlayout', () => {
  it('sends the first frame at once and one every 20 ms after, then says the response stopped', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(100));
    expect(r.frames).toHaveLength(1);
    expect(r.frames[0]).toMatchObject({ gapFrames: 0, marker: true });
    expect(r.log).toEqual(['started resp_1']);
    vi.advanceTimersByTime(19);
    expect(r.frames).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(r.frames).toHaveLength(2);
    expect(r.frames[1]!.marker).toBe(false);
    p.responseDone('resp_1');
    vi.advanceTimersByTime(100);
    expect(r.frames).toHaveLength(5);
    expect(r.log).toEqual(['started resp_1', 'stopped resp_1']);
    expect(p.queuedMs).toBe(0);
  });

  it('waits for more of a partial frame while the response runs, and pads it with silence once the response is done', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(20).subarray(0, 400));
    expect(r.frames).toHaveLength(0);
    p.push('resp_1', 'item_1', audio(20).subarray(0, 400));
    vi.advanceTimersByTime(100);
    expect(r.frames).toHaveLength(0);
    p.responseDone('resp_1');
    expect(r.frames).toHaveLength(1);
    expect(r.frames[0]!.pcm.readInt16LE(798)).toBe(1000);
    expect(r.frames[0]!.pcm.readInt16LE(800)).toBe(0);
    expect(r.log).toEqual(['started resp_1', 'stopped resp_1']);
  });

  it('a run after a pause moves the timestamp on by the frames of time that passed, and marks the talkspurt', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(20));
    vi.advanceTimersByTime(200);
    p.push('resp_1', 'item_1', audio(20));
    expect(r.frames.map((f) => [f.gapFrames, f.marker])).toEqual([
      [0, true],
      [9, true],
    ]);
  });

  it('stop(): what of the item playing was heard, and nothing more of that response is sent', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(1000));
    vi.advanceTimersByTime(300);
    expect(r.frames).toHaveLength(16);
    expect(p.stop()).toEqual({ responseId: 'resp_1', itemId: 'item_1', playedMs: 320 });
    p.push('resp_1', 'item_1', audio(100));
    p.responseDone('resp_1');
    vi.advanceTimersByTime(1000);
    expect(r.frames).toHaveLength(16);
    expect(r.log).toEqual(['started resp_1']);
    expect(p.stop()).toBeNull();
    // The next response plays.
    p.push('resp_2', 'item_2', audio(40));
    expect(r.log).toEqual(['started resp_1', 'started resp_2']);
  });

  it('stop() before any of the answer played: its item, nothing of it heard', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(10));
    expect(p.stop()).toEqual({ responseId: 'resp_1', itemId: 'item_1', playedMs: 0 });
  });

  it('a response queues behind the one playing, each item on frames of its own', () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers);
    p.push('resp_1', 'item_1', audio(30, 1));
    p.responseDone('resp_1');
    p.push('resp_2', 'item_2', audio(20, 2));
    p.responseDone('resp_2');
    vi.advanceTimersByTime(100);
    expect(r.frames.map((f) => [f.pcm.readInt16LE(0), f.pcm.readInt16LE(FRAME_BYTES - 2)])).toEqual([
      [1, 1],
      [1, 0],
      [2, 2],
    ]);
    expect(r.log).toEqual(['started resp_1', 'stopped resp_1', 'started resp_2', 'stopped resp_2']);
  });

  it('drained() holds the session while more than the high-water mark waits; past the cap the call ends', async () => {
    const r = recorder();
    const p = new AudioPlayout(r.handlers, { highWaterMs: 100, maxQueuedMs: 1000 });
    p.push('resp_1', 'item_1', audio(300));
    let drained = false;
    void p.drained().then(() => (drained = true));
    await vi.advanceTimersByTimeAsync(120);
    expect(drained).toBe(false);
    await vi.advanceTimersByTimeAsync(100);
    expect(drained).toBe(true);
    expect(p.queuedMs).toBeLessThanOrEqual(100);
    p.push('resp_1', 'item_1', audio(1000));
    expect(r.log).toContain('overflow');
  });
});
