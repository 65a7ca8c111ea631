// The one definition of what a pronunciation dictionary may contain, shared by the gateway
// (POST/PATCH /pronunciation-dicts) and the dashboard (dicts tRPC router): one zod schema,
// one set of limits, one error shape (400 invalid_request whose param names the field, e.g.
// `entries[3].alias`). How entries are applied at synthesis time is apply-pronunciation.ts.
import { z } from 'zod';
import { parseInput } from '../parse-input.ts';

export const MAX_DICT_NAME = 100;
export const MAX_GRAPHEME = 200;
export const MAX_ALIAS = 1000;
export const MAX_PHONEME = 1000;
/**
 * Entries per dictionary. Every TTS request that names the dictionary applies it on the event
 * loop; the compiled matcher (apply-pronunciation.ts) costs about the same whatever the number
 * of entries, also for the worst dictionary built against it (bench/pronunciation.ts, figures in
 * docs/performance.md); it is compiled once per version of a dictionary.
 * The request body cap (8 MB, gateway/routes/pronunciation-dicts.ts) also bounds a dictionary:
 * 10,000 entries average at most ~800 bytes each.
 */
export const MAX_ENTRIES_PER_DICT = 10_000;
/** Live (not deleted) dictionaries per org. */
export const MAX_DICTS_PER_ORG = 1000;
/** Entries over all of an org's live dictionaries: bounds what one key can store. */
export const MAX_ENTRIES_PER_ORG = 100_000;

const codePoints = (s: string) => (s.length > 0 && /[\uD800-\uDFFF]/.test(s) ? [...s].length : s.length);
// C0 controls and DEL (PostgreSQL text cannot even hold NUL), and lone surrogates, which
// would be stored as U+FFFD on PostgreSQL and kept as they are on SQLite.
const CONTROL = /[\u0000-\u001f\u007f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A string of 1..max code points without control characters or lone surrogates. */
function text(max: number, options: { trim?: boolean } = {}) {
  const base = options.trim ? z.string().trim() : z.string();
  return base
    .min(1, 'must not be empty')
    .refine((s) => !LONE_SURROGATE.test(s), 'must be valid Unicode (no lone surrogates)')
    .refine((s) => !CONTROL.test(s), 'must not contain control characters (newlines, tabs, NUL...)')
    .refine((s) => codePoints(s) <= max, `must be at most ${max} characters`);
}

const NameSchema = text(MAX_DICT_NAME, { trim: true });

// eSpeak NG's phoneme mnemonics (what it reads inline between [[ and ]]): printable ASCII.
// Square brackets would end the inline phonemes early, so they are refused here rather than
// silently dropped by the engine adapter.
const PHONEME = /^[\u0020-\u005a\u005c\u005e-\u007e]+$/;

export const DictEntrySchema = z
  .strictObject({
    grapheme: text(MAX_GRAPHEME, { trim: true }),
    alias: text(MAX_ALIAS)
      .refine((s) => s.trim().length > 0, 'must not be only spaces')
      .nullish(),
    phoneme: text(MAX_PHONEME, { trim: true })
      .refine((s) => PHONEME.test(s), 'must be eSpeak NG phoneme mnemonics: printable ASCII without [ or ] (e.g. "w\'Ib" or "h@l\'oU")')
      .nullish(),
    case_sensitive: z.boolean().default(false),
  })
  .superRefine((e, ctx) => {
    const hasAlias = e.alias != null;
    const hasPhoneme = e.phoneme != null;
    if (hasAlias && hasPhoneme) ctx.addIssue({ code: 'custom', path: ['phoneme'], message: 'give either alias or phoneme, not both' });
    if (!hasAlias && !hasPhoneme) ctx.addIssue({ code: 'custom', path: ['alias'], message: 'give an alias (replacement text) or a phoneme' });
  });

/**
 * Two entries for the same word would make which one applies depend on their order, so a
 * grapheme may appear once per dictionary, compared ignoring case.
 */
const EntriesSchema = z
  .array(DictEntrySchema)
  .max(MAX_ENTRIES_PER_DICT, `a dictionary holds at most ${MAX_ENTRIES_PER_DICT} entries`)
  .superRefine((entries, ctx) => {
    const seen = new Map<string, number>();
    entries.forEach((e, i) => {
      const key = e.grapheme.toLowerCase();
      const first = seen.get(key);
      if (first === undefined) seen.set(key, i);
      else ctx.addIssue({ code: 'custom', path: [i, 'grapheme'], message: `same grapheme as entries[${first}] (graphemes are compared ignoring case)` });
    });
  });

export const CreateDictSchema = z.strictObject({
  name: NameSchema,
  entries: EntriesSchema.default([]),
});

export const UpdateDictSchema = z
  .strictObject({
    name: NameSchema.optional(),
    entries: EntriesSchema.optional(),
  })
  .refine((u) => u.name !== undefined || u.entries !== undefined, { message: 'give name, entries or both' });

export type DictEntryInput = z.output<typeof DictEntrySchema>;
export type CreateDictInput = z.output<typeof CreateDictSchema>;
export type UpdateDictInput = z.output<typeof UpdateDictSchema>;

/** A create body, validated; anything else is a ServiceError (invalid_json or invalid_request). */
export const parseCreateDict = (raw: unknown): CreateDictInput => parseInput(CreateDictSchema, raw);

/** An update body ({name?, entries?}; entries replace the whole list), validated. */
export const parseUpdateDict = (raw: unknown): UpdateDictInput => parseInput(UpdateDictSchema, raw);
