import { describe, expect, it, vi } from 'vitest';
import { newId, newTimeOrderedId } from './ids.ts';

describe('ids', () => {
  it('are <prefix>_ and 20 base-36 characters, unique', () => {
    const ids = Array.from({ length: 10_000 }, (_v, i) => (i % 2 ? newId('key') : newTimeOrderedId('key')));
    for (const id of ids) expect(id).toMatch(/^key_[0-9a-z]{20}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('time-ordered ids sort by the millisecond they were made in', () => {
    const at = Date.UTC(2031, 0, 1);
    vi.useFakeTimers({ now: at, toFake: ['Date'] });
    try {
      const first = newTimeOrderedId('led');
      vi.setSystemTime(at + 1);
      const second = newTimeOrderedId('led');
      expect(first < second).toBe(true);
      expect(Number.parseInt(first.slice(4, 13), 36)).toBe(at);
      expect(Number.parseInt(second.slice(4, 13), 36)).toBe(at + 1);
    } finally {
      vi.useRealTimers();
    }
  });
});
