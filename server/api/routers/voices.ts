// The voice library on the dashboard: the same services and validation as the gateway's
// /voices routes (list with filters, get, rename/retag/re-describe, delete, save) and GET
// /jobs/{id}, called directly. Cloning and profile preparation need what only the gateway has
// (which models can clone, decoding the clip, the engines: the VoiceEngines the voice services
// take), so the pages send those to the gateway through the dashboard proxy
// (app/api/gateway/[...path]/route.ts).
import { z } from 'zod';
import { getJob, listJobs } from '../../services/jobs/job-queue.ts';
import { deleteVoice } from '../../services/voices/delete-voice.ts';
import { getOwnedVoiceOrThrow, getVisibleVoiceOrThrow, getVoice } from '../../services/voices/get-voice.ts';
import { ListVoicesQuery, listVoices } from '../../services/voices/list-voices.ts';
import { listVoicesForModel } from '../../services/voices/list-voices-for-model.ts';
import { setVoiceSaved } from '../../services/voices/save-voice.ts';
import { UpdateVoiceInput, updateVoice } from '../../services/voices/update-voice.ts';
import { inputOf } from '../input-parser.ts';
import { createTRPCRouter, orgProcedure } from '../trpc.ts';

const VoiceId = z.string().min(1).max(100);
const ById = z.strictObject({ id: VoiceId });
const SetSaved = z.strictObject({ id: VoiceId, saved: z.boolean() });
const Update = z.strictObject({ id: VoiceId, changes: UpdateVoiceInput });
// tRPC's infinite queries send the page direction along with the cursor; pages only go forward.
const ListInput = ListVoicesQuery.extend({ direction: z.enum(['forward', 'backward']).optional() });
const ForModel = z.strictObject({ modelId: z.string().min(1).max(200) });
const VoiceJobs = z.strictObject({ id: VoiceId, limit: z.number().int().min(1).max(50).default(10) });
const JobId = z.strictObject({ id: z.string().min(1).max(100) });

export const voicesRouter = createTRPCRouter({
  /** GET /voices: platform voices and the org's own, newest first, with the API's filters and cursor. */
  list: orgProcedure.input(inputOf(ListInput)).query(({ ctx, input: { direction: _direction, ...query } }) => listVoices(ctx.db.prisma, ctx.org.id, query)),

  /** One voice with its profiles; another org's voice is NOT_FOUND, as on the API. */
  get: orgProcedure.input(inputOf(ById)).query(({ ctx, input }) => getVoice(ctx.db.prisma, ctx.org.id, input.id)),

  /** Rename, retag, re-describe (and gender, language) an own voice; platform voices are FORBIDDEN. */
  update: orgProcedure.input(inputOf(Update)).mutation(async ({ ctx, input }) => {
    // Ownership first, as the API does: a platform voice is FORBIDDEN whatever the changes say.
    await getOwnedVoiceOrThrow(ctx.db.prisma, ctx.org.id, input.id);
    return updateVoice(ctx.db.prisma, ctx.org.id, input.id, input.changes);
  }),

  /** Soft delete of an own voice (the engines' copies of its clones are deleted by a gateway's job worker). */
  delete: orgProcedure.input(inputOf(ById)).mutation(({ ctx, input }) => deleteVoice(ctx.db.prisma, ctx.org.id, input.id)),

  /** Save (bookmark) or unsave any visible voice. */
  setSaved: orgProcedure.input(inputOf(SetSaved)).mutation(({ ctx, input }) => setVoiceSaved(ctx.db.prisma, ctx.org.id, input.id, input.saved)),

  /** The playground's picker: voices with a ready profile for the model. */
  forModel: orgProcedure.input(inputOf(ForModel)).query(({ ctx, input }) => listVoicesForModel(ctx.db.prisma, { orgId: ctx.org.id, modelId: input.modelId })),

  /** One job of the org (a clone, a localization, a profile), as GET /jobs/{id} answers it: the pages follow the jobs they start. */
  job: orgProcedure.input(inputOf(JobId)).query(({ ctx, input }) => getJob(ctx.db.prisma, ctx.org.id, input.id)),

  /** Recent jobs on a visible voice (clone, profile preparation), newest first. */
  jobs: orgProcedure.input(inputOf(VoiceJobs)).query(async ({ ctx, input }) => {
    await getVisibleVoiceOrThrow(ctx.db.prisma, ctx.org.id, input.id);
    return listJobs(ctx.db.prisma, ctx.org.id, { limit: input.limit, voiceId: input.id });
  }),
});
