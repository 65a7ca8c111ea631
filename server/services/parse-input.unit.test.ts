import { describe, expect, it } from 'vitest';
import { isServiceError } from './errors.ts';
import { refuseNul } from './parse-input.ts';

function refusal(input: unknown): { param: string | null; message: string } | null {
  try {
    refuseNul(input);
    return null;
  } catch (e) {
    if (!isServiceError(e)) throw e;
    return { param: e.param, message: e.message };
  }
}

describe('refuseNul', () => {
  it('passes input without NUL, however it nests', () => {
    expect(refusal({ a: 'x', b: [1, 'y', { c: null, d: true }], e: { f: { g: 'h' } } })).toBeNull();
    expect(refusal('plain')).toBeNull();
    expect(refusal(null)).toBeNull();
  });

  it('names the field holding a NUL, in a value or in an array', () => {
    expect(refusal({ voice: { id: 'ok', name: 'a\u0000b' } })).toMatchObject({ param: 'voice.name' });
    expect(refusal({ entries: [{ alias: 'x' }, { alias: '\u0000' }] })).toMatchObject({ param: 'entries[1].alias' });
    expect(refusal({ entries: [{ alias: '\u0000' }] })!.message).toBe('entries[0].alias: must not contain NUL (U+0000) characters');
  });

  it('refuses a NUL in a key, naming the object that holds it', () => {
    expect(refusal({ outer: { ['bad\u0000key']: 1 } })).toMatchObject({ param: 'outer' });
    expect(refusal({ ['\u0000']: 1 })).toMatchObject({ param: null });
  });

  it('walks deep nesting without recursion', () => {
    let deep: unknown = 'end\u0000';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(refusal(deep)).not.toBeNull();
    let clean: unknown = 'end';
    for (let i = 0; i < 100_000; i++) clean = { a: clean };
    expect(refusal(clean)).toBeNull();
  });
});
