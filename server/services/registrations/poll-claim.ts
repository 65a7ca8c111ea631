// POST {auth_url}/oauth2/token with the claim grant: walks the spec's "Registration claim"
// state table. The key is created on the first poll after the user confirmed (so a claim
// the agent never collects leaves no key behind), sealed for the 10-minute redelivery
// window, and then erased; a conditional update makes sure that racing polls issue one key.
import { ServiceError } from '../errors.ts';
import { hashClaimToken, sealKey, unsealKey } from './registration-crypto.ts';
import { LostIssueRace, insertApiKey, newApiKey } from './registration-keys.ts';
import {
  MAX_FAILED_GUESSES,
  MIN_POLL_GAP_MS,
  POLL_INTERVAL_S,
  POST_CLAIM_SCOPES,
  REDELIVERY_MS,
  assertEnabled,
  withStore,
  type RegistrationDeps,
} from './registration-rules.ts';
import type { IssuedToken } from './exchange-assertion.ts';

type Registration = NonNullable<Awaited<ReturnType<RegistrationDeps['db']['prisma']['agentRegistration']['findUnique']>>>;

const SCOPE = POST_CLAIM_SCOPES.join(' ');
const SLOW_DOWN_WAIT_S = 60;

export async function pollClaim(deps: RegistrationDeps, input: { claimToken: string }): Promise<IssuedToken> {
  assertEnabled(deps.settings);
  const now = deps.now();
  const { prisma } = deps.db;
  return withStore('temporarily_unavailable', async () => {
    const registration = await prisma.agentRegistration.findUnique({ where: { claimTokenHash: hashClaimToken(input.claimToken) } });
    // The spec's claim table: a poll for a registration that is gone (older than 24 h, deleted
    // a week later, or never there) is invalid_grant; 410 claim_expired is the claim endpoint's.
    if (!registration) throw new ServiceError('invalid_grant', 'This registration is gone (or the claim_token is wrong). Register again.', 'claim_token');
    if (registration.expiresAt <= now) {
      await eraseIssuedKey(deps, registration);
      const declined = await prisma.claimAttempt.count({ where: { registrationId: registration.id, status: 'denied' } });
      throw new ServiceError(
        'invalid_grant',
        declined ? 'The user declined this claim. Register again.' : 'This registration is older than 24 hours. Register again.',
        'claim_token',
      );
    }
    if (registration.status === 'claimed') return deliver(deps, registration);

    // Atomic "at most one poll per interval": only a poll far enough from the last one moves
    // lastPollAt forward; a too-fast poll also moves it, so a client must actually slow down.
    const paced = await prisma.agentRegistration.updateMany({
      where: { id: registration.id, status: 'pending', OR: [{ lastPollAt: null }, { lastPollAt: { lte: new Date(now.getTime() - MIN_POLL_GAP_MS) } }] },
      data: { lastPollAt: now },
    });
    if (paced.count === 0) {
      const current = await prisma.agentRegistration.findUniqueOrThrow({ where: { id: registration.id } });
      if (current.status === 'claimed') return deliver(deps, current);
      await prisma.agentRegistration.updateMany({ where: { id: registration.id, status: 'pending' }, data: { lastPollAt: now } });
      // The spec's table: slow_down means "wait a minute" (then back to every `interval` seconds).
      throw new ServiceError('slow_down', `Polling too fast: wait a minute, then poll at most every ${POLL_INTERVAL_S} seconds.`, null, {
        retryAfterSeconds: SLOW_DOWN_WAIT_S,
      });
    }

    const attempt = await prisma.claimAttempt.findFirst({ where: { registrationId: registration.id }, orderBy: { createdAt: 'desc' } });
    if (!attempt) {
      throw new ServiceError(
        'authorization_pending',
        `No claim has been started: POST ${deps.settings.authUrl}/agent/identity/claim with the claim_token and the user's email.`,
        null,
      );
    }
    if (attempt.expiresAt <= now || attempt.failedGuesses >= MAX_FAILED_GUESSES) {
      const why = attempt.expiresAt <= now ? 'The code has expired.' : 'The code was locked after too many wrong entries.';
      throw new ServiceError('expired_token', `${why} Request a new one: POST ${deps.settings.authUrl}/agent/identity/claim with {claim_token}.`, null);
    }
    throw new ServiceError('authorization_pending', `The user has not entered the code yet. Keep polling every ${POLL_INTERVAL_S} seconds.`, null);
  });
}

async function deliver(deps: RegistrationDeps, registration: Registration): Promise<IssuedToken> {
  const now = deps.now();
  const { prisma } = deps.db;
  if (registration.issuedKeyId) {
    if (registration.deliveredAt && now.getTime() < registration.deliveredAt.getTime() + REDELIVERY_MS && registration.issuedKeySealed) {
      return {
        accessToken: await unsealKey(prisma, registration.id, 'issued-key', registration.issuedKeySealed),
        keyId: registration.issuedKeyId,
        scope: SCOPE,
      };
    }
    await eraseIssuedKey(deps, registration);
    throw new ServiceError(
      'invalid_grant',
      'The key was delivered more than 10 minutes ago and cannot be fetched again. Find it where you stored it, or register again.',
      'claim_token',
    );
  }
  if (!registration.claimedOrgId) throw new Error(`claimed registration ${registration.id} has no org`);

  const key = newApiKey();
  const sealed = await sealKey(prisma, registration.id, 'issued-key', key.key);
  const orgId = registration.claimedOrgId;
  const won = await prisma
    .$transaction(async (tx) => {
      await insertApiKey(tx, key, { orgId, name: `agent (${registration.id})`, isTrial: false, createdAt: now });
      const { count } = await tx.agentRegistration.updateMany({
        where: { id: registration.id, status: 'claimed', issuedKeyId: null },
        data: { issuedKeyId: key.id, issuedKeySealed: sealed, deliveredAt: now },
      });
      if (count !== 1) throw new LostIssueRace();
      return true;
    })
    .catch((e: unknown) => {
      if (e instanceof LostIssueRace) return false;
      throw e;
    });
  if (won) return { accessToken: key.key, keyId: key.id, scope: SCOPE };
  // A concurrent poll issued the key first (its transaction committed; ours rolled back): the same key.
  return deliver(deps, await prisma.agentRegistration.findUniqueOrThrow({ where: { id: registration.id } }));
}

async function eraseIssuedKey(deps: RegistrationDeps, registration: Registration): Promise<void> {
  if (registration.issuedKeySealed) {
    await deps.db.prisma.agentRegistration.updateMany({ where: { id: registration.id }, data: { issuedKeySealed: null } });
  }
}
