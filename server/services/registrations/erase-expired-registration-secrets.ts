// Sealed keys are kept only for their redelivery windows; this erases them when the window
// ends even if the agent never polls again (polls erase lazily too), and deletes
// registrations a week after they ended. Run every minute by the gateway.
import { PURGE_AFTER_MS, REDELIVERY_MS, type RegistrationDeps } from './registration-rules.js';

export async function eraseExpiredRegistrationSecrets(deps: Pick<RegistrationDeps, 'db' | 'now'>): Promise<{ erased: number; purged: number }> {
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
  return { erased: issued.count + trial.count, purged: purged.count };
}
