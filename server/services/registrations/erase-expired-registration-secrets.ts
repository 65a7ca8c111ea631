// Sealed keys are kept only for their redelivery windows; this erases them when the window
// ends even if the agent never polls again (polls erase lazily too), and deletes
// registrations a week after they ended. The gateway runs it when the next window ends (the
// `nextDueAt` it returns), and at least every minute.
import { PURGE_AFTER_MS, REDELIVERY_MS, type RegistrationDeps } from './registration-rules.ts';

export interface ErasedSecrets {
  erased: number;
  purged: number;
  /** When the earliest sealed key still kept must be erased; null when none is kept. */
  nextDueAt: Date | null;
}

export async function eraseExpiredRegistrationSecrets(deps: Pick<RegistrationDeps, 'db' | 'now'>): Promise<ErasedSecrets> {
  const now = deps.now();
  const { prisma } = deps.db;
  const issued = await prisma.agentRegistration.updateMany({
    where: { issuedKeySealed: { not: null }, OR: [{ deliveredAt: { lte: new Date(now.getTime() - REDELIVERY_MS) } }, { expiresAt: { lte: now } }] },
    data: { issuedKeySealed: null },
  });
  const trial = await prisma.agentRegistration.updateMany({
    where: { trialKeySealed: { not: null }, OR: [{ assertionExpiresAt: { lte: now } }, { status: 'claimed' }] },
    data: { trialKeySealed: null },
  });
  const purged = await prisma.agentRegistration.deleteMany({ where: { expiresAt: { lte: new Date(now.getTime() - PURGE_AFTER_MS) } } });

  const kept = await prisma.agentRegistration.aggregate({ where: { issuedKeySealed: { not: null } }, _min: { deliveredAt: true, expiresAt: true } });
  const trialKept = await prisma.agentRegistration.aggregate({ where: { trialKeySealed: { not: null } }, _min: { assertionExpiresAt: true } });
  const due = [
    kept._min.deliveredAt && kept._min.deliveredAt.getTime() + REDELIVERY_MS,
    kept._min.expiresAt?.getTime(),
    trialKept._min.assertionExpiresAt?.getTime(),
  ].filter((t): t is number => typeof t === 'number');
  return { erased: issued.count + trial.count, purged: purged.count, nextDueAt: due.length > 0 ? new Date(Math.min(...due)) : null };
}
