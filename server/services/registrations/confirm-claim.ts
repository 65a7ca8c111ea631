// The user confirms the code: the registration becomes claimed for the user's org. The agent's
// next poll then receives a new key on that org (poll-claim.ts).
//
// Anonymous registrations, decided here: the trial key is revoked at once (401
// api_key_disabled on its next request); what the agent made during the trial (voices, voice
// saves, pronunciation dictionaries, uploaded blobs, jobs) moves to the user's org, so the ids
// it uses keep working with the new key; the trial org's remaining credit is NOT transferred
// (trial credit is the operator's gift per registration: moving it would let anyone farm
// trials into one account); it stays, unusable, on the closed trial org with its ledger.
import { ServiceError } from '../errors.ts';
import { findClaimForUser, type CodeEntry } from './describe-claim.ts';
import { MAX_FAILED_GUESSES, withStore, type RegistrationDeps, type Tx } from './registration-rules.ts';

export interface ConfirmedClaim {
  registrationId: string;
  orgId: string;
}

export async function confirmClaim(deps: RegistrationDeps, entry: CodeEntry & { orgId: string }): Promise<ConfirmedClaim> {
  const { attempt, registration } = await findClaimForUser(deps, entry);
  const now = deps.now();
  return withStore('agent_auth_unavailable', () =>
    deps.db.prisma.$transaction(async (tx) => {
      // Single use: only one decision can move the attempt out of pending.
      const decided = await tx.claimAttempt.updateMany({
        where: { id: attempt.id, status: 'pending', expiresAt: { gt: now }, failedGuesses: { lt: MAX_FAILED_GUESSES } },
        data: { status: 'confirmed', decidedAt: now, decidedByUserId: entry.user.id },
      });
      if (decided.count !== 1) throw new ServiceError('invalid_grant', 'This code has just been used or has expired. Ask the agent for a new code.', 'code');
      const claimed = await tx.agentRegistration.updateMany({
        where: { id: registration.id, status: 'pending', expiresAt: { gt: now } },
        // The trial key is revoked below, so its sealed copy has nothing left to redeliver.
        data: { status: 'claimed', claimedByUserId: entry.user.id, claimedOrgId: entry.orgId, trialKeySealed: null },
      });
      if (claimed.count !== 1) throw new ServiceError('already_claimed', 'This agent has already been claimed.', 'code');
      if (registration.trialKeyId) {
        await tx.apiKey.updateMany({ where: { id: registration.trialKeyId, status: 'active' }, data: { status: 'revoked', revokedAt: now } });
      }
      if (registration.trialOrgId && registration.trialOrgId !== entry.orgId) await moveTrialResources(tx, registration.trialOrgId, entry.orgId);
      return { registrationId: registration.id, orgId: entry.orgId };
    }),
  );
}

async function moveTrialResources(tx: Tx, from: string, to: string): Promise<void> {
  const where = { orgId: from };
  const data = { orgId: to };
  await tx.voice.updateMany({ where, data });
  await tx.pronunciationDict.updateMany({ where, data });
  // Blob bytes count against the org that holds them (the user's org may end up over its
  // quota: it then stores nothing more until it deletes some).
  const moved = await tx.blob.aggregate({ where: { ...where, deletedAt: null }, _sum: { sizeBytes: true } });
  const bytes = BigInt(moved._sum.sizeBytes ?? 0);
  await tx.blob.updateMany({ where, data });
  if (bytes > 0n) {
    await tx.org.update({ where: { id: from }, data: { blobBytes: { decrement: bytes } } });
    await tx.org.update({ where: { id: to }, data: { blobBytes: { increment: bytes } } });
  }
  await tx.job.updateMany({ where, data });
  // Saves are keyed (voice, org): keep the user's own save where both saved the same voice.
  const saves = await tx.voiceSave.findMany({ where, select: { voiceId: true } });
  if (saves.length > 0) {
    const existing = new Set(
      (await tx.voiceSave.findMany({ where: { orgId: to, voiceId: { in: saves.map((s) => s.voiceId) } }, select: { voiceId: true } })).map((s) => s.voiceId),
    );
    const moving = saves.filter((s) => !existing.has(s.voiceId)).map((s) => s.voiceId);
    if (moving.length > 0) await tx.voiceSave.updateMany({ where: { orgId: from, voiceId: { in: moving } }, data });
    await tx.voiceSave.deleteMany({ where });
  }
}
