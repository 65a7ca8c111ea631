// Applies a pronunciation dictionary to a transcript before synthesis. Each entry replaces
// whole-word occurrences of its grapheme (case-sensitive or not, per entry) with either an
// alias (plain text, any engine) or a phoneme string, which an engine that takes phonemes
// receives in its own inline syntax and any other engine ignores (the word stays as written).
// Longer graphemes win over shorter ones that overlap them; replaced text is not re-scanned.
//
// The rule is exactly that of one regular expression over all graphemes, longest first,
//   /(?<![\p{L}\p{N}_])(?:g1|g2|…)(?![\p{L}\p{N}_])/giu
// with a case-sensitive entry whose match differs in case left as written (it still takes
// the text: a shorter grapheme does not get a second try there). That regular expression is
// what this file used to run; its cost grew with entries x transcript length (0.5-3 s for
// 10,000 entries on 5,000 characters). It is kept as the reference for the differential test
// and the benchmark (test/support/regex-pronunciation.ts).
//
// Here a dictionary is compiled once (see get-dict-matcher.ts for the cache) into a radix tree
// (a trie whose single-child chains are merged into one edge) of its graphemes' case folds.
// Applying it tries each position the regular expression would (every code point not
// preceded by a word character, left to right, resuming after a replacement) and walks the
// tree along the folded text, remembering the longest grapheme that ends before a non-word
// character. The cost is at most transcript length x grapheme length (200 code points), one
// comparison per UTF-16 unit, whatever the number of entries; memory is linear in the
// graphemes' length.
import { ServiceError } from '../errors.ts';
import { foldCodePoint, foldString, isWordCodePoint } from './case-fold.ts';

export interface PronunciationEntry {
  grapheme: string;
  alias: string | null;
  phoneme: string | null;
  caseSensitive: boolean;
}

/** Engine syntax for inline phonemes, e.g. espeak-ng's `[[h@'loU]]`; null when unsupported. */
export type PhonemeFormatter = ((phoneme: string) => string) | null;

export const MAX_EXPANDED_TRANSCRIPT = 20_000;

/** A dictionary ready to apply; immutable, so one can serve any number of requests. */
export interface CompiledPronunciation {
  readonly entryCount: number;
  readonly root: Node;
  /** UTF-16 units of graphemes and replacements held: what a cache of these weighs. */
  readonly weight: number;
}

interface Node {
  /** Folded UTF-16 units from the parent to here (empty at the root). */
  edge: string;
  /** The entry whose grapheme's fold ends here, if any. */
  entry: PronunciationEntry | null;
  /** Children by the first unit of their edge. */
  children: Map<number, Node> | null;
}

// Per position of the transcript: may a grapheme start here / end here (the word boundary).
const START = 1;
const END = 2;

/**
 * Compiles a dictionary's entries, in their order (get-dict-matcher.ts). Graphemes are
 * non-empty (dict-input.ts); an empty one, which the old expression would have matched at
 * every boundary, is ignored.
 */
export function compilePronunciation(entries: readonly PronunciationEntry[]): CompiledPronunciation {
  const root: Node = { edge: '', entry: null, children: null };
  let weight = 0;
  for (const entry of entries) {
    weight += 64 + 2 * entry.grapheme.length + (entry.alias?.length ?? 0) + (entry.phoneme?.length ?? 0);
    if (entry.grapheme.length > 0) insert(root, foldString(entry.grapheme), entry);
  }
  return { entryCount: entries.length, root, weight };
}

function insert(root: Node, key: string, entry: PronunciationEntry): void {
  let node = root;
  let i = 0;
  while (i < key.length) {
    const first = key.charCodeAt(i);
    const child = node.children?.get(first);
    if (!child) {
      (node.children ??= new Map()).set(first, { edge: key.slice(i), entry, children: null });
      return;
    }
    const edge = child.edge;
    let j = 1;
    while (j < edge.length && i + j < key.length && edge.charCodeAt(j) === key.charCodeAt(i + j)) j++;
    if (j < edge.length) {
      // The key leaves (or ends inside) this edge: split it where they part.
      const split: Node = { edge: edge.slice(0, j), entry: null, children: new Map([[edge.charCodeAt(j), child]]) };
      child.edge = edge.slice(j);
      node.children!.set(first, split);
      node = split;
    } else {
      node = child;
    }
    i += j;
  }
  // Graphemes with the same fold have the same length, so the expression's longest-first
  // (stable) order puts the first of them ahead of the others, which never apply.
  node.entry ??= entry;
}

export function applyPronunciation(transcript: string, dict: CompiledPronunciation, formatPhoneme: PhonemeFormatter): string {
  if (dict.entryCount === 0) return transcript;
  const n = transcript.length;
  const { folded, flags } = scan(transcript);
  let out = '';
  let copied = 0;
  let p = 0;
  while (p < n) {
    if (flags[p]! & START) {
      const found = longestAt(dict.root, folded, flags, p);
      if (found) {
        const match = transcript.slice(p, found.end);
        out += transcript.slice(copied, p) + replacement(found.entry, match, formatPhoneme);
        copied = p = found.end;
        continue;
      }
    }
    p += isPairAt(transcript, p) ? 2 : 1;
  }
  out = copied === 0 ? transcript : out + transcript.slice(copied);
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

function replacement(entry: PronunciationEntry, match: string, formatPhoneme: PhonemeFormatter): string {
  if (entry.caseSensitive && match !== entry.grapheme) return match;
  if (entry.alias !== null) return entry.alias;
  if (entry.phoneme !== null && formatPhoneme) return formatPhoneme(entry.phoneme);
  return match;
}

const isHigh = (u: number) => u >= 0xd800 && u <= 0xdbff;
const isLow = (u: number) => u >= 0xdc00 && u <= 0xdfff;
const isPairAt = (s: string, i: number) => isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1));

/**
 * The transcript folded unit for unit (a fold keeps a code point's UTF-16 length), and the
 * word boundaries: START where the previous code point is not a word character (or at 0),
 * END where the next one is not (or at the end). The second unit of a surrogate pair is
 * neither, as a match never starts or ends inside a code point.
 */
function scan(text: string): { folded: Uint16Array; flags: Uint8Array } {
  const n = text.length;
  const folded = new Uint16Array(n);
  const flags = new Uint8Array(n + 1);
  let previousIsWord = false;
  for (let i = 0; i < n;) {
    const unit = text.charCodeAt(i);
    const pair = isHigh(unit) && i + 1 < n && isLow(text.charCodeAt(i + 1));
    const cp = pair ? text.codePointAt(i)! : unit;
    const fold = foldCodePoint(cp);
    const isWord = isWordCodePoint(cp);
    flags[i] = (previousIsWord ? 0 : START) | (isWord ? 0 : END);
    if (pair) {
      folded[i] = 0xd800 + ((fold - 0x10000) >> 10);
      folded[i + 1] = 0xdc00 + ((fold - 0x10000) & 0x3ff);
    } else {
      folded[i] = fold;
    }
    previousIsWord = isWord;
    i += pair ? 2 : 1;
  }
  flags[n] = (previousIsWord ? 0 : START) | END;
  return { folded, flags };
}

/** The longest grapheme whose fold matches the folded text at `p` and ends at a boundary. */
function longestAt(root: Node, folded: Uint16Array, flags: Uint8Array, p: number): { entry: PronunciationEntry; end: number } | null {
  const n = folded.length;
  let node = root;
  let at = p;
  let best: Node | null = null;
  let bestEnd = 0;
  for (;;) {
    if (node.entry && flags[at]! & END) {
      best = node;
      bestEnd = at;
    }
    const child = at < n ? node.children?.get(folded[at]!) : undefined;
    if (!child) break;
    const edge = child.edge;
    if (at + edge.length > n) break;
    let k = 1;
    while (k < edge.length && edge.charCodeAt(k) === folded[at + k]) k++;
    if (k < edge.length) break;
    at += edge.length;
    node = child;
  }
  return best ? { entry: best.entry!, end: bestEnd } : null;
}
