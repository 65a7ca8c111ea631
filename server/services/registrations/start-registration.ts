// POST {auth_url}/agent/identity: starts an anonymous or a service_auth registration.
import { newId } from '../../db/ids.js';
import { ServiceError } from '../errors.js';
import { generateClaimToken, hashClaimToken, signIdentityAssertion } from './registration-crypto.js';
import { ASSERTION_TTL_MS, REGISTRATION_TTL_MS, addMs, assertEnabled, claimEmail, withStore, type RegistrationDeps } from './registration-rules.js';
import { createClaimAttempt, prepareUserCode, type ClaimAttemptGrant } from './start-claim.js';

export type StartRegistrationInput =
  | { type: 'anonymous' }
  | { type: 'service_auth'; loginHint: string }
  | { type: 'identity_assertion' };

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

export async function startRegistration(deps: RegistrationDeps, input: { type: 'anonymous' }): Promise<StartedAnonymousRegistration>;
export async function startRegistration(deps: RegistrationDeps, input: { type: 'service_auth'; loginHint: string }): Promise<StartedServiceAuthRegistration>;
export async function startRegistration(deps: RegistrationDeps, input: StartRegistrationInput): Promise<StartedAnonymousRegistration | StartedServiceAuthRegistration>;
export async function startRegistration(deps: RegistrationDeps, input: StartRegistrationInput): Promise<StartedAnonymousRegistration | StartedServiceAuthRegistration> {
  const { db, settings } = deps;
  assertEnabled(settings);
  if (input.type === 'identity_assertion') {
    throw new ServiceError('identity_assertion_not_enabled', 'Identity assertions (ID-JAG) are not accepted yet; register with type "service_auth" and a login_hint.', 'type');
  }
  if (input.type === 'anonymous' && !settings.anonymousEnabled) {
    throw new ServiceError('anonymous_not_enabled', 'Anonymous registration is turned off on this server; register with type "service_auth" and a login_hint.', 'type');
  }
  const loginHint = input.type === 'service_auth' ? claimEmail(input.loginHint, 'login_hint') : null;

  const now = deps.now();
  const id = newId('reg');
  const claimToken = generateClaimToken();
  const expiresAt = addMs(now, REGISTRATION_TTL_MS);
  return withStore('agent_auth_unavailable', async () => {
    if (input.type === 'anonymous') {
      const assertionExpiresAt = addMs(now, ASSERTION_TTL_MS);
      const identityAssertion = await signIdentityAssertion(db.prisma, { registrationId: id, issuer: settings.authUrl, issuedAt: now, expiresAt: assertionExpiresAt });
      await db.prisma.agentRegistration.create({
        data: { id, type: 'anonymous', claimTokenHash: hashClaimToken(claimToken), createdAt: now, expiresAt, assertionExpiresAt },
      });
      return { registrationId: id, registrationType: 'anonymous', claimToken, claimTokenExpiresAt: expiresAt, identityAssertion, assertionExpiresAt };
    }
    const code = await prepareUserCode(deps);
    const claim = await db.prisma.$transaction(async (tx) => {
      await tx.agentRegistration.create({ data: { id, type: 'service_auth', loginHint, claimTokenHash: hashClaimToken(claimToken), createdAt: now, expiresAt } });
      return createClaimAttempt(deps, tx, { registrationId: id, email: loginHint!, code });
    });
    return { registrationId: id, registrationType: 'service_auth', claimToken, claimTokenExpiresAt: expiresAt, claim };
  });
}
