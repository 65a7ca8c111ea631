// Pure text helpers shared by the gateway side (recognizer.ts) and the worker (decoder.ts):
// no native code here.

/** pocketsphinx's dictionary is lower-case words of letters, digits and apostrophes. */
export function normalizeWords(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[’‘]/g, "'")
    .replace(/[^a-z0-9']+/g, ' ')
    .split(' ')
    .map((w) => w.replace(/^'+|'+$/g, ''))
    .filter(Boolean);
}

/**
 * A decoder token as a transcript word, or null for what is not speech: `<s>`, `</s>`, `<sil>`,
 * `[NOISE]`, `[SPEECH]`, `++GARBAGE++`, `NULL`. Pronunciation variants lose their suffix
 * (`read(2)` is `read`).
 */
export function transcriptWord(token: string): string | null {
  if (!token || token.startsWith('<') || token.startsWith('[') || token.startsWith('+') || token === 'NULL') return null;
  const word = token.replace(/\(\d+\)$/, '');
  return word || null;
}

/** A JSGF grammar accepting exactly the given (normalized) sentences, any of them, once. */
export function jsgfForSentences(sentences: string[][]): string {
  const alternatives = sentences.filter((s) => s.length > 0).map((s) => `( ${s.join(' ')} )`);
  return `#JSGF V1.0;\ngrammar sentences;\npublic <sentence> = ${alternatives.join(' | ')};\n`;
}
