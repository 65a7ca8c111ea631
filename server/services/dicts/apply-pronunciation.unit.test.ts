import { describe, expect, it } from 'vitest';
import { applyPronunciationByRegex } from '../../../test/support/regex-pronunciation.ts';
import { applyPronunciation, compilePronunciation, type PhonemeFormatter, type PronunciationEntry } from './apply-pronunciation.ts';

const e = (grapheme: string, over: Partial<PronunciationEntry> = {}): PronunciationEntry => ({
  grapheme,
  alias: null,
  phoneme: null,
  caseSensitive: false,
  ...over,
});
const espeak = (p: string) => `[[${p}]]`;
const apply = (transcript: string, entries: PronunciationEntry[], format: PhonemeFormatter) =>
  applyPronunciation(transcript, compilePronunciation(entries), format);

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
    ['the gif', [e('gif', { phoneme: 'dZIf' })], 'the [[dZIf]]'],
    ['a+b', [e('a+b', { alias: 'a plus b' })], 'a plus b'],
    ['(x)', [e('x', { alias: 'ex' })], '(ex)'],
    ['no change here', [], 'no change here'],
    ['alias is not rescanned: A', [e('A', { alias: 'B' }), e('B', { alias: 'C' })], 'alias is not rescanned: B'],
    // The regular expression's quirks, kept: a case-sensitive entry that matches only
    // ignoring case still takes the text, so the shorter entry does not apply there...
    ['new york', [e('New York', { alias: 'NYC', caseSensitive: true }), e('new', { alias: 'old' })], 'new york'],
    // ...but a longer grapheme that does not end at a word boundary gives way to a shorter one.
    ['New Yorkers', [e('New York', { alias: 'NYC' }), e('New', { alias: 'Old' })], 'Old Yorkers'],
    // Simple case folding: the Kelvin sign is a k, a long s an s, final sigma a sigma; ß is not SS.
    [
      '\u212aelvin ſQL ΟΔΟΣ STRASSE',
      [e('kelvin', { alias: 'K' }), e('SQL', { alias: 'sequel' }), e('οδος', { alias: 'road' }), e('straße', { alias: 'x' })],
      'K sequel road STRASSE',
    ],
    // The first of two graphemes equal ignoring case wins, case-sensitive or not.
    ['Sql', [e('ſql', { alias: 'one', caseSensitive: true }), e('sql', { alias: 'two' })], 'Sql'],
    ['Sql', [e('sql', { alias: 'two' }), e('ſql', { alias: 'one', caseSensitive: true })], 'two'],
    ['😀x 😀 x😀', [e('x', { alias: 'ex' }), e('😀', { alias: 'smile' })], '😀ex smile ex😀'],
    ['a\u0345b a', [e('a', { alias: 'A!' })], 'a\u0345b A!'],
    ['$& $1', [e('$&', { alias: '$1$&' })], '$1$& $1'],
  ])('%s', (input, entries, expected) => {
    expect(apply(input, entries, espeak)).toBe(expected);
    expect(applyPronunciationByRegex(input, entries, espeak)).toBe(expected);
  });

  it('leaves phoneme-only entries alone for engines without phoneme input', () => {
    expect(apply('the gif', [e('gif', { phoneme: 'dZIf' })], null)).toBe('the gif');
  });

  it('rejects expansion past 20,000 characters with transcript_too_long', () => {
    const transcript = 'x '.repeat(2500);
    expect(() => apply(transcript, [e('x', { alias: 'y'.repeat(8) })], null)).toThrow(
      expect.objectContaining({ code: 'transcript_too_long', param: 'pronunciation_dict_id' }),
    );
    expect(apply(transcript, [e('x', { alias: 'y'.repeat(6) })], null).length).toBe(2500 * 7);
  });

  it('returns the transcript itself when nothing matches', () => {
    const transcript = 'nothing to see';
    expect(apply(transcript, [e('other', { alias: 'x' })], null)).toBe(transcript);
  });

  it('one compiled dictionary serves many transcripts and engines', () => {
    const dict = compilePronunciation([e('gif', { phoneme: 'dZIf' }), e('SQL', { alias: 'sequel' })]);
    expect(applyPronunciation('gif SQL', dict, espeak)).toBe('[[dZIf]] sequel');
    expect(applyPronunciation('SQL gif', dict, null)).toBe('sequel gif');
  });
});

describe('applyPronunciation limit counts code points', () => {
  it('accepts an expansion of exactly 20,000 code points made of astral characters', () => {
    const transcript = 'x '.repeat(2500);
    // each "x" -> 7 emoji (14 UTF-16 units): 2500 * (7 + 1) = 20,000 code points
    const out = apply(transcript, [{ grapheme: 'x', alias: '😀'.repeat(7), phoneme: null, caseSensitive: false }], null);
    expect([...out].length).toBe(20_000);
    expect(out.length).toBeGreaterThan(20_000);
  });
});

// The matcher against the regular expression it replaced, over random dictionaries and
// transcripts built from a small alphabet chosen to collide: overlapping and multi-word
// graphemes, punctuation (regex syntax too), case variants that only simple case folding
// equates, astral characters, combining marks, lone surrogates in the transcript.
describe('applyPronunciation agrees with the regular expression it replaced', () => {
  // mulberry32: a fixed seed makes a failure reproducible.
  function rng(seed: number) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const LETTERS = [
    ...'aAbBsSkKiIeé',
    'ſ',
    '\u212a',
    'ß',
    'ẞ',
    'µ',
    'Μ',
    'μ',
    'İ',
    'ı',
    'Σ',
    'σ',
    'ς',
    'ΐ',
    '\u1fd3',
    'e\u0301',
    '\u0345',
    '中',
    '\u{10400}',
    '\u{10428}',
    '1',
    '٣',
    '_',
  ];
  const PUNCT = [' ', ' ', ' ', '.', ',', '-', "'", '+', '(', ')', '*', '?', '[', ']', '\\', '|', '^', '$', '{', '}', '😀', '\u0301', '\n'];
  const LONE = ['\ud800', '\udc00'];

  function generate(random: () => number, size: { entries: number; words: number }) {
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
    const word = () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(LETTERS)).join('');
    const vocabulary = Array.from({ length: 4 + Math.floor(random() * 8) }, word);
    const variant = (w: string) => [...w].map((ch) => (random() < 0.3 ? (random() < 0.5 ? ch.toUpperCase() : ch.toLowerCase()) : ch)).join('');
    const phrase = (maxWords: number) => {
      let s = variant(pick(vocabulary));
      for (let i = 1 + Math.floor(random() * maxWords); i > 1; i--) s += pick(PUNCT) + (random() < 0.2 ? pick(PUNCT) : '') + variant(pick(vocabulary));
      if (random() < 0.15) s = pick(PUNCT) + s;
      if (random() < 0.15) s += pick(PUNCT);
      return s;
    };
    // Some graphemes are prefixes or extensions of earlier ones (so they share paths).
    const graphemes: string[] = [];
    const grapheme = () => {
      const r = random();
      const other = graphemes.length ? [...pick(graphemes)] : [];
      const g =
        r < 0.15 && other.length > 1
          ? other.slice(0, 1 + Math.floor(random() * (other.length - 1))).join('')
          : r < 0.3 && other.length
            ? other.join('') + pick(PUNCT) + variant(pick(vocabulary))
            : phrase(3);
      graphemes.push(g);
      return g;
    };
    const entries: PronunciationEntry[] = Array.from({ length: Math.floor(random() * size.entries) }, () => {
      const r = random();
      return {
        grapheme: grapheme(),
        alias: r < 0.6 ? (random() < 0.05 ? '' : phrase(2)) : null,
        phoneme: r >= 0.6 && r < 0.95 ? "h@l'oU" : null,
        caseSensitive: random() < 0.3,
      };
    });
    const parts: string[] = [];
    for (let i = Math.floor(random() * size.words); i > 0; i--) {
      const x = random();
      parts.push(x < 0.1 && entries.length ? variant(pick(entries).grapheme) : x < 0.12 ? pick(LONE) : x < 0.2 ? pick(LETTERS) : variant(pick(vocabulary)));
      parts.push(pick(PUNCT));
    }
    return { entries, transcript: parts.join(''), format: random() < 0.7 ? espeak : null };
  }

  const outcome = (f: () => string) => {
    try {
      return { out: f() };
    } catch (err) {
      return { error: (err as { code?: string }).code };
    }
  };

  it.each([
    ['small dictionaries, short transcripts', 1, 2500, { entries: 12, words: 40 }],
    ['larger dictionaries, longer transcripts', 2, 200, { entries: 300, words: 600 }],
  ])(
    '%s',
    (_label, seed, trials, size) => {
      const random = rng(seed);
      let replaced = 0;
      for (let t = 0; t < trials; t++) {
        const { entries, transcript, format } = generate(random, size);
        const expected = outcome(() => applyPronunciationByRegex(transcript, entries, format));
        const actual = outcome(() => apply(transcript, entries, format));
        if (JSON.stringify(actual) !== JSON.stringify(expected)) {
          // A readable counter-example rather than a bare mismatch.
          expect({ trial: t, entries, transcript, format: format !== null, actual }).toEqual({
            trial: t,
            entries,
            transcript,
            format: format !== null,
            actual: expected,
          });
        }
        if (expected.out !== undefined && expected.out !== transcript) replaced++;
      }
      // The generator does make dictionaries that apply (the comparison is not vacuous).
      expect(replaced).toBeGreaterThan(trials / 4);
    },
    60_000,
  );

  it('agrees on transcript_too_long and at the limit', () => {
    const random = rng(3);
    for (let t = 0; t < 50; t++) {
      const transcript = Array.from({ length: 1000 + Math.floor(random() * 1500) }, () => (random() < 0.5 ? 'x' : 'X')).join(' ');
      const entries = [e('x', { alias: '😀'.repeat(1 + Math.floor(random() * 14)), caseSensitive: random() < 0.5 })];
      const expected = outcome(() => applyPronunciationByRegex(transcript, entries, null));
      expect(outcome(() => apply(transcript, entries, null))).toEqual(expected);
    }
  });
});
