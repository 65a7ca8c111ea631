import { describe, expect, it } from 'vitest';
import { JoinedLines } from './joined-lines.ts';

/** A destination that records what it is handed, as sonic-boom would write it. */
function recorder() {
  const chunks: string[] = [];
  let syncFlushes = 0;
  return {
    chunks,
    syncFlushes: () => syncFlushes,
    out: { write: (chunk: string) => chunks.push(chunk), flushSync: () => void syncFlushes++ },
  };
}

describe('JoinedLines', () => {
  it('hands lines on joined, in order, once a batch is full', () => {
    const r = recorder();
    const lines = new JoinedLines(r.out, 10);
    lines.write('abc\n');
    lines.write('def\n');
    expect(r.chunks).toEqual([]);
    lines.write('ghi\n');
    expect(r.chunks).toEqual(['abc\ndef\nghi\n']);
    lines.write('j\n');
    expect(r.chunks).toEqual(['abc\ndef\nghi\n']);
  });

  it('hands on what waits when flushed, and nothing when nothing waits', () => {
    const r = recorder();
    const lines = new JoinedLines(r.out, 1000);
    lines.flush();
    expect(r.chunks).toEqual([]);
    lines.write('one\n');
    lines.flush();
    lines.flush();
    expect(r.chunks).toEqual(['one\n']);
  });

  it('writes what waits and the destination’s own buffer on flushSync (a fatal error, the exit)', () => {
    const r = recorder();
    const lines = new JoinedLines(r.out, 1000);
    lines.write('last words\n');
    lines.flushSync();
    expect(r.chunks).toEqual(['last words\n']);
    expect(r.syncFlushes()).toBe(1);
  });
});
