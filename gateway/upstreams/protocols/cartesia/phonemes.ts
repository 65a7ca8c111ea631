// Pronunciation dictionaries hold eSpeak NG phoneme mnemonics (server/services/dicts/dict-input.ts);
// Cartesia reads inline IPA, one `<<p|h|o|n|e|s>>` per word, phones separated by bars, stress
// marks as phones of their own (`<<k|ɑ|ɹ|ˈ|t|i|ʒ|ə>>`). Sonic 3 uses the charsiu phone set, which
// writes English vowels without length marks. The table covers eSpeak's English phonemes; what
// it does not know (another language's mnemonics, eSpeak's length and boundary marks) is left
// out rather than guessed.
// https://docs.cartesia.ai/build-with-cartesia/capability-guides/phonemes
// https://docs.cartesia.ai/build-with-cartesia/capability-guides/specify-custom-pronunciations
// eSpeak NG's English phonemes: github.com/espeak-ng/espeak-ng, docs/phonemes and phsource/ph_english.

const ESPEAK_TO_IPA: Record<string, readonly string[]> = {
  // Diphthongs and r-coloured vowels (General American, as Cartesia's English voices speak).
  'aI@': ['aɪ', 'ə'],
  'aU@': ['aʊ', 'ə'],
  aI: ['aɪ'],
  aU: ['aʊ'],
  eI: ['eɪ'],
  oU: ['oʊ'],
  OI: ['ɔɪ'],
  'e@': ['ɛ', 'ɹ'],
  'I@': ['ɪ', 'ɹ'],
  'U@': ['ʊ', 'ɹ'],
  'A@': ['ɑ', 'ɹ'],
  'O@': ['ɔ', 'ɹ'],
  'o@': ['ɔ', 'ɹ'],
  'i@': ['i', 'ə'],
  '3:': ['ɝ'],
  '@L': ['ə', 'l'],
  // Long vowels and eSpeak's variants of one vowel.
  'i:': ['i'],
  'u:': ['u'],
  'A:': ['ɑ'],
  'O:': ['ɔ'],
  'a#': ['ə'],
  'I#': ['ɪ'],
  I2: ['ɪ'],
  E2: ['ɛ'],
  '@2': ['ə'],
  '@5': ['ə'],
  aa: ['æ'],
  tS: ['tʃ'],
  dZ: ['dʒ'],
  '@': ['ə'],
  '3': ['ɚ'],
  a: ['æ'],
  A: ['ɑ'],
  e: ['ɛ'],
  E: ['ɛ'],
  i: ['i'],
  I: ['ɪ'],
  '0': ['ɑ'],
  O: ['ɔ'],
  u: ['u'],
  U: ['ʊ'],
  V: ['ʌ'],
  T: ['θ'],
  D: ['ð'],
  S: ['ʃ'],
  Z: ['ʒ'],
  N: ['ŋ'],
  r: ['ɹ'],
  g: ['ɡ'],
  x: ['x'],
  C: ['ç'],
  '?': ['ʔ'],
  "'": ['ˈ'],
  ',': ['ˌ'],
  ...Object.fromEntries([...'pbtdkfvszhmnlwj'].map((c) => [c, [c]])),
};

const LONGEST = Math.max(...Object.keys(ESPEAK_TO_IPA).map((k) => k.length));

function wordPhones(mnemonics: string): string[] {
  const phones: string[] = [];
  for (let at = 0; at < mnemonics.length;) {
    let matched = 0;
    for (let len = Math.min(LONGEST, mnemonics.length - at); len > 0; len--) {
      const ipa = ESPEAK_TO_IPA[mnemonics.slice(at, at + len)];
      if (ipa) {
        phones.push(...ipa);
        matched = len;
        break;
      }
    }
    at += matched || 1;
  }
  return phones;
}

/** eSpeak NG mnemonics (`h@l'oU w'3:ld`) as Cartesia's inline phonemes (`<<h|ə|l|ˈ|oʊ>> <<w|ˈ|ɝ|l|d>>`). */
export function cartesiaPhonemes(mnemonics: string): string {
  return mnemonics
    .split(/\s+/)
    .map(wordPhones)
    .filter((phones) => phones.length > 0)
    .map((phones) => `<<${phones.join('|')}>>`)
    .join(' ');
}
