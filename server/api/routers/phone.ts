// The dashboard's phone tokens (docs/phone.md): listed by any member, made and revoked by owners.
// A token is shown once, at creation; the services check that its key is the org's and active.
import { z } from 'zod';
import { PhoneProfileId, createPhoneToken } from '../../services/phone/create-phone-token.ts';
import { listPhoneTokens } from '../../services/phone/list-phone-tokens.ts';
import { revokePhoneToken } from '../../services/phone/revoke-phone-token.ts';
import { createTRPCRouter, orgProcedure, ownerProcedure } from '../trpc.ts';

const iso = (d: Date | null) => d?.toISOString() ?? null;

export const phoneRouter = createTRPCRouter({
  list: orgProcedure.query(async ({ ctx }) => {
    const tokens = await listPhoneTokens(ctx.db.prisma, { orgId: ctx.org.id });
    return tokens.map((t) => ({ ...t, createdAt: t.createdAt.toISOString(), lastUsedAt: iso(t.lastUsedAt), revokedAt: iso(t.revokedAt) }));
  }),

  /** Returns the full token: the only time it is ever shown. */
  create: ownerProcedure
    .input(
      z.object({
        name: z.string().trim().min(1, 'Give the token a name (the phone number, say).').max(100, 'Name must be at most 100 characters.'),
        apiKeyId: z.string().min(1, 'Choose the API key its calls are billed to.').max(100),
        profile: PhoneProfileId,
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const t = await createPhoneToken(ctx.db.prisma, { orgId: ctx.org.id, apiKeyId: input.apiKeyId, profile: input.profile, name: input.name });
      return { id: t.id, token: t.token, prefix: t.prefix, name: t.name, profile: t.profile, apiKeyId: t.apiKeyId };
    }),

  /** Scoped to the caller's org: another org's token id is "not found", never revoked. */
  revoke: ownerProcedure.input(z.object({ id: z.string().min(1).max(100) })).mutation(async ({ ctx, input }) => {
    return revokePhoneToken(ctx.db.prisma, { id: input.id, orgId: ctx.org.id });
  }),
});
