// Pronunciation-dictionary application on the TTS hot path: the regular expression over all
// graphemes that it used to be (test/support/regex-pronunciation.ts) against the compiled
// matcher (server/services/dicts/apply-pronunciation.ts), in one run, on a 5,000-character
// transcript (the TTS cap) with 100, 1,000 and 10,000 entries. Event-loop time per request;
// medians over --runs, after warm-up.
//   npx tsx bench/pronunciation.ts [--runs 21]
//
// The dictionaries: made-up words, one in ten of two words, some with punctuation ("Dr."),
// 30 % case-sensitive, 70 % aliases and 30 % phonemes. The transcript: words of which one in
// five is a grapheme of the dictionary (in any case), the rest not, with punctuation.
// "worst case" is built against the matcher: 10,000 graphemes of 200 characters sharing 190 of
// them with the transcript at every position, so each position walks the whole length (the
// old expression is not run on it: it would take minutes).
import { parseArgs } from 'node:util';
import { applyPronunciationByRegex } from '../test/support/regex-pronunciation.ts';
import { applyPronunciation, compilePronunciation, type PronunciationEntry } from '../server/services/dicts/apply-pronunciation.ts';
import { median, table } from './lib/load.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '21' } } });
const runs = Number(values.runs);

// A fixed generator (mulberry32): the same dictionaries and transcript every run.
let seed = 42;
const random = () => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'su', 'tra', 'vel', 'qui', 'zor', 'phe', 'dan', 'bri', 'ost', 'ume', 'cha', 'gré'];
const word = () => Array.from({ length: 2 + Math.floor(random() * 3) }, () => pick(SYLLABLES)).join('');
const espeak = (p: string) => `[[${p}]]`;

function dictionary(size: number): PronunciationEntry[] {
  const seen = new Set<string>();
  const entries: PronunciationEntry[] = [];
  while (entries.length < size) {
    const r = random();
    const grapheme = r < 0.1 ? `${word()} ${word()}` : r < 0.15 ? `${word()}.` : r < 0.25 ? word().toUpperCase() : word();
    if (seen.has(grapheme.toLowerCase())) continue;
    seen.add(grapheme.toLowerCase());
    const phoneme = random() < 0.3;
    entries.push({ grapheme, alias: phoneme ? null : word(), phoneme: phoneme ? "h@l'oU" : null, caseSensitive: random() < 0.3 });
  }
  return entries;
}

function transcript(entries: readonly PronunciationEntry[], length: number): string {
  let s = '';
  while (s.length < length) {
    const w = random() < 0.2 ? pick(entries).grapheme : word();
    s += (random() < 0.1 ? w.toUpperCase() : w) + pick([' ', ' ', ' ', ', ', '. ', '! ']);
  }
  return s.slice(0, length);
}

function time(f: () => unknown): number[] {
  // Warm up (JIT tiers): at least twice, then until half a second or 500 calls have gone by.
  const warm = performance.now() + 500;
  for (let i = 0; i < 2 || (i < 500 && performance.now() < warm); i++) f();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    f();
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return ms;
}

const rows: Record<string, string | number>[] = [];
for (const size of [100, 1_000, 10_000]) {
  const entries = dictionary(size);
  const text = transcript(entries, 5_000);
  const compiled = compilePronunciation(entries);
  const expected = applyPronunciationByRegex(text, entries, espeak);
  if (applyPronunciation(text, compiled, espeak) !== expected) throw new Error(`the matcher disagrees with the regular expression at ${size} entries`);
  const old = median(time(() => applyPronunciationByRegex(text, entries, espeak)));
  const now = median(time(() => applyPronunciation(text, compiled, espeak)));
  rows.push({
    dictionary: `${size.toLocaleString('en')} entries`,
    'regex ms': old,
    'matcher ms': now,
    speedup: `${(old / now).toFixed(1)}x`,
    'compile ms (cache miss)': median(time(() => compilePronunciation(entries))),
  });
}

{
  const prefix = 'a '.repeat(95);
  const entries = Array.from({ length: 10_000 }, (_, i) => ({
    grapheme: prefix + i.toString(36).padStart(10, 'z'),
    alias: 'x',
    phoneme: null,
    caseSensitive: false,
  }));
  const text = 'a '.repeat(2_500);
  const compiled = compilePronunciation(entries);
  rows.push({
    dictionary: '10,000 entries, worst case',
    'regex ms': 'not run',
    'matcher ms': median(time(() => applyPronunciation(text, compiled, espeak))),
    speedup: '',
    'compile ms (cache miss)': median(time(() => compilePronunciation(entries))),
  });
}

console.log(`\nPronunciation dictionary on a 5,000-character transcript, event-loop ms per request, medians of ${runs} runs\n`);
console.log(table(rows));
