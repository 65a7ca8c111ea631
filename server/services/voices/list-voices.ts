// GET /voices: platform voices plus the org's own, newest first, keyset-paginated.
// The cursor is the (created_at, id) of the last voice of the page, so a page never repeats or
// skips a voice however many are added or removed meanwhile (new ones sort before the cursor).
import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { presentVoice, voiceInclude, type VoiceRecord } from './present-voice.ts';
import { visibleVoiceWhere } from './resolve-voice-profile.ts';

export const VOICE_SCOPES = ['featured', 'all', 'mine', 'saved'] as const;
export const DEFAULT_VOICE_PAGE = 50;
export const MAX_VOICE_PAGE = 200;

export const ListVoicesQuery = z.strictObject({
  scope: z.enum(VOICE_SCOPES).default('all'),
  gender: z.string().trim().min(1).max(32).optional(),
  language: z
    .string()
    .trim()
    .regex(/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/, 'a language tag such as en or en-US')
    .optional(),
  tag: z.string().trim().min(1).max(40).optional(),
  q: z.string().trim().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_VOICE_PAGE).default(DEFAULT_VOICE_PAGE),
  cursor: z.string().min(1).max(200).optional(),
});
export type ListVoicesQuery = z.infer<typeof ListVoicesQuery>;

interface Cursor {
  createdAt: Date;
  id: string;
}

const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify([c.createdAt.getTime(), c.id])).toString('base64url');

function decodeCursor(value: string): Cursor {
  try {
    const [ms, id] = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown[];
    // A time a Date can hold (±8.64e15 ms), and an id as ids are written.
    const createdAt = typeof ms === 'number' ? new Date(ms) : new Date(NaN);
    if (!Number.isNaN(createdAt.getTime()) && typeof id === 'string' && id.length > 0 && id.length <= 64 && !id.includes('\u0000')) return { createdAt, id };
  } catch {
    // fall through
  }
  throw new ServiceError('invalid_request', 'cursor is not a next_cursor returned by GET /voices.', 'cursor');
}

export async function listVoices(prisma: Prisma, orgId: string, query: ListVoicesQuery): Promise<{ voices: VoiceRecord[]; next_cursor: string | null }> {
  const and: object[] = [visibleVoiceWhere(orgId)];
  if (query.scope === 'featured') and.push({ featured: true });
  if (query.scope === 'mine') and.push({ orgId });
  if (query.scope === 'saved') and.push({ saves: { some: { orgId } } });
  if (query.gender) and.push({ gender: query.gender.toLowerCase() });
  if (query.language) {
    const lang = query.language;
    // "en" matches en, en-US, en-GB; "en-US" matches only itself. Stored tags are canonical case.
    and.push(
      lang.includes('-')
        ? { language: canonicalLanguage(lang) }
        : { OR: [{ language: lang.toLowerCase() }, { language: { startsWith: `${lang.toLowerCase()}-` } }] },
    );
  }
  const tag = query.tag ? `|${query.tag.toLowerCase().replace(/\|/g, '')}|` : null;
  const words = query.q ? query.q.toLowerCase().split(/\s+/).filter(Boolean).slice(0, 8) : [];
  if (tag) and.push({ tagIndex: { contains: tag } });
  for (const word of words) and.push({ searchText: { contains: word } });
  if (query.cursor) {
    const c = decodeCursor(query.cursor);
    and.push({ OR: [{ createdAt: { lt: c.createdAt } }, { createdAt: c.createdAt, id: { lt: c.id } }] });
  }
  const rows = await prisma.voice.findMany({
    where: { AND: and },
    include: voiceInclude(orgId),
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: query.limit + 1,
  });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  return {
    voices: page.filter((v) => literalMatch(v, words, tag)).map((v) => presentVoice(v, orgId)),
    next_cursor: rows.length > query.limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
  };
}

/**
 * `contains` is SQL LIKE, where % and _ are wildcards: a search for them matched more than it
 * should, so those (rare) pages are narrowed to literal matches here. Such a page may hold fewer
 * than `limit` voices; its cursor is still exact.
 */
function literalMatch(v: { searchText: string; tagIndex: string }, words: string[], tag: string | null): boolean {
  if (tag && /[%_]/.test(tag) && !v.tagIndex.includes(tag)) return false;
  return words.every((w) => !/[%_]/.test(w) || v.searchText.includes(w));
}

/** BCP 47 casing: language lowercase, region uppercase (en-US), script title case (zh-Hant). */
export function canonicalLanguage(tag: string): string {
  const [lang = '', sub] = tag.split('-');
  if (!sub) return lang.toLowerCase();
  const subtag = sub.length === 2 ? sub.toUpperCase() : sub.length === 4 ? sub[0]!.toUpperCase() + sub.slice(1).toLowerCase() : sub;
  return `${lang.toLowerCase()}-${subtag}`;
}

/** The cursor that pages on after voice `voiceId` (Cartesia's `starting_after`); 400 naming `param` when the org sees no such voice. */
export async function cursorAfterVoice(prisma: Prisma, orgId: string, voiceId: string, param: string): Promise<string> {
  const voice = await prisma.voice.findFirst({ where: { id: voiceId, ...visibleVoiceWhere(orgId) }, select: { id: true, createdAt: true } });
  if (!voice) throw new ServiceError('invalid_request', `${param}: no voice with id '${voiceId}' is visible to this organization.`, param);
  return encodeCursor({ createdAt: voice.createdAt, id: voice.id });
}
