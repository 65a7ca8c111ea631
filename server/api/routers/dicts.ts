// Pronunciation dictionaries on the dashboard: the same services and the same validation
// (server/services/dicts/dict-input.ts) as the gateway's /pronunciation-dicts routes, so a
// dictionary edited here is exactly what TTS applies and what the API returns.
import { z } from 'zod';
import { createDict } from '../../services/dicts/create-dict.ts';
import { deleteDict } from '../../services/dicts/delete-dict.ts';
import { parseCreateDict, parseUpdateDict, type UpdateDictInput } from '../../services/dicts/dict-input.ts';
import { getDict } from '../../services/dicts/get-dict.ts';
import { listDicts } from '../../services/dicts/list-dicts.ts';
import { updateDict } from '../../services/dicts/update-dict.ts';
import { parseInput } from '../../services/parse-input.ts';
import { createTRPCRouter, orgProcedure } from '../trpc.ts';

const ById = z.strictObject({ id: z.string().min(1).max(200) });

/** {id, name?, entries?}: the id, then the same update body the API's PATCH takes. */
function parseUpdateById(raw: unknown): { id: string } & UpdateDictInput {
  const { id, ...update } = (raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? raw : {}) as Record<string, unknown>;
  return { ...parseInput(ById, { id }), ...parseUpdateDict(update) };
}

export const dictsRouter = createTRPCRouter({
  /** The org's dictionaries without entries, newest first. */
  list: orgProcedure.query(({ ctx }) => listDicts(ctx.db.prisma, { orgId: ctx.org.id })),

  get: orgProcedure.input((raw) => parseInput(ById, raw)).query(({ ctx, input }) => getDict(ctx.db.prisma, { orgId: ctx.org.id, dictId: input.id })),

  create: orgProcedure.input(parseCreateDict).mutation(({ ctx, input }) => createDict(ctx.db.prisma, { orgId: ctx.org.id, dict: input })),

  /** Renames and/or replaces all entries (the table is saved as a whole). */
  update: orgProcedure.input(parseUpdateById).mutation(({ ctx, input }) => {
    const { id, ...update } = input;
    return updateDict(ctx.db.prisma, { orgId: ctx.org.id, dictId: id, update });
  }),

  /** Soft delete: gone from the list, the API and TTS (404 dict_not_found) at once. */
  delete: orgProcedure.input((raw) => parseInput(ById, raw)).mutation(({ ctx, input }) => deleteDict(ctx.db.prisma, { orgId: ctx.org.id, dictId: input.id })),
});
