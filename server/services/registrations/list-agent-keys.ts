// Where an org's agent keys came from: the key a claimed registration was issued (named
// "agent (reg_…)" when it was made, poll-claim.ts), with the agent's registration, the email it
// was claimed for and who authorised it on the claim page, and when. For the keys page, which
// otherwise could only show the registration id in the key's name.
import type { Prisma } from '../../db/database.ts';

export interface AgentKeyOrigin {
  registrationId: string;
  registrationType: 'anonymous' | 'service_auth';
  /** The email the claim was for (the login hint, or the address an anonymous agent gave). */
  claimedFor: string | null;
  /** Who entered the code and confirmed, and when. */
  confirmedBy: string | null;
  confirmedAt: Date | null;
}

/** The origin of each of `keyIds` that an agent registration was issued; other keys are absent from the map. */
export async function listAgentKeyOrigins(prisma: Prisma, keyIds: readonly string[]): Promise<Map<string, AgentKeyOrigin>> {
  if (keyIds.length === 0) return new Map();
  const registrations = await prisma.agentRegistration.findMany({
    where: { issuedKeyId: { in: [...keyIds] } },
    select: {
      id: true,
      type: true,
      loginHint: true,
      issuedKeyId: true,
      claimedByUserId: true,
      attempts: { where: { status: 'confirmed' }, select: { email: true, decidedAt: true, decidedByUserId: true }, take: 1 },
    },
  });
  const userIds = [...new Set(registrations.flatMap((r) => [r.claimedByUserId, r.attempts[0]?.decidedByUserId]).filter((id): id is string => Boolean(id)))];
  const users = new Map((await prisma.user.findMany({ where: { id: { in: userIds } }, select: { id: true, email: true } })).map((u) => [u.id, u.email]));
  const origins = new Map<string, AgentKeyOrigin>();
  for (const r of registrations) {
    const confirmed = r.attempts[0];
    const by = confirmed?.decidedByUserId ?? r.claimedByUserId;
    origins.set(r.issuedKeyId!, {
      registrationId: r.id,
      registrationType: r.type,
      claimedFor: confirmed?.email ?? r.loginHint ?? null,
      confirmedBy: by ? (users.get(by) ?? null) : null,
      confirmedAt: confirmed?.decidedAt ?? null,
    });
  }
  return origins;
}
