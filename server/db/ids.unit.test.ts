import { describe, expect, it } from 'vitest';
import { newId, newTimeOrderedId } from './ids.ts';

describe('ids', () => {
  it('are <prefix>_ and 20 base-36 characters, unique', () => {
    const ids = Array.from({ length: 10_000 }, (_v, i) => (i % 2 ? newId('key') : newTimeOrderedId('key')));
    for (const id of ids) expect(id).toMatch(/^key_[0-9a-z]{20}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('time-ordered ids sort by the millisecond they were made in', async () => {
    const first = newTimeOrderedId('led');
    await new Promise((r) => setTimeout(r, 5));
    const second = newTimeOrderedId('led');
    expect(first < second).toBe(true);
    expect(Number.parseInt(second.slice(4, 13), 36)).toBeGreaterThanOrEqual(Date.now() - 1_000);
    expect(Number.parseInt(second.slice(4, 13), 36)).toBeLessThanOrEqual(Date.now());
  });
});
