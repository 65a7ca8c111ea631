// The org the user acts for: its members and pending invitations, its name, and the list of
// orgs the user can switch between (the switch itself is the svc_org cookie, context.ts).
import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { acceptInvitation, describeInvitation } from '../../services/orgs/accept-invitation.ts';
import { addMember } from '../../services/orgs/add-member.ts';
import { createOrgForUser } from '../../services/orgs/create-org.ts';
import { changeMemberRole } from '../../services/orgs/change-member-role.ts';
import { listMembers } from '../../services/orgs/list-members.ts';
import { removeMember } from '../../services/orgs/remove-member.ts';
import { MAX_ORG_NAME, renameOrg } from '../../services/orgs/rename-org.ts';
import { revokeInvitation } from '../../services/orgs/revoke-invitation.ts';
import { getActiveMembership } from '../../services/users/get-active-membership.ts';
import { listUserOrgs } from '../../services/users/list-user-orgs.ts';
import { createTRPCRouter, orgProcedure, ownerProcedure, protectedProcedure } from '../trpc.ts';

const Role = z.enum(['owner', 'member'], { error: 'The role must be owner or member.' });
const UserId = z.object({ userId: z.string().min(1).max(100) });
const InviteToken = z.object({ token: z.string({ error: 'The invite link is incomplete: copy all of it.' }).max(100, 'The invite link is not valid.') });

/** {dashboard_url}/invite/<token>: the page that accepts an invitation for the signed-in account. */
const inviteUrl = (token: string) => `${loadConfig().dashboardUrl}/invite/${token}`;

export const orgsRouter = createTRPCRouter({
  /** Every org the user belongs to, and the one the dashboard acts for now. */
  mine: protectedProcedure.query(async ({ ctx }) => {
    const [orgs, active] = await Promise.all([
      listUserOrgs(ctx.db.prisma, { userId: ctx.session.user.id }),
      getActiveMembership(ctx.db.prisma, { userId: ctx.session.user.id, orgId: ctx.requestedOrgId }),
    ]);
    return { orgs: orgs.map((o) => ({ id: o.id, name: o.name, role: o.role })), activeOrgId: active?.org.id ?? null };
  }),

  /** A new org with the user as its owner; the page then switches to it (the org cookie). */
  create: protectedProcedure
    .input(z.object({ name: z.string().trim().min(1, 'Give the organization a name.').max(MAX_ORG_NAME, `Name must be at most ${MAX_ORG_NAME} characters.`) }))
    .mutation(({ ctx, input }) => createOrgForUser(ctx.db, { userId: ctx.session.user.id, name: input.name })),

  /** Members and live invitations of the acting org; any member may look. */
  members: orgProcedure.query(async ({ ctx }) => {
    const { members, invitations } = await listMembers(ctx.db.prisma, { orgId: ctx.org.id });
    return {
      org: { id: ctx.org.id, name: ctx.org.name },
      members: members.map((m) => ({ ...m, joinedAt: m.joinedAt.toISOString(), isYou: m.userId === ctx.session.user.id })),
      invitations: invitations.map((i) => ({ ...i, createdAt: i.createdAt.toISOString(), expiresAt: i.expiresAt.toISOString() })),
    };
  }),

  /**
   * By email: an account with a verified email joins at once ("added"); any other email is
   * invited ("invited") with an invite link, shown here once, for the owner to share.
   */
  addMember: ownerProcedure
    .input(z.object({ email: z.string().max(254, 'Email is too long.'), role: Role.default('member') }))
    .mutation(async ({ ctx, input }) => {
      const result = await addMember(ctx.db, { orgId: ctx.org.id, email: input.email, role: input.role, invitedByUserId: ctx.session.user.id });
      return result.status === 'added'
        ? { status: 'added' as const, email: result.member.email, role: result.member.role }
        : {
            status: 'invited' as const,
            email: result.invitation.email,
            role: result.invitation.role,
            expiresAt: result.invitation.expiresAt.toISOString(),
            inviteUrl: inviteUrl(result.token),
          };
    }),

  /** What an invite link offers (org, role, the email it was made for), before accepting. */
  invitation: protectedProcedure.input(InviteToken).query(async ({ ctx, input }) => {
    const i = await describeInvitation(ctx.db.prisma, { token: input.token });
    return { org: { id: i.orgId, name: i.orgName }, email: i.email, role: i.role, expiresAt: i.expiresAt.toISOString() };
  }),

  /** Accepts an invite link for the signed-in account (holding the link is the proof). */
  acceptInvitation: protectedProcedure.input(InviteToken).mutation(async ({ ctx, input }) => {
    const i = await acceptInvitation(ctx.db, { token: input.token, userId: ctx.session.user.id });
    return { org: { id: i.orgId, name: i.orgName }, role: i.role, alreadyMember: i.alreadyMember };
  }),

  /** The last owner cannot be demoted (CONFLICT). */
  changeRole: ownerProcedure
    .input(UserId.extend({ role: Role }))
    .mutation(({ ctx, input }) => changeMemberRole(ctx.db, { orgId: ctx.org.id, userId: input.userId, role: input.role })),

  /** The last owner cannot be removed (CONFLICT). Another org's member is NOT_FOUND. */
  removeMember: ownerProcedure.input(UserId).mutation(({ ctx, input }) => removeMember(ctx.db, { orgId: ctx.org.id, userId: input.userId })),

  revokeInvitation: ownerProcedure
    .input(z.object({ id: z.string().min(1).max(100) }))
    .mutation(({ ctx, input }) => revokeInvitation(ctx.db.prisma, { orgId: ctx.org.id, id: input.id })),

  rename: ownerProcedure
    .input(z.object({ name: z.string().trim().min(1, 'Give the organization a name.').max(MAX_ORG_NAME, `Name must be at most ${MAX_ORG_NAME} characters.`) }))
    .mutation(({ ctx, input }) => renameOrg(ctx.db.prisma, { orgId: ctx.org.id, name: input.name })),
});
