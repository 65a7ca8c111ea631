import { describe, expect, it } from 'vitest';
import { foldCodePoint, foldString, isWordCodePoint } from './case-fold.ts';

// Exhaustive over Unicode: the folds must be exactly the classes of the regular expression
// engine this process runs on (a Node upgrade with new Unicode data is checked here).
const ALL: number[] = [];
for (let cp = 0; cp <= 0x10ffff; cp++) ALL.push(cp);
const str = (cps: number[]) => cps.map((cp) => String.fromCodePoint(cp)).join('');
const WITH_CASE = ALL.filter((cp) => /[\p{Changes_When_Casemapped}\p{Changes_When_Casefolded}]/u.test(String.fromCodePoint(cp)));

describe('foldCodePoint', () => {
  it('leaves code points without case alone, and none of them equals another ignoring case', () => {
    expect(WITH_CASE.length).toBeGreaterThan(2000);
    const withCase = new Set(WITH_CASE);
    const anyWithCase = new RegExp(`[${WITH_CASE.map((cp) => `\\u{${cp.toString(16)}}`).join('')}]`, 'iu');
    const caseless = ALL.filter((cp) => !withCase.has(cp));
    expect(caseless.filter((cp) => anyWithCase.test(String.fromCodePoint(cp)))).toEqual([]);
    expect(caseless.filter((cp) => foldCodePoint(cp) !== cp)).toEqual([]);
  });

  it('gives every code point with case the representative of exactly its /…/iu class', () => {
    const groups = new Map<number, number[]>();
    for (const cp of WITH_CASE) {
      const f = foldCodePoint(cp);
      groups.set(f, [...(groups.get(f) ?? []), cp]);
    }
    const haystack = str(WITH_CASE);
    const wrong: string[] = [];
    for (const [f, members] of groups) {
      const found = [...haystack.matchAll(new RegExp(`\\u{${f.toString(16)}}`, 'giu'))].map((m) => m[0].codePointAt(0)!);
      if (found.join() !== members.join())
        wrong.push(`${f.toString(16)}: engine ${found.map((c) => c.toString(16))}, fold ${members.map((c) => c.toString(16))}`);
    }
    expect(wrong).toEqual([]);
    // The representative is the smallest member: a class without its representative is impossible.
    for (const [f, members] of groups) expect(Math.min(...members)).toBe(f);
  });

  it('never crosses between the BMP and the astral planes (folded text keeps its UTF-16 positions)', () => {
    const bmp = /[\u{0}-\u{ffff}]/iu;
    const astral = /[\u{10000}-\u{10ffff}]/iu;
    expect(WITH_CASE.filter((cp) => (cp > 0xffff ? bmp : astral).test(String.fromCodePoint(cp)))).toEqual([]);
  });

  it.each([
    ['micro sign, capital and small mu', 'µΜμ', 'µµµ'],
    ['Kelvin sign and k', 'Kk\u212a', 'KKK'],
    ['long s and s', 'sSſ', 'SSS'],
    ['sharp s: not SS, but the capital sharp s', 'ßẞ', 'ßß'],
    ['dotted capital I stays apart from i', 'İiIı', 'İIIı'],
    ['final sigma', 'Σσς', 'ΣΣΣ'],
    ['Deseret (astral)', '\u{10400}\u{10428}', '\u{10400}\u{10400}'],
    ['no case', '中_1 😀', '中_1 😀'],
  ])('%s', (_label, input, folded) => {
    expect(foldString(input)).toBe(folded);
  });
});

describe('isWordCodePoint', () => {
  it.each([
    ['a', true],
    ['É', true],
    ['7', true],
    ['٣', true],
    ['_', true],
    ['中', true],
    ['\u0345', true], // a combining mark, but its fold is the letter iota and the rule runs under i
    ['\u0301', false],
    ['-', false],
    [' ', false],
    ['😀', false],
    ['\u{10400}', true],
  ])('%s -> %s', (ch, word) => {
    expect(isWordCodePoint(ch.codePointAt(0)!)).toBe(word);
  });
});
