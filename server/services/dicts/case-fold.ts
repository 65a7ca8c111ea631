// Per-code-point facts the pronunciation matcher needs, taken from the JavaScript regular
// expression engine itself so that they agree with what a /…/iu regular expression does
// (apply-pronunciation.ts replaced one; its differential test holds the two together):
//  - foldCodePoint: one representative per class of code points that /x/iu deems equal (the
//    smallest member). That is Unicode *simple* case folding (CaseFolding.txt C+S), which
//    neither String#toLowerCase (full mappings: 'İ' -> 'i̇') nor toUpperCase ('ß' -> 'SS')
//    is, and it has classes no casing function reaches from every member (µ, Μ, μ).
//  - isWordCodePoint: the word characters of the dictionary's whole-word rule,
//    [\p{L}\p{N}_] under the i flag (which also admits U+0345, whose fold is a letter).
// Both are computed once per code point and remembered (BMP in typed arrays; astral code
// points with case, a few hundred, in a Map).

/** Code points that no casing operation changes are alone in their class (checked over all of Unicode in case-fold.unit.test.ts). */
const HAS_CASE = /[\p{Changes_When_Casemapped}\p{Changes_When_Casefolded}]/u;
const WORD = /[\p{L}\p{N}_]/iu;

const hex = (cp: number) => cp.toString(16);
/** Does any code point in [lo, hi] equal `s` ignoring case, as /…/iu sees it? */
const rangeHas = (lo: number, hi: number, s: string) => new RegExp(`[\\u{${hex(lo)}}-\\u{${hex(hi)}}]`, 'iu').test(s);

function singleCodePoint(s: string): number | null {
  const cp = s.codePointAt(0)!;
  return s.length === (cp > 0xffff ? 2 : 1) ? cp : null;
}

function computeFold(cp: number): number {
  const s = String.fromCodePoint(cp);
  if (!HAS_CASE.test(s)) return cp;
  // A cheap guess at the smallest member: what lower- and upper-casing reach from here.
  const seen = new Set([cp]);
  const queue = [cp];
  for (let x = queue.pop(); x !== undefined; x = queue.pop()) {
    const xs = String.fromCodePoint(x);
    for (const y of [singleCodePoint(xs.toLowerCase()), singleCodePoint(xs.toUpperCase())]) {
      if (y !== null && !seen.has(y)) {
        seen.add(y);
        queue.push(y);
      }
    }
  }
  let best = cp;
  for (const y of seen) if (y < best && rangeHas(y, y, s)) best = y;
  // Exact whatever the guess: a member below `best` would make [floor, best-1] match. Classes
  // stay within the BMP or outside it (tested), so a fold never changes a string's UTF-16
  // length and folded text keeps the positions of the original.
  const floor = cp > 0xffff ? 0x10000 : 0;
  if (best > floor && rangeHas(floor, best - 1, s)) {
    let lo = floor;
    let hi = best - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (rangeHas(floor, mid, s)) hi = mid;
      else lo = mid + 1;
    }
    best = lo;
  }
  return best;
}

const bmpFold = new Int32Array(0x10000).fill(-1);
const astralFold = new Map<number, number>();

/** The representative of `cp`'s case-insensitive class; same plane as `cp`. */
export function foldCodePoint(cp: number): number {
  if (cp < 0x10000) {
    let f = bmpFold[cp]!;
    if (f < 0) bmpFold[cp] = f = computeFold(cp);
    return f;
  }
  let f = astralFold.get(cp);
  if (f === undefined) {
    f = computeFold(cp);
    // Only code points with case are kept: that bounds the map by Unicode, not by input.
    if (HAS_CASE.test(String.fromCodePoint(cp))) astralFold.set(cp, f);
  }
  return f;
}

// 0 = not yet known, 1 = not a word character, 2 = a word character.
const bmpWord = new Uint8Array(0x10000);

/** Is `cp` a letter, digit or underscore for the whole-word rule? */
export function isWordCodePoint(cp: number): boolean {
  if (cp < 0x10000) {
    let w = bmpWord[cp]!;
    if (w === 0) bmpWord[cp] = w = WORD.test(String.fromCharCode(cp)) ? 2 : 1;
    return w === 2;
  }
  return WORD.test(String.fromCodePoint(cp));
}

/** `s` with every code point folded: equal for strings /…/iu deems equal, same UTF-16 length. */
export function foldString(s: string): string {
  const units = new Array<number>(s.length);
  for (let i = 0; i < s.length; i++) {
    const cp = s.codePointAt(i)!;
    const f = foldCodePoint(cp);
    if (cp > 0xffff) {
      units[i++] = 0xd800 + ((f - 0x10000) >> 10);
      units[i] = 0xdc00 + ((f - 0x10000) & 0x3ff);
    } else {
      units[i] = f;
    }
  }
  // In slices: a call takes a bounded number of arguments.
  let out = '';
  for (let i = 0; i < units.length; i += 4096) out += String.fromCharCode(...units.slice(i, i + 4096));
  return out;
}
