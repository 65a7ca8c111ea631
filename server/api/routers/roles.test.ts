// Roles: what only owners of the acting org may do (ownerProcedure), what members may do, and
// that an outsider asking to act for the org (the svc_org cookie) never reaches it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/env.ts';
import { addMember } from '../../services/orgs/add-member.ts';
import { verifyApiKey } from '../../services/keys/verify-api-key.ts';
import { registrationSettings, type RegistrationDeps } from '../../services/registrations/registration-rules.ts';
import { startRegistration } from '../../services/registrations/start-registration.ts';
import type { createCaller } from '../root.ts';
import { createApiHarness, type ApiHarness, type TestUser } from '../test-harness.ts';

type Caller = ReturnType<typeof createCaller>;

let h: ApiHarness;
let deps: RegistrationDeps;
let admin: TestUser;
let owner: TestUser;
let member: TestUser;
let outsider: TestUser;
/** Each signed in as themselves, acting for the owner's org (as the org switcher's cookie does). */
let asOwner: Caller;
let asMember: Caller;
let asOutsider: Caller;
let n = 0;

beforeAll(async () => {
  h = await createApiHarness();
  deps = { db: h.db, settings: registrationSettings(loadConfig()), now: () => new Date() };
  admin = await h.signUpUser('roles-admin@example.com');
  owner = await h.signUpUser('roles-owner@example.com');
  member = await h.signUpUser('roles-member@example.com');
  outsider = await h.signUpUser('roles-outsider@example.com');
  await addMember(h.db, { orgId: owner.orgId, email: member.user.email, role: 'member', invitedByUserId: owner.user.id });
  asOwner = h.callerFor(owner.user, owner.orgId);
  asMember = h.callerFor(member.user, owner.orgId);
  asOutsider = h.callerFor(outsider.user, owner.orgId);
});
afterAll(async () => {
  await h?.drop();
});

/** A fresh member of the owner's org, for cases that change or remove one. */
async function extraMember(): Promise<TestUser> {
  const user = await h.signUpUser(`roles-extra-${++n}@example.com`);
  await addMember(h.db, { orgId: owner.orgId, email: user.user.email, role: 'member', invitedByUserId: owner.user.id });
  return user;
}

const memberRole = async (userId: string) => (await asOwner.orgs.members()).members.find((m) => m.userId === userId)?.role;

/**
 * Each owner-only procedure: `run` calls it as the given caller; `effect` reports the state it
 * changes, so a refused call is seen to have changed nothing.
 */
interface OwnerOnlyCase {
  name: string;
  setup(): Promise<{ run(c: Caller): Promise<unknown>; effect(): Promise<unknown> }>;
}

const OWNER_ONLY: OwnerOnlyCase[] = [
  {
    name: 'keys.create',
    async setup() {
      const name = `roles key ${++n}`;
      return {
        run: (c) => c.keys.create({ name }),
        effect: async () => (await asOwner.keys.list()).filter((k) => k.name === name).length,
      };
    },
  },
  {
    name: 'keys.revoke',
    async setup() {
      const key = await asOwner.keys.create({ name: `to revoke ${++n}` });
      return {
        run: (c) => c.keys.revoke({ id: key.id }),
        effect: async () => (await verifyApiKey(h.db.hot, key.key).catch((e: { code: string }) => e.code)) as unknown,
      };
    },
  },
  {
    name: 'keys.update',
    async setup() {
      const key = await asOwner.keys.create({ name: `to limit ${++n}` });
      return {
        run: (c) => c.keys.update({ id: key.id, spendLimitUsd: '1' }),
        effect: async () => (await asOwner.keys.list()).find((k) => k.id === key.id)?.budget ?? null,
      };
    },
  },
  {
    name: 'claims.confirm',
    async setup() {
      // Codes are bound to the email the agent gave, so each caller confirms their own: the
      // check refused here is the role in the org the key would land in.
      const codes = new Map<Caller, string>();
      const regs: string[] = [];
      for (const [caller, user] of [
        [asOwner, owner],
        [asMember, member],
        [asOutsider, outsider],
      ] as const) {
        const reg = await startRegistration(deps, { type: 'service_auth', loginHint: user.user.email });
        codes.set(caller, reg.claim.userCode);
        if (caller !== asOutsider) regs.push(reg.registrationId);
      }
      return {
        run: (c) => c.claims.confirm({ code: codes.get(c)! }),
        effect: async () =>
          (await h.db.prisma.agentRegistration.findMany({ where: { id: { in: regs } }, orderBy: { id: 'asc' } })).map((r) => [r.status, r.claimedOrgId]),
      };
    },
  },
  {
    name: 'orgs.addMember',
    async setup() {
      const email = `roles-invitee-${++n}@example.com`;
      return {
        run: (c) => c.orgs.addMember({ email }),
        effect: async () => (await asOwner.orgs.members()).invitations.some((i) => i.email === email),
      };
    },
  },
  {
    name: 'orgs.changeRole',
    async setup() {
      const target = await extraMember();
      return { run: (c) => c.orgs.changeRole({ userId: target.user.id, role: 'owner' }), effect: () => memberRole(target.user.id) };
    },
  },
  {
    name: 'orgs.removeMember',
    async setup() {
      const target = await extraMember();
      return { run: (c) => c.orgs.removeMember({ userId: target.user.id }), effect: () => memberRole(target.user.id) };
    },
  },
  {
    name: 'orgs.revokeInvitation',
    async setup() {
      const invited = await asOwner.orgs.addMember({ email: `roles-pending-${++n}@example.com` });
      const id = (await asOwner.orgs.members()).invitations.find((i) => i.email === invited.email)!.id;
      return {
        run: (c) => c.orgs.revokeInvitation({ id }),
        effect: async () => (await asOwner.orgs.members()).invitations.some((i) => i.id === id),
      };
    },
  },
  {
    name: 'orgs.rename',
    async setup() {
      const name = `Renamed ${++n}`;
      return { run: (c) => c.orgs.rename({ name }), effect: async () => (await asOwner.account.me()).org.name === name };
    },
  },
];

describe.each(OWNER_ONLY)('$name is for owners', ({ setup }) => {
  it('a member of the org is refused with FORBIDDEN, and nothing changes', async () => {
    const { run, effect } = await setup();
    const before = await effect();
    await expect(run(asMember)).rejects.toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/^Only owners of .+ can do this\./) });
    expect(await effect()).toEqual(before);
  });

  it('an owner of the org may', async () => {
    const { run, effect } = await setup();
    const before = await effect();
    await expect(run(asOwner)).resolves.toBeDefined();
    expect(await effect()).not.toEqual(before);
  });

  it("someone from another org asking to act for it never reaches it: the owner's org is unchanged", async () => {
    const { run, effect } = await setup();
    const before = await effect();
    // The outsider owns their own org, which is where their request lands (or NOT_FOUND for
    // ids of the owner's org); either way the owner's org is untouched.
    await run(asOutsider).catch((e: { code: string }) => expect(['NOT_FOUND', 'BAD_REQUEST', 'FORBIDDEN']).toContain(e.code));
    expect(await effect()).toEqual(before);
  });
});

describe('roles: members', () => {
  it('a member sees their role and that they cannot manage', async () => {
    await expect(asMember.account.me()).resolves.toMatchObject({ org: { id: owner.orgId }, role: 'member', canManage: false });
    await expect(asOwner.account.me()).resolves.toMatchObject({ org: { id: owner.orgId }, role: 'owner', canManage: true });
  });

  it("a member sees the org's keys, members and usage, and works with its dictionaries", async () => {
    const key = await asOwner.keys.create({ name: 'visible to members' });
    const listed = await asMember.keys.list();
    expect(listed.map((k) => k.id)).toContain(key.id);
    expect(JSON.stringify(listed)).not.toContain(key.key);
    expect((await asMember.orgs.members()).members.map((m) => m.email)).toEqual(expect.arrayContaining([owner.user.email, member.user.email]));
    await expect(asMember.usage.summary({ days: 7 })).resolves.toBeDefined();
    const dict = await asMember.dicts.create({ name: 'member dict', entries: [{ grapheme: 'svc', alias: 'S V C', case_sensitive: false }] });
    expect((await asOwner.dicts.list()).map((d) => d.id)).toContain(dict.id);
  });

  it('checking a claim code as a member offers only the orgs they own to pay, never the one they are a member of', async () => {
    const forMember = await startRegistration(deps, { type: 'service_auth', loginHint: member.user.email });
    // Acting for the owner's org, where they are a member: their own org is offered, not that one.
    await expect(asMember.claims.check({ code: forMember.claim.userCode })).resolves.toMatchObject({
      org: { id: owner.orgId },
      orgs: [{ id: member.orgId }],
      canConfirm: true,
    });
    await expect(asMember.claims.confirm({ code: forMember.claim.userCode, orgId: owner.orgId })).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: expect.stringMatching(/^Only owners of .+ can do this/),
    });
    await expect(member.caller.claims.check({ code: forMember.claim.userCode })).resolves.toMatchObject({ org: { id: member.orgId }, canConfirm: true });
  });

  it('a platform admin who is a member of the org may do what owners do', async () => {
    await addMember(h.db, { orgId: owner.orgId, email: admin.user.email, role: 'member', invitedByUserId: owner.user.id });
    const asAdmin = h.callerFor(admin.user, owner.orgId);
    await expect(asAdmin.account.me()).resolves.toMatchObject({ role: 'member', canManage: true });
    const key = await asAdmin.keys.create({ name: 'made by the operator' });
    expect((await asOwner.keys.list()).map((k) => k.id)).toContain(key.id);
  });

  it('a demoted owner is refused on the next call', async () => {
    const second = await extraMember();
    await asOwner.orgs.changeRole({ userId: second.user.id, role: 'owner' });
    const asSecond = h.callerFor(second.user, owner.orgId);
    await expect(asSecond.keys.create({ name: 'while owner' })).resolves.toBeDefined();
    await asOwner.orgs.changeRole({ userId: second.user.id, role: 'member' });
    await expect(asSecond.keys.create({ name: 'after demotion' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });

  it('every owner-only procedure wants a session first', async () => {
    const anonymous = h.callerFor(null);
    await expect(anonymous.orgs.rename({ name: 'x' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.orgs.addMember({ email: 'x@example.com' })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.orgs.members()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(anonymous.orgs.mine()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
