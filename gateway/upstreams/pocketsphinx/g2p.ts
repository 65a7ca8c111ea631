// Pronunciations for words missing from pocketsphinx's dictionary (this pocketsphinx has no
// grapheme-to-phoneme model): espeak-ng's phonemes (installed with the local TTS engines),
// mapped from its ASCII mnemonics to the CMU phones the en-us acoustic model knows.
// Synchronous: it runs in the recognizer worker, off the gateway's event loop.
import { execFileSync } from 'node:child_process';
import type { Pronunciation } from './decoder.ts';

/** espeak-ng en-us phoneme mnemonics (`espeak-ng -x`) -> CMU phones. */
const PHONES: Record<string, string> = {
  // consonants
  p: 'P',
  b: 'B',
  t: 'T',
  d: 'D',
  k: 'K',
  g: 'G',
  f: 'F',
  v: 'V',
  T: 'TH',
  D: 'DH',
  s: 'S',
  z: 'Z',
  S: 'SH',
  Z: 'ZH',
  h: 'HH',
  m: 'M',
  n: 'N',
  N: 'NG',
  l: 'L',
  r: 'R',
  w: 'W',
  j: 'Y',
  tS: 'CH',
  dZ: 'JH',
  x: 'K',
  C: 'HH',
  'n-': 'N',
  'l-': 'L',
  'm-': 'M',
  'r-': 'R',
  '?': '',
  // vowels
  a: 'AE',
  aa: 'AA',
  A: 'AA',
  'A:': 'AA',
  'A@': 'AA R',
  aI: 'AY',
  'aI@': 'AY ER',
  aI3: 'AY ER',
  aU: 'AW',
  'aU@': 'AW ER',
  e: 'EH',
  E: 'EH',
  'e@': 'EH R',
  eI: 'EY',
  i: 'IY',
  'i:': 'IY',
  I: 'IH',
  'i@': 'IH R',
  'i@3': 'IH R',
  O: 'AO',
  'O:': 'AO',
  'O@': 'AO R',
  'o@': 'AO R',
  OI: 'OY',
  oU: 'OW',
  o: 'OW',
  '0': 'AA',
  'u:': 'UW',
  u: 'UW',
  U: 'UH',
  'U@': 'UH R',
  V: 'AH',
  '@': 'AH',
  '@L': 'AH L',
  '3': 'ER',
  '3:': 'ER',
  'a#': 'AE',
  'I#': 'IH',
  I2: 'IH',
  '@2': 'AH',
  '@5': 'AH',
  a2: 'AH',
  'e#': 'EH',
  'i#': 'IY',
  'u#': 'UW',
  'o#': 'OW',
  'r#': 'R',
  't#': 'T',
  'd#': 'D',
  'z#': 'Z',
};

function cmuPhone(mnemonic: string): string | null {
  const m = mnemonic.replace(/['",;%=!]/g, '');
  if (!m) return '';
  if (m in PHONES) return PHONES[m]!;
  // Variants espeak marks with a digit or '#' (I2, @5, t#): the base phoneme.
  const base = m.replace(/[0-9#]+$/, '');
  if (base && base in PHONES) return PHONES[base]!;
  return null;
}

/** CMU phones for one line of `espeak-ng -x --sep=_` output, or null if a phoneme is unknown. */
export function espeakToCmu(line: string): string | null {
  const phones: string[] = [];
  for (const word of line.trim().split(/\s+/)) {
    for (const mnemonic of word.split('_')) {
      const p = cmuPhone(mnemonic);
      if (p === null) return null;
      if (p) phones.push(p);
    }
  }
  return phones.length ? phones.join(' ') : null;
}

function espeak(text: string): string {
  return execFileSync('espeak-ng', ['-q', '-v', 'en-us', '-x', '--sep=_', '--stdin'], {
    input: text,
    encoding: 'utf8',
    timeout: 5000,
    stdio: ['pipe', 'pipe', 'ignore'],
  });
}

/**
 * Pronunciations for the (normalized) words, from espeak-ng. Words it cannot say, or all of them
 * when espeak-ng is not installed, are left out.
 */
export function guessPronunciations(words: string[]): Pronunciation[] {
  if (!words.length) return [];
  let lines: string[];
  try {
    // One word per clause: espeak-ng then prints one line per word.
    lines = espeak(words.map((w) => `${w},\n`).join(''))
      .split('\n')
      .filter((l) => l.trim());
    if (lines.length !== words.length) lines = words.map((w) => espeak(w).trim());
  } catch {
    return [];
  }
  const out: Pronunciation[] = [];
  words.forEach((word, i) => {
    const phones = espeakToCmu(lines[i] ?? '');
    if (phones) out.push({ word, phones });
  });
  return out;
}
