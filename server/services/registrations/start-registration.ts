// POST {auth_url}/agent/identity: starts an anonymous or a service_auth registration.
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { generateClaimToken, hashClaimToken, signIdentityAssertion } from './registration-crypto.ts';
import { ASSERTION_TTL_MS, REGISTRATION_TTL_MS, addMs, assertEnabled, claimEmail, withStore, type RegistrationDeps } from './registration-rules.ts';
import { createClaimAttempt, prepareUserCode, type ClaimAttemptGrant } from './start-claim.ts';

const HOUR_MS = 3600_000;

export type StartRegistrationInput = ({ type: 'anonymous' } | { type: 'service_auth'; loginHint: string } | { type: 'identity_assertion' }) & AgentFacts;

/** What is known of who registers, kept for the claim page. */
export interface AgentFacts {
  /** Who registers (server/config/client-address.ts); null when unknown: no per-address cap. */
  clientAddress?: string | null;
  /** The name the agent gave itself (`client_name`), checked by the route. */
  clientName?: string | null;
  /** Its User-Agent header, printable and cut short by the route. */
  userAgent?: string | null;
}

interface Started {
  registrationId: string;
  /** Returned once: only its SHA-256 is stored. */
  claimToken: string;
  claimTokenExpiresAt: Date;
}

export interface StartedAnonymousRegistration extends Started {
  registrationType: 'anonymous';
  identityAssertion: string;
  assertionExpiresAt: Date;
}

export interface StartedServiceAuthRegistration extends Started {
  registrationType: 'service_auth';
  claim: ClaimAttemptGrant;
}

export async function startRegistration(deps: RegistrationDeps, input: { type: 'anonymous' } & AgentFacts): Promise<StartedAnonymousRegistration>;
export async function startRegistration(
  deps: RegistrationDeps,
  input: { type: 'service_auth'; loginHint: string } & AgentFacts,
): Promise<StartedServiceAuthRegistration>;
export async function startRegistration(
  deps: RegistrationDeps,
  input: StartRegistrationInput,
): Promise<StartedAnonymousRegistration | StartedServiceAuthRegistration>;
export async function startRegistration(
  deps: RegistrationDeps,
  input: StartRegistrationInput,
): Promise<StartedAnonymousRegistration | StartedServiceAuthRegistration> {
  const { db, settings } = deps;
  assertEnabled(settings);
  if (input.type === 'identity_assertion') {
    throw new ServiceError(
      'identity_assertion_not_enabled',
      'Identity assertions (ID-JAG) are not accepted yet; register with type "service_auth" and a login_hint.',
      'type',
    );
  }
  if (input.type === 'anonymous' && !settings.anonymousEnabled) {
    throw new ServiceError(
      'anonymous_not_enabled',
      'Anonymous registration is turned off on this server; register with type "service_auth" and a login_hint.',
      'type',
    );
  }
  const loginHint = input.type === 'service_auth' ? claimEmail(input.loginHint, 'login_hint') : null;

  const now = deps.now();
  const id = newId('reg');
  const claimToken = generateClaimToken();
  const expiresAt = addMs(now, REGISTRATION_TTL_MS);
  const clientAddress = input.clientAddress ?? null;
  const facts = { clientAddress, clientName: input.clientName ?? null, userAgent: input.userAgent ?? null };
  return withStore('agent_auth_unavailable', async () => {
    if (input.type === 'anonymous') {
      const assertionExpiresAt = addMs(now, ASSERTION_TTL_MS);
      const identityAssertion = await signIdentityAssertion(db.prisma, {
        registrationId: id,
        issuer: settings.authUrl,
        issuedAt: now,
        expiresAt: assertionExpiresAt,
      });
      await db.prisma.agentRegistration.create({
        data: { id, type: 'anonymous', claimTokenHash: hashClaimToken(claimToken), ...facts, createdAt: now, expiresAt, assertionExpiresAt },
      });
      if (clientAddress) await withinAddressCap(deps, id, clientAddress, now);
      return { registrationId: id, registrationType: 'anonymous', claimToken, claimTokenExpiresAt: expiresAt, identityAssertion, assertionExpiresAt };
    }
    const code = await prepareUserCode(deps);
    const claim = await db.prisma.$transaction(async (tx) => {
      await tx.agentRegistration.create({
        data: { id, type: 'service_auth', loginHint, claimTokenHash: hashClaimToken(claimToken), ...facts, createdAt: now, expiresAt },
      });
      return createClaimAttempt(deps, tx, { registrationId: id, email: loginHint!, code });
    });
    return { registrationId: id, registrationType: 'service_auth', claimToken, claimTokenExpiresAt: expiresAt, claim };
  });
}

/**
 * Each anonymous registration can become a trial org with real credit, so one address may
 * start at most trialMaxPerAddressPerHour of them per rolling hour (all replicas: counted in
 * the database). The row is written first and counted after, so registrations racing from
 * one address never pass the cap together: the last of them to count sees every one admitted
 * before it (a burst may get fewer than the cap, never more). A refused registration is
 * deleted; retryAfterSeconds says when enough of those counted have left the hour.
 */
async function withinAddressCap(deps: RegistrationDeps, id: string, clientAddress: string, now: Date): Promise<void> {
  const { prisma } = deps.db;
  const cap = deps.settings.trialMaxPerAddressPerHour;
  const recent = await prisma.agentRegistration.findMany({
    where: { clientAddress, type: 'anonymous', createdAt: { gt: new Date(now.getTime() - HOUR_MS) } },
    orderBy: { createdAt: 'desc' },
    select: { id: true, createdAt: true },
    take: cap + 1,
  });
  if (recent.length <= cap) return;
  await prisma.agentRegistration.deleteMany({ where: { id } });
  // A new registration fits once fewer than `cap` others are left in the hour (there are at
  // least `cap` others: `recent` holds cap + 1 rows).
  const others = recent.filter((r) => r.id !== id);
  const wait = Math.max(1, Math.ceil((others[cap - 1]!.createdAt.getTime() + HOUR_MS - now.getTime()) / 1000));
  throw new ServiceError(
    'slow_down',
    `Too many anonymous registrations from this address (${cap} per hour). Try again in ${wait}s, or register with type "service_auth".`,
    null,
    { retryAfterSeconds: wait },
  );
}
