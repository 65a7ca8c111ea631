import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember } from '../../services/orgs/add-member.ts';
import { acceptPendingInvitations, INVITATION_TTL_DAYS } from '../../services/orgs/invitations.ts';
import { changeMemberRole } from '../../services/orgs/change-member-role.ts';
import { removeMember } from '../../services/orgs/remove-member.ts';
import { hashLinkToken } from '../../services/users/link-token.ts';
import { signInWithOAuth } from '../../services/users/sign-in-with-oauth.ts';
import { signUp } from '../../services/users/sign-up.ts';
import { createApiHarness, TEST_PASSWORD, type ApiHarness, type TestUser } from '../test-harness.ts';

let h: ApiHarness;
let n = 0;

beforeAll(async () => {
  h = await createApiHarness();
});
afterAll(async () => {
  await h?.drop();
});

const email = (what: string) => `orgs-${what}-${++n}@example.com`;
const newUser = (what = 'user') => h.signUpUser(email(what));
/** Acting for `orgId`, as the org switcher's cookie makes the dashboard do. */
const actingFor = (user: TestUser, orgId: string) => h.callerFor(user.user, orgId);

describe('orgs.create', () => {
  it('makes a new org with the creator as its only owner, listed among their orgs', async () => {
    const carol = await newUser('carol');
    const created = await carol.caller.orgs.create({ name: '  Side project  ' });
    expect(created).toEqual({ id: expect.stringMatching(/^org_/), name: 'Side project' });
    const mine = await carol.caller.orgs.mine();
    expect(mine.orgs).toContainEqual({ id: created.id, name: 'Side project', role: 'owner' });
    const members = await actingFor(carol, created.id).orgs.members();
    expect(members.members.map((m) => [m.email, m.role])).toEqual([[carol.user.email, 'owner']]);
  });

  it('refuses an empty name with a message for people', async () => {
    const dave = await newUser('dave');
    await expect(dave.caller.orgs.create({ name: '   ' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('Give the organization a name.'),
    });
  });
});

describe('members: happy path', () => {
  it('an owner sees themselves as the only member of a new org', async () => {
    const alice = await newUser('alice');
    const listed = await alice.caller.orgs.members();
    expect(listed.org).toEqual({ id: alice.orgId, name: expect.stringMatching(/'s org$/) });
    expect(listed.members).toEqual([{ userId: alice.user.id, email: alice.user.email, name: null, role: 'owner', joinedAt: expect.any(String), isYou: true }]);
    expect(listed.invitations).toEqual([]);
  });

  it('adding an existing account makes it a member at once; it can switch to the org', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await expect(alice.caller.orgs.addMember({ email: `  ${bob.user.email.toUpperCase()} ` })).resolves.toEqual({
      status: 'added',
      email: bob.user.email,
      role: 'member',
    });

    const members = (await alice.caller.orgs.members()).members;
    expect(members.map((m) => [m.email, m.role])).toEqual([
      [alice.user.email, 'owner'],
      [bob.user.email, 'member'],
    ]);
    expect(new Date(members[1]!.joinedAt).getTime()).toBeGreaterThan(Date.now() - 60_000);

    // Bob still acts for his own org by default, and for Alice's when he asks to.
    const mine = await bob.caller.orgs.mine();
    expect(mine.orgs.map((o) => [o.id, o.role])).toEqual([
      [bob.orgId, 'owner'],
      [alice.orgId, 'member'],
    ]);
    expect(mine.activeOrgId).toBe(bob.orgId);
    expect((await actingFor(bob, alice.orgId).orgs.mine()).activeOrgId).toBe(alice.orgId);
    await expect(actingFor(bob, alice.orgId).account.me()).resolves.toMatchObject({ org: { id: alice.orgId }, role: 'member', canManage: false });
  });

  it('adding as owner, then changing roles both ways', async () => {
    const alice = await newUser('alice');
    const carol = await newUser('carol');
    await expect(alice.caller.orgs.addMember({ email: carol.user.email, role: 'owner' })).resolves.toMatchObject({ status: 'added', role: 'owner' });
    await expect(alice.caller.orgs.changeRole({ userId: carol.user.id, role: 'member' })).resolves.toEqual({ userId: carol.user.id, role: 'member' });
    await expect(alice.caller.orgs.changeRole({ userId: carol.user.id, role: 'member' })).resolves.toEqual({ userId: carol.user.id, role: 'member' });
    await expect(alice.caller.orgs.changeRole({ userId: carol.user.id, role: 'owner' })).resolves.toEqual({ userId: carol.user.id, role: 'owner' });
    // Now Carol, an owner, may demote Alice: there is still an owner.
    await expect(actingFor(carol, alice.orgId).orgs.changeRole({ userId: alice.user.id, role: 'member' })).resolves.toMatchObject({ role: 'member' });
    await expect(alice.caller.orgs.members()).resolves.toBeDefined(); // Alice falls back to her own org
    await expect(actingFor(alice, alice.orgId).keys.create({ name: 'x' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });

  it('removing a member takes the org away from them on their next call', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email });
    const key = await alice.caller.keys.create({ name: 'secret plans' });
    expect((await actingFor(bob, alice.orgId).keys.list()).map((k) => k.id)).toContain(key.id);

    await expect(alice.caller.orgs.removeMember({ userId: bob.user.id })).resolves.toEqual({ userId: bob.user.id, removed: true });
    expect((await alice.caller.orgs.members()).members.map((m) => m.userId)).toEqual([alice.user.id]);
    // The cookie still names Alice's org; Bob now lands in his own.
    expect((await actingFor(bob, alice.orgId).keys.list()).map((k) => k.id)).not.toContain(key.id);
    expect((await bob.caller.orgs.mine()).orgs.map((o) => o.id)).toEqual([bob.orgId]);
  });

  it('renames the org (trimmed)', async () => {
    const alice = await newUser('alice');
    await expect(alice.caller.orgs.rename({ name: '  Acme Voice  ' })).resolves.toEqual({ id: alice.orgId, name: 'Acme Voice' });
    await expect(alice.caller.account.me()).resolves.toMatchObject({ org: { name: 'Acme Voice' } });
  });
});

describe('members: invitations', () => {
  it('an unknown email is invited with a link; a password sign-up with that email does NOT join (the address is unproven), following the link does', async () => {
    const alice = await newUser('alice');
    const invitee = email('invitee');
    const invited = await alice.caller.orgs.addMember({ email: invitee, role: 'owner' });
    expect(invited).toMatchObject({
      status: 'invited',
      email: invitee,
      role: 'owner',
      inviteUrl: expect.stringMatching(/^https?:\/\/[^/]+\/invite\/[A-Za-z0-9_-]{43}$/),
    });
    if (invited.status !== 'invited') throw new Error('unreachable');
    const days = (new Date(invited.expiresAt).getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(INVITATION_TTL_DAYS - 1);
    expect(days).toBeLessThanOrEqual(INVITATION_TTL_DAYS);
    expect((await alice.caller.orgs.members()).invitations).toEqual([
      { id: expect.stringMatching(/^inv_/), email: invitee, role: 'owner', createdAt: expect.any(String), expiresAt: invited.expiresAt },
    ]);
    // Only the token's hash is kept.
    const token = invited.inviteUrl.split('/invite/')[1]!;
    const row = await h.db.prisma.invitation.findFirstOrThrow({ where: { email: invitee } });
    expect(row.tokenHash).toBe(hashLinkToken(token));
    expect(JSON.stringify(row)).not.toContain(token);

    // Whoever types the address into the sign-up form first gets nothing of it.
    const created = await signUp(h.db, { email: invitee.toUpperCase(), password: TEST_PASSWORD });
    expect(created.joinedOrgIds).toEqual([]);
    expect((await alice.caller.orgs.members()).members.map((m) => m.email)).not.toContain(invitee);

    // The person the owner sent the link to follows it signed in, with any account.
    const bob = await h.signUpUser(email('bob'), { verified: false });
    await expect(bob.caller.orgs.invitation({ token })).resolves.toEqual({
      org: { id: alice.orgId, name: expect.any(String) },
      email: invitee,
      role: 'owner',
      expiresAt: invited.expiresAt,
    });
    await expect(bob.caller.orgs.acceptInvitation({ token })).resolves.toEqual({
      org: { id: alice.orgId, name: expect.any(String) },
      role: 'owner',
      alreadyMember: false,
    });
    const listed = await alice.caller.orgs.members();
    expect(listed.invitations).toEqual([]);
    expect(listed.members.find((m) => m.userId === bob.user.id)).toMatchObject({ role: 'owner' });
    // Their own org stays the one the server acts for unless they switch (the page switches).
    await expect(bob.caller.orgs.mine()).resolves.toMatchObject({ activeOrgId: bob.orgId, orgs: [{ id: bob.orgId }, { id: alice.orgId, role: 'owner' }] });
    // Single use.
    const carol = await newUser('carol');
    await expect(carol.caller.orgs.acceptInvitation({ token })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('not valid') });
  });

  it('an existing account that never verified its email is invited, not added: its address may not be its own', async () => {
    const alice = await newUser('alice');
    const squatted = email('squatted');
    const squatter = await h.signUpUser(squatted, { verified: false });
    const result = await alice.caller.orgs.addMember({ email: squatted });
    expect(result).toMatchObject({ status: 'invited', email: squatted });
    expect((await alice.caller.orgs.members()).members.map((m) => m.userId)).not.toContain(squatter.user.id);
    // Nor does signing in apply it.
    await expect(acceptPendingInvitations(h.db.prisma, { userId: squatter.user.id })).resolves.toEqual([]);
    // A verified email's account is added at once.
    const verified = await newUser('verified');
    await expect(alice.caller.orgs.addMember({ email: verified.user.email })).resolves.toMatchObject({ status: 'added' });
  });

  it('invite links end: a newer link for the email, a withdrawal, expiry; a made-up one is not valid', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const invitee = email('links');
    const tokenOf = (r: Awaited<ReturnType<typeof alice.caller.orgs.addMember>>) => (r.status === 'invited' ? r.inviteUrl.split('/invite/')[1]! : '');
    const first = tokenOf(await alice.caller.orgs.addMember({ email: invitee }));
    const second = tokenOf(await alice.caller.orgs.addMember({ email: invitee }));
    expect(second).not.toBe(first);
    await expect(bob.caller.orgs.acceptInvitation({ token: first })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('replaced by a newer link'),
    });
    await alice.caller.orgs.revokeInvitation({ id: (await alice.caller.orgs.members()).invitations[0]!.id });
    await expect(bob.caller.orgs.invitation({ token: second })).rejects.toMatchObject({ code: 'BAD_REQUEST' });

    const longAgo = new Date(Date.now() - (INVITATION_TTL_DAYS + 1) * 86_400_000);
    const lapsed = await addMember(h.db, { orgId: alice.orgId, email: email('lapsed'), role: 'member', invitedByUserId: alice.user.id, now: longAgo });
    if (lapsed.status !== 'invited') throw new Error('unreachable');
    await expect(bob.caller.orgs.acceptInvitation({ token: lapsed.token })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('expired'),
    });

    for (const token of ['', 'x'.repeat(43), `${second}!`])
      await expect(bob.caller.orgs.acceptInvitation({ token })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(bob.caller.orgs.acceptInvitation({ token: 'x'.repeat(101) })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: 'The invite link is not valid.',
    });
    expect((await bob.caller.orgs.mine()).orgs.map((o) => o.id)).toEqual([bob.orgId]);
    // Signed out, nothing.
    await expect(h.callerFor(null).orgs.acceptInvitation({ token: second })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('two accounts following one link at once: exactly one joins', async () => {
    const alice = await newUser('alice');
    const [bob, carol] = [await newUser('bob'), await newUser('carol')];
    const invited = await alice.caller.orgs.addMember({ email: email('race') });
    if (invited.status !== 'invited') throw new Error('unreachable');
    const token = invited.inviteUrl.split('/invite/')[1]!;
    const results = await Promise.allSettled([bob.caller.orgs.acceptInvitation({ token }), carol.caller.orgs.acceptInvitation({ token })]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(await h.db.prisma.membership.count({ where: { orgId: alice.orgId } })).toBe(2);
  });

  it('adding the same email again replaces the invitation (one per email and org)', async () => {
    const alice = await newUser('alice');
    const invitee = email('again');
    await alice.caller.orgs.addMember({ email: invitee, role: 'owner' });
    await alice.caller.orgs.addMember({ email: invitee, role: 'member' });
    expect((await alice.caller.orgs.members()).invitations.map((i) => [i.email, i.role])).toEqual([[invitee, 'member']]);
  });

  it('one email invited by two orgs: an account that proves the email (an OAuth provider vouching for it) joins both', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const invitee = email('popular');
    await alice.caller.orgs.addMember({ email: invitee });
    await bob.caller.orgs.addMember({ email: invitee });
    const signedIn = await signInWithOAuth(h.db, { email: invitee, emailVerified: true });
    if (!signedIn.ok) throw new Error('unreachable');
    const orgs = (await h.callerFor(signedIn.user).orgs.mine()).orgs.map((o) => o.id);
    expect(orgs).toEqual(expect.arrayContaining([alice.orgId, bob.orgId]));
  });

  it('an expired invitation is not listed and not applied', async () => {
    const alice = await newUser('alice');
    const invitee = email('late');
    const longAgo = new Date(Date.now() - (INVITATION_TTL_DAYS + 1) * 86_400_000);
    await addMember(h.db, { orgId: alice.orgId, email: invitee, role: 'member', invitedByUserId: alice.user.id, now: longAgo });
    expect((await alice.caller.orgs.members()).invitations).toEqual([]);
    const signedIn = await signInWithOAuth(h.db, { email: invitee, emailVerified: true });
    expect(signedIn.ok).toBe(true);
    expect((await alice.caller.orgs.members()).members.map((m) => m.email)).not.toContain(invitee);
    expect(await h.db.prisma.invitation.count({ where: { email: invitee } })).toBe(0);
  });

  it('an invitation added for an existing verified account after its creation is applied at its next sign-in', async () => {
    // What addMember does when it loses the race with the sign-up: the invitation row exists
    // for an account that already exists.
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await h.db.prisma.invitation.create({
      data: { id: 'inv_raced', orgId: alice.orgId, email: bob.user.email, role: 'member', expiresAt: new Date(Date.now() + 86_400_000) },
    });
    await expect(acceptPendingInvitations(h.db.prisma, { userId: bob.user.id })).resolves.toEqual([alice.orgId]);
    await expect(acceptPendingInvitations(h.db.prisma, { userId: bob.user.id })).resolves.toEqual([]);
    expect((await bob.caller.orgs.mine()).orgs.map((o) => o.id)).toContain(alice.orgId);
  });

  it('an owner withdraws a pending invitation', async () => {
    const alice = await newUser('alice');
    const invitee = email('withdrawn');
    await alice.caller.orgs.addMember({ email: invitee });
    const id = (await alice.caller.orgs.members()).invitations[0]!.id;
    await expect(alice.caller.orgs.revokeInvitation({ id })).resolves.toEqual({ id, revoked: true });
    await expect(alice.caller.orgs.revokeInvitation({ id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // Not even an account that proves the address joins.
    const signedIn = await signInWithOAuth(h.db, { email: invitee, emailVerified: true });
    if (!signedIn.ok) throw new Error('unreachable');
    expect((await h.callerFor(signedIn.user).orgs.mine()).orgs.map((o) => o.id)).not.toContain(alice.orgId);
  });
});

describe('members: errors', () => {
  it('the last owner can be neither demoted nor removed, with a message saying what to do', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email });
    await expect(alice.caller.orgs.changeRole({ userId: alice.user.id, role: 'member' })).rejects.toMatchObject({
      code: 'CONFLICT',
      message: 'This is the last owner of the organization. Make another member an owner first.',
    });
    await expect(alice.caller.orgs.removeMember({ userId: alice.user.id })).rejects.toMatchObject({
      code: 'CONFLICT',
      message: 'The last owner of an organization cannot be removed. Make another member an owner first.',
    });
    expect((await alice.caller.orgs.members()).members.find((m) => m.isYou)?.role).toBe('owner');
  });

  it('an owner may leave when another owner remains', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email, role: 'owner' });
    await expect(alice.caller.orgs.removeMember({ userId: alice.user.id })).resolves.toMatchObject({ removed: true });
    expect((await actingFor(bob, alice.orgId).orgs.members()).members.map((m) => [m.email, m.role])).toEqual([[bob.user.email, 'owner']]);
  });

  it('two owners demoting each other at once leave exactly one owner', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email, role: 'owner' });
    const results = await Promise.allSettled([
      changeMemberRole(h.db, { orgId: alice.orgId, userId: bob.user.id, role: 'member' }),
      changeMemberRole(h.db, { orgId: alice.orgId, userId: alice.user.id, role: 'member' }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(await h.db.prisma.membership.count({ where: { orgId: alice.orgId, role: 'owner' } })).toBe(1);
  });

  it('two owners removing each other at once leave exactly one owner', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email, role: 'owner' });
    const results = await Promise.allSettled([
      removeMember(h.db, { orgId: alice.orgId, userId: bob.user.id }),
      removeMember(h.db, { orgId: alice.orgId, userId: alice.user.id }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(await h.db.prisma.membership.count({ where: { orgId: alice.orgId, role: 'owner' } })).toBe(1);
  });

  it('adding someone who is already a member is a conflict', async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    await alice.caller.orgs.addMember({ email: bob.user.email });
    await expect(alice.caller.orgs.addMember({ email: bob.user.email, role: 'owner' })).rejects.toMatchObject({
      code: 'CONFLICT',
      message: `${bob.user.email} is already a member of this organization.`,
    });
    await expect(alice.caller.orgs.addMember({ email: alice.user.email })).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await alice.caller.orgs.members()).members.find((m) => m.userId === bob.user.id)?.role).toBe('member');
  });

  it.each([
    ['empty', ''],
    ['not an email', 'bob'],
    ['a NUL byte', 'bo\u0000b@example.com'],
    ['a newline', 'bob@example.com\nmallory@example.com'],
    ['too long', `${'a'.repeat(250)}@example.com`],
  ])('refuses an email that is %s with BAD_REQUEST', async (_label, bad) => {
    const alice = await newUser('alice');
    await expect(alice.caller.orgs.addMember({ email: bad })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    expect((await alice.caller.orgs.members()).invitations).toEqual([]);
  });

  it('refuses unknown roles and bad names', async () => {
    const alice = await newUser('alice');
    const bad = { email: 'x@example.com', role: 'admin' } as unknown as { email: string; role: 'owner' };
    await expect(alice.caller.orgs.addMember(bad)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'The role must be owner or member.' });
    await expect(alice.caller.orgs.changeRole({ userId: alice.user.id, role: 'superuser' as 'owner' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(alice.caller.orgs.rename({ name: '   ' })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: 'Give the organization a name.' });
    await expect(alice.caller.orgs.rename({ name: 'x'.repeat(201) })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('unknown member ids are NOT_FOUND', async () => {
    const alice = await newUser('alice');
    await expect(alice.caller.orgs.changeRole({ userId: 'usr_nobody', role: 'owner' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(alice.caller.orgs.removeMember({ userId: 'usr_nobody' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('members: other orgs', () => {
  it("an owner cannot see, change or remove another org's members, nor withdraw its invitations", async () => {
    const alice = await newUser('alice');
    const bob = await newUser('bob');
    const mallory = await newUser('mallory');
    await alice.caller.orgs.addMember({ email: bob.user.email });
    await alice.caller.orgs.addMember({ email: email('pending') });
    const invitationId = (await alice.caller.orgs.members()).invitations[0]!.id;

    // Mallory asks to act for Alice's org: she is not a member, so she acts for her own.
    const pretending = actingFor(mallory, alice.orgId);
    const seen = await pretending.orgs.members();
    expect(seen.org.id).toBe(mallory.orgId);
    expect(JSON.stringify(seen)).not.toContain(bob.user.email);
    await expect(pretending.orgs.removeMember({ userId: bob.user.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(pretending.orgs.changeRole({ userId: bob.user.id, role: 'owner' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(pretending.orgs.revokeInvitation({ id: invitationId })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await pretending.orgs.rename({ name: 'Mallory renamed' });

    const after = await alice.caller.orgs.members();
    expect(after.org.name).not.toBe('Mallory renamed');
    expect(after.members.map((m) => [m.email, m.role])).toEqual([
      [alice.user.email, 'owner'],
      [bob.user.email, 'member'],
    ]);
    expect(after.invitations.map((i) => i.id)).toEqual([invitationId]);
    expect((await mallory.caller.orgs.mine()).orgs.map((o) => o.id)).toEqual([mallory.orgId]);
  });
});
