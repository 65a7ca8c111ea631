// GET /voices as a Cartesia client asks it (the request carries `Cartesia-Version`): Cartesia's
// query (`limit` 1-100, `starting_after`, `q`, `gender`, `is_owner`, `expand[]`) and its page
// `{data, has_more, next_page}`, whose voices carry Cartesia's fields. Cartesia's SDKs page on with
// `starting_after=<last id>`; the `cartesia` upstream protocol imports a catalogue the same way.
// Reference: docs.cartesia.ai/2026-03-01/api-reference/voices/list; cartesia-js
// src/resources/voices.ts (Voice, VoiceListParams) and src/core/pagination.ts (CursorIDPage).
import { z } from 'zod';
import type { Prisma } from '../../server/db/database.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { parseInput } from '../../server/services/parse-input.ts';
import { cursorAfterVoice, listVoices } from '../../server/services/voices/list-voices.ts';
import type { VoiceRecord } from '../../server/services/voices/present-voice.ts';

/** Cartesia's default page. */
const CARTESIA_PAGE = 10;

const CARTESIA_GENDERS = { masculine: 'male', feminine: 'female', gender_neutral: 'neutral' } as const;

const CartesiaListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(CARTESIA_PAGE),
  starting_after: z.string().min(1).max(200).optional(),
  ending_before: z.string().min(1).max(200).optional(),
  q: z.string().trim().min(1).max(200).optional(),
  gender: z.enum(['masculine', 'feminine', 'gender_neutral']).optional(),
  is_owner: z.enum(['true', 'false']).optional(),
  // Preview files are not kept here: accepted and answered with null.
  'expand[]': z.union([z.string(), z.array(z.string())]).optional(),
});

const GENDER_OF: Record<string, string> = Object.fromEntries(Object.entries(CARTESIA_GENDERS).map(([cartesia, ours]) => [ours, cartesia]));

/** True when the request is a Cartesia client's. */
export const isCartesiaClient = (headers: Record<string, unknown>) => typeof headers['cartesia-version'] === 'string';

export async function listVoicesForCartesia(prisma: Prisma, orgId: string, rawQuery: unknown) {
  const query = parseInput(CartesiaListQuery, rawQuery, { body: false });
  if (query.ending_before) {
    throw new ServiceError('invalid_request', 'ending_before: pages here run forwards only; use starting_after.', 'ending_before');
  }
  const cursor = query.starting_after ? await cursorAfterVoice(prisma, orgId, query.starting_after, 'starting_after') : undefined;
  const page = await listVoices(prisma, orgId, {
    scope: query.is_owner === 'true' ? 'mine' : 'all',
    gender: query.gender ? CARTESIA_GENDERS[query.gender] : undefined,
    language: undefined,
    tag: undefined,
    q: query.q,
    limit: query.limit,
    cursor,
  });
  const data = page.voices.map(cartesiaVoice);
  const hasMore = page.next_cursor !== null;
  return { data, has_more: hasMore, next_page: hasMore ? (data.at(-1)?.id ?? null) : null };
}

function cartesiaVoice(v: VoiceRecord) {
  const language = v.language.split('-')[0]!;
  return {
    id: v.id,
    name: v.name,
    description: v.description,
    tagline: v.description,
    language,
    locales: [{ locale: v.language, is_native: true }],
    gender: GENDER_OF[v.gender] ?? null,
    is_owner: v.is_owner,
    access: v.is_owner ? ('private' as const) : ('public' as const),
    visibility: v.is_owner ? ('owner' as const) : ('all' as const),
    created_at: v.created_at,
    preview_file_url: null,
  };
}
