// The pronunciation-dictionary rule as it was first written: one regular expression over all
// graphemes, longest first. Its cost grows with entries x transcript length, so production
// uses the compiled matcher of server/services/dicts/apply-pronunciation.ts; this stays as the
// definition that matcher is tested against (apply-pronunciation.unit.test.ts) and benchmarked
// against (bench/pronunciation.ts). Kept as it was, transcript_too_long check included.
import { ServiceError } from '../../server/services/errors.ts';
import { MAX_EXPANDED_TRANSCRIPT, type PhonemeFormatter, type PronunciationEntry } from '../../server/services/dicts/apply-pronunciation.ts';

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function applyPronunciationByRegex(transcript: string, entries: readonly PronunciationEntry[], formatPhoneme: PhonemeFormatter): string {
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
    throw new ServiceError(
      'transcript_too_long',
      `The transcript is ${length} characters after pronunciation-dictionary expansion; the limit is ${MAX_EXPANDED_TRANSCRIPT}.`,
      'pronunciation_dict_id',
    );
  }
  return out;
}
