// Applies a pronunciation dictionary to a transcript before synthesis. Each entry replaces
// whole-word occurrences of its grapheme (case-sensitive or not, per entry) with either an
// alias (plain text, any engine) or a phoneme string, which an engine that takes phonemes
// receives in its own inline syntax and any other engine ignores (the word stays as written).
// Longer graphemes win over shorter ones that overlap them; replaced text is not re-scanned.
import { ServiceError } from '../errors.js';

export interface PronunciationEntry {
  grapheme: string;
  alias: string | null;
  phoneme: string | null;
  caseSensitive: boolean;
}

/** Engine syntax for inline phonemes, e.g. espeak-ng's `[[h@'loU]]`; null when unsupported. */
export type PhonemeFormatter = ((phoneme: string) => string) | null;

export const MAX_EXPANDED_TRANSCRIPT = 20_000;

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function applyPronunciation(transcript: string, entries: readonly PronunciationEntry[], formatPhoneme: PhonemeFormatter): string {
  if (entries.length === 0) return transcript;
  const sorted = [...entries].sort((a, b) => b.grapheme.length - a.grapheme.length);
  // One pass with one alternation: earlier (longer) alternatives win at each position.
  // Word boundaries are Unicode-aware: a grapheme must not touch a letter, digit or underscore.
  const pattern = sorted.map((e) => `(${escapeRegExp(e.grapheme)})`).join('|');
  const re = new RegExp(`(?<![\\p{L}\\p{N}_])(?:${pattern})(?![\\p{L}\\p{N}_])`, 'giu');
  const out = transcript.replace(re, (match: string, ...groups: unknown[]) => {
    const index = groups.findIndex((g, i) => i < sorted.length && g !== undefined);
    const entry = sorted[index]!;
    if (entry.caseSensitive && match !== entry.grapheme) return match;
    if (entry.alias !== null) return entry.alias;
    if (entry.phoneme !== null && formatPhoneme) return formatPhoneme(entry.phoneme);
    return match;
  });
  // Characters are code points, as for the 5,000 cap and billing.
  const length = out.length > MAX_EXPANDED_TRANSCRIPT ? [...out].length : out.length;
  if (length > MAX_EXPANDED_TRANSCRIPT) {
    throw new ServiceError('transcript_too_long', `The transcript is ${length} characters after pronunciation-dictionary expansion; the limit is ${MAX_EXPANDED_TRANSCRIPT}.`, 'pronunciation_dict_id');
  }
  return out;
}
