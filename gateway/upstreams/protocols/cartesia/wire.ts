// What every Cartesia call shares: the upstream's settings, the headers, language tags and word
// timings as Cartesia writes them. References in ./index.ts.
import { z } from 'zod';
import type { UpstreamTarget, Word } from '../../contract.ts';

/** The output rates Cartesia's raw formats and STT sockets take. */
export const CARTESIA_RATES = [8000, 16000, 22050, 24000, 44100, 48000] as const;

export const settings = z
  .object({
    /**
     * `Cartesia-Version`. 2026-03-01 is the version the API reference documents for every
     * endpoint used here, and the first with structured JSON errors (older ones may answer
     * `Title: Message` as plain text).
     */
    version: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date, YYYY-MM-DD')
      .default('2026-03-01'),
    /** The rate of the raw 16-bit PCM asked of /tts/bytes. */
    tts_sample_rate: z.literal(CARTESIA_RATES).default(24000),
  })
  .strict();
export type CartesiaSettings = z.infer<typeof settings>;

/** A Cartesia upstream, its settings as the schema above parsed them. */
export type CartesiaTarget = UpstreamTarget<CartesiaSettings>;

/** Bearer auth, as the API conventions ask of servers (X-API-Key is also taken), and the version. */
export function cartesiaHeaders(target: CartesiaTarget): Record<string, string> {
  return {
    'cartesia-version': target.settings.version,
    ...(target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {}),
  };
}

/** ISO 639-1 from a BCP-47 tag ('en-US' -> 'en'), the form Cartesia's `language` takes. */
export const primaryLanguage = (tag: string) => tag.split(/[-_]/)[0]!.toLowerCase();

const finite = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/**
 * Word timings as Cartesia sends them: `[{word, start, end}]` per the API reference; the SDK's
 * generated types describe the STT socket's `words` as parallel arrays `{words, start, end}`,
 * so that shape is read too. Malformed entries are left out.
 */
export function parseWords(value: unknown): Word[] {
  const words: Word[] = [];
  if (Array.isArray(value)) {
    for (const item of value as { word?: unknown; start?: unknown; end?: unknown }[]) {
      if (typeof item?.word === 'string' && item.word.trim() && finite(item.start) && finite(item.end)) {
        words.push({ word: item.word.trim(), start: item.start, end: item.end });
      }
    }
  } else if (value && typeof value === 'object') {
    const columns = value as { words?: unknown; start?: unknown; end?: unknown };
    if (Array.isArray(columns.words) && Array.isArray(columns.start) && Array.isArray(columns.end)) {
      columns.words.forEach((word: unknown, i) => {
        const start: unknown = (columns.start as unknown[])[i];
        const end: unknown = (columns.end as unknown[])[i];
        if (typeof word === 'string' && word.trim() && finite(start) && finite(end)) words.push({ word: word.trim(), start, end });
      });
    }
  }
  return words;
}
