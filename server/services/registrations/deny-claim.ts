// The user declines the code ("this is not my agent"). The registration ends at once: the
// agent's poll answers invalid_grant and a new code is refused with 410 claim_expired. An
// anonymous registration's trial key is not the user's business and keeps its trial budget.
import { ServiceError } from '../errors.ts';
import { findClaimForUser, type CodeEntry } from './describe-claim.ts';
import { withStore, type RegistrationDeps } from './registration-rules.ts';

export async function denyClaim(deps: RegistrationDeps, entry: CodeEntry): Promise<{ registrationId: string }> {
  const { attempt, registration } = await findClaimForUser(deps, entry);
  const now = deps.now();
  return withStore('agent_auth_unavailable', () =>
    deps.db.prisma.$transaction(async (tx) => {
      const decided = await tx.claimAttempt.updateMany({
        where: { id: attempt.id, status: 'pending' },
        data: { status: 'denied', decidedAt: now, decidedByUserId: entry.user.id },
      });
      if (decided.count !== 1) throw new ServiceError('invalid_grant', 'This code has just been used.', 'code');
      await tx.agentRegistration.updateMany({ where: { id: registration.id, status: 'pending' }, data: { expiresAt: now } });
      return { registrationId: registration.id };
    }),
  );
}
