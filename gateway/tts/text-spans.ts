// Where text arriving in pieces (LLM tokens on WS /tts/websocket) can be cut into spans that
// are synthesized on their own: after a sentence, after a clause once it has enough words, or
// (when the client's max_buffer_delay_ms has passed, or it asked for no buffering) after the
// last complete word. Pure functions over strings; the span speaker (span-speaker.ts) keeps
// the buffer and the timer.

/** A clause (`,` `;` `:` dash) ends a span only with at least this many words: shorter ones sound choppy alone. */
export const MIN_CLAUSE_WORDS = 6;

/** Ends a sentence: ASCII and CJK full stops, `!`, `?`, the ellipsis character. */
const SENTENCE_END = /[.!?…。！？]/;
const CLAUSE_END = /[,;:—–，、；：]/;
/** After a sentence end: closing quotes and brackets belong to the sentence. */
const CLOSERS = /["'”’)\]»」』]/;
const WHITESPACE = /\s/;
/** A span must have something to say: a letter or a digit. */
const SPEAKABLE = /[\p{L}\p{N}]/u;
/** Abbreviations whose full stop ends no sentence (lower case, without their final dot). */
const ABBREVIATIONS = new Set([
  'mr',
  'mrs',
  'ms',
  'dr',
  'prof',
  'sr',
  'jr',
  'st',
  'mt',
  'vs',
  'etc',
  'e.g',
  'i.e',
  'no',
  'inc',
  'ltd',
  'co',
  'approx',
  'dept',
  'fig',
  'jan',
  'feb',
  'mar',
  'apr',
  'jun',
  'jul',
  'aug',
  'sep',
  'sept',
  'oct',
  'nov',
  'dec',
]);

export const isSpeakable = (text: string): boolean => SPEAKABLE.test(text);

/** The word just before position `end` (exclusive), dots inside it kept ("e.g"). */
function wordBefore(text: string, end: number): string {
  let start = end;
  while (start > 0 && !WHITESPACE.test(text[start - 1]!)) start--;
  return text.slice(start, end).replace(/^["'“‘([«]+/, '');
}

/**
 * Whether the full stop at `at` can end a sentence: not after an abbreviation or a single
 * letter (an initial: "J. K."), and not after a digit when nothing follows yet ("3." may
 * become "3.5" with the next piece).
 */
function fullStopEnds(text: string, at: number, atBufferEnd: boolean): boolean {
  const word = wordBefore(text, at);
  if (ABBREVIATIONS.has(word.toLowerCase())) return false;
  if (/^\p{L}$/u.test(word)) return false;
  if (atBufferEnd && /\p{N}$/u.test(word)) return false;
  return true;
}

const countWords = (text: string): number => text.split(/\s+/).filter(isSpeakable).length;

/**
 * Cuts the complete sentences and long-enough clauses off the front of `buffer`. A span keeps
 * the whitespace after it (the next span starts at a word), so the spans and the rest put back
 * together are `buffer` exactly. A sentence end followed by nothing yet ends a span at once
 * (the next piece usually starts with a space: waiting for it would cost one piece's delay),
 * except a full stop that may not end the sentence (see fullStopEnds); a clause end needs the
 * space after it. A cut that would leave nothing speakable before it is not made.
 */
export function takeSpans(buffer: string): { spans: string[]; rest: string } {
  const spans: string[] = [];
  let start = 0;
  let i = 0;
  while (i < buffer.length) {
    const ch = buffer[i]!;
    let end = -1;
    if (SENTENCE_END.test(ch)) {
      // The whole run of enders and closers ("?!", '."', "...").
      let j = i + 1;
      while (j < buffer.length && (SENTENCE_END.test(buffer[j]!) || CLOSERS.test(buffer[j]!))) j++;
      const atEnd = j === buffer.length;
      const followedBySpace = !atEnd && WHITESPACE.test(buffer[j]!);
      const cjk = /[。！？]/.test(ch);
      if ((atEnd || followedBySpace || cjk) && (ch !== '.' || fullStopEnds(buffer, i, atEnd))) end = j;
      i = j;
    } else if (CLAUSE_END.test(ch)) {
      const j = i + 1;
      const cjk = /[，、；：]/.test(ch);
      if ((cjk || (j < buffer.length && WHITESPACE.test(buffer[j]!))) && countWords(buffer.slice(start, j)) >= MIN_CLAUSE_WORDS) end = j;
      i = j;
    } else if (ch === '\n') {
      end = i; // a line break ends a span (lists, paragraphs); it goes with the whitespace below
      i++;
    } else {
      i++;
      continue;
    }
    if (end < 0 || !isSpeakable(buffer.slice(start, end))) continue;
    while (end < buffer.length && WHITESPACE.test(buffer[end]!)) end++;
    spans.push(buffer.slice(start, end));
    start = end;
    i = end;
  }
  return { spans, rest: buffer.slice(start) };
}

/**
 * Everything up to and including the last whitespace: the complete words of `buffer` (the
 * last word may still be growing). With no whitespace at all, `whole` decides: all of it (the
 * client waited long enough, or the text has no spaces, e.g. Chinese) or nothing.
 */
export function takeWords(buffer: string, whole: boolean): { span: string; rest: string } {
  let cut = buffer.length;
  while (cut > 0 && !WHITESPACE.test(buffer[cut - 1]!)) cut--;
  if (cut === 0) return whole ? { span: buffer, rest: '' } : { span: '', rest: buffer };
  return { span: buffer.slice(0, cut), rest: buffer.slice(cut) };
}
