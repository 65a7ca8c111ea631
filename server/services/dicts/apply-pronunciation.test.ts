import { describe, expect, it } from 'vitest';
import { applyPronunciation, type PronunciationEntry } from './apply-pronunciation.js';

const e = (grapheme: string, over: Partial<PronunciationEntry> = {}): PronunciationEntry => ({ grapheme, alias: null, phoneme: null, caseSensitive: false, ...over });
const espeak = (p: string) => `[[${p}]]`;

describe('applyPronunciation', () => {
  it.each([
    ['SQL is fast', [e('SQL', { alias: 'sequel' })], 'sequel is fast'],
    ['sql and SQL', [e('SQL', { alias: 'sequel' })], 'sequel and sequel'],
    ['sql and SQL', [e('SQL', { alias: 'sequel', caseSensitive: true })], 'sql and sequel'],
    ['MySQL is not SQL', [e('SQL', { alias: 'sequel' })], 'MySQL is not sequel'],
    ['SQLite', [e('SQL', { alias: 'sequel' })], 'SQLite'],
    ['New York, New Yorker', [e('New York', { alias: 'NYC' }), e('New', { alias: 'Old' })], 'NYC, Old Yorker'],
    ['Dr. Who', [e('Dr.', { alias: 'Doctor' })], 'Doctor Who'],
    ['café crème', [e('café', { alias: 'coffee' })], 'coffee crème'],
    ['the gif', [e('gif', { phoneme: "dZIf" })], 'the [[dZIf]]'],
    ['a+b', [e('a+b', { alias: 'a plus b' })], 'a plus b'],
    ['(x)', [e('x', { alias: 'ex' })], '(ex)'],
    ['no change here', [], 'no change here'],
    ['alias is not rescanned: A', [e('A', { alias: 'B' }), e('B', { alias: 'C' })], 'alias is not rescanned: B'],
  ])('%s', (input, entries, expected) => {
    expect(applyPronunciation(input, entries, espeak)).toBe(expected);
  });

  it('leaves phoneme-only entries alone for engines without phoneme input', () => {
    expect(applyPronunciation('the gif', [e('gif', { phoneme: 'dZIf' })], null)).toBe('the gif');
  });

  it('rejects expansion past 20,000 characters with transcript_too_long', () => {
    const transcript = 'x '.repeat(2500);
    expect(() => applyPronunciation(transcript, [e('x', { alias: 'y'.repeat(8) })], null)).toThrow(expect.objectContaining({ code: 'transcript_too_long' }));
    expect(applyPronunciation(transcript, [e('x', { alias: 'y'.repeat(6) })], null).length).toBe(2500 * 7);
  });
});

describe('applyPronunciation limit counts code points', () => {
  it('accepts an expansion of exactly 20,000 code points made of astral characters', () => {
    const transcript = 'x '.repeat(2500);
    // each "x" -> 7 emoji (14 UTF-16 units): 2500 * (7 + 1) = 20,000 code points
    const out = applyPronunciation(transcript, [{ grapheme: 'x', alias: '😀'.repeat(7), phoneme: null, caseSensitive: false }], null);
    expect([...out].length).toBe(20_000);
    expect(out.length).toBeGreaterThan(20_000);
  });
});
