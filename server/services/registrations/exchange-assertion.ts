// POST {auth_url}/oauth2/token with grant_type jwt-bearer: exchanges an anonymous registration's
// identity assertion for an `sk_svc_` trial key on a new trial org with a small budget.
// Idempotent: repeating the exchange while the assertion is valid returns the same key (kept
// sealed until the assertion expires), never a second one, also when two exchanges race.
import { newId, newTimeOrderedId } from '../../db/ids.ts';
import { formatUsd } from '../../money.ts';
import { ServiceError } from '../errors.ts';
import { unsealKey, sealKey, verifyIdentityAssertion } from './registration-crypto.ts';
import { LostIssueRace, insertApiKey, newApiKey } from './registration-keys.ts';
import { PRE_CLAIM_SCOPES, assertEnabled, withStore, type RegistrationDeps } from './registration-rules.ts';

export interface IssuedToken {
  accessToken: string;
  keyId: string;
  scope: string;
}

const HOUR_MS = 3600_000;

export async function exchangeAssertion(deps: RegistrationDeps, input: { assertion: string }): Promise<IssuedToken> {
  const { db, settings } = deps;
  assertEnabled(settings);
  if (!settings.anonymousEnabled) {
    throw new ServiceError('anonymous_not_enabled', 'Anonymous registration is turned off on this server; register with type "service_auth".', 'grant_type');
  }
  const now = deps.now();
  const invalid = (why: string) => new ServiceError('invalid_grant', `${why} Register again.`, 'assertion');
  return withStore('temporarily_unavailable', async () => {
    const registrationId = await verifyIdentityAssertion(db.prisma, input.assertion, settings.authUrl, now);
    if (!registrationId) throw invalid('The assertion is not valid, or it has expired.');
    const registration = await db.prisma.agentRegistration.findUnique({ where: { id: registrationId } });
    if (!registration || registration.type !== 'anonymous') throw invalid('The assertion does not belong to a registration of this server.');
    if (registration.status === 'claimed') {
      throw new ServiceError(
        'invalid_grant',
        'This registration has been claimed: its trial key was replaced by the key delivered to the claim grant.',
        'assertion',
      );
    }
    if (registration.trialKeyId) return redeliver(deps, registration.id, registration.trialKeyId, registration.trialKeySealed);
    // A declined registration has ended: it gets no trial org (one already issued stays).
    if (registration.expiresAt <= now) throw invalid('This registration has ended.');

    // Trials cost the operator real money: at most trialMaxPerHour new trial orgs per rolling
    // hour on the whole instance (checked before the insert: concurrent exchanges may exceed
    // it by how many run at once).
    const recent = await db.prisma.org.count({ where: { isTrial: true, createdAt: { gt: new Date(now.getTime() - HOUR_MS) } } });
    if (recent >= settings.trialMaxPerHour) {
      throw new ServiceError(
        'slow_down',
        'No trial capacity is left on this server for the current hour. Try again later, or register with type "service_auth".',
        null,
        { retryAfterSeconds: 600 },
      );
    }

    const orgId = newId('org');
    const key = newApiKey();
    const trialKeySealed = await sealKey(db.prisma, registration.id, 'trial-key', key.key);
    const issued = await db.prisma
      .$transaction(async (tx) => {
        const credits = settings.trialCreditsMicros;
        await tx.org.create({ data: { id: orgId, name: `Agent trial (${registration.id})`, isTrial: true, balanceMicros: credits, createdAt: now } });
        if (credits > 0n) {
          await tx.ledgerEntry.create({
            data: {
              id: newTimeOrderedId('led'),
              orgId,
              kind: 'grant',
              amountMicros: credits,
              balanceAfterMicros: credits,
              description: `agent trial credit (${formatUsd(credits)} USD)`,
              createdAt: now,
            },
          });
        }
        await insertApiKey(tx, key, { orgId, name: 'agent trial key', isTrial: true, createdAt: now });
        const won = await tx.agentRegistration.updateMany({
          where: { id: registration.id, trialKeyId: null, status: 'pending', expiresAt: { gt: now } },
          data: { trialOrgId: orgId, trialKeyId: key.id, trialKeySealed },
        });
        if (won.count !== 1) throw new LostIssueRace();
        return key;
      })
      .catch((e: unknown) => {
        if (e instanceof LostIssueRace) return null;
        throw e;
      });
    if (issued) return { accessToken: issued.key, keyId: issued.id, scope: PRE_CLAIM_SCOPES.join(' ') };
    // Another exchange of the same assertion issued the key first: answer with that one.
    const winner = await db.prisma.agentRegistration.findUniqueOrThrow({ where: { id: registration.id } });
    if (!winner.trialKeyId) throw invalid('This registration has been claimed or has ended.');
    return redeliver(deps, winner.id, winner.trialKeyId, winner.trialKeySealed);
  });
}

async function redeliver(deps: RegistrationDeps, registrationId: string, keyId: string, sealed: string | null): Promise<IssuedToken> {
  // The sealed copy lives exactly as long as the assertion (erased afterwards), and an
  // expired assertion was refused above; a missing copy is therefore an erased one.
  if (!sealed) throw new ServiceError('invalid_grant', 'The trial key was already delivered and can no longer be fetched. Register again.', 'assertion');
  return { accessToken: await unsealKey(deps.db.prisma, registrationId, 'trial-key', sealed), keyId, scope: PRE_CLAIM_SCOPES.join(' ') };
}
