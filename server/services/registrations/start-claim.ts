// POST {auth_url}/agent/identity/claim: starts (or restarts) a claim attempt, i.e. a fresh
// 6-digit code the user enters on the dashboard's verification page. Only the newest code of
// a registration works: starting a new attempt ends the earlier ones.
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { generateUserCode, hashClaimToken, hashUserCode } from './registration-crypto.ts';
import {
  CODE_TTL_MS,
  POLL_INTERVAL_S,
  addMs,
  assertEnabled,
  claimEmail,
  tokenUrl,
  verificationUri,
  withStore,
  type RegistrationDeps,
  type Tx,
} from './registration-rules.ts';

export interface ClaimAttemptGrant {
  attemptId: string;
  /** Shown to the agent, which shows it to its user; stored only as an HMAC. */
  userCode: string;
  expiresIn: number;
  expiresAt: Date;
  verificationUri: string;
  interval: number;
  email: string;
}

export interface StartedClaim {
  registrationId: string;
  registrationType: 'anonymous' | 'service_auth';
  claimTokenExpiresAt: Date;
  claim: ClaimAttemptGrant;
}

export async function startClaim(deps: RegistrationDeps, input: { claimToken: string; email?: string | null }): Promise<StartedClaim> {
  assertEnabled(deps.settings);
  let email = input.email == null ? null : claimEmail(input.email, 'email');
  const now = deps.now();
  const { prisma } = deps.db;
  return withStore('agent_auth_unavailable', async () => {
    const registration = await prisma.agentRegistration.findUnique({ where: { claimTokenHash: hashClaimToken(input.claimToken) } });
    assertOpenForClaims(deps, registration, now);
    if (registration.type === 'service_auth') {
      // The claim is for the login_hint given at registration; another address is a mistake.
      if (email && email !== registration.loginHint) {
        throw new ServiceError(
          'invalid_login_hint',
          'email differs from the login_hint of this registration; omit it, or register again with the right login_hint.',
          'email',
        );
      }
      email = registration.loginHint;
    } else if (!email) {
      // Restart with {claim_token} alone: the address of the previous attempt.
      const previous = await prisma.claimAttempt.findFirst({
        where: { registrationId: registration.id },
        orderBy: { createdAt: 'desc' },
        select: { email: true },
      });
      email = previous?.email ?? null;
      if (!email) throw new ServiceError('invalid_login_hint', 'email is required to start the first claim of an anonymous registration.', 'email');
    }
    const address = email!;
    const code = await prepareUserCode(deps);
    const claim = await prisma.$transaction((tx) => createClaimAttempt(deps, tx, { registrationId: registration.id, email: address, code }));
    return { registrationId: registration.id, registrationType: registration.type, claimTokenExpiresAt: registration.expiresAt, claim };
  });
}

export interface PreparedUserCode {
  code: string;
  hash: string;
}

/** Computed before a transaction opens: reading the server secret inside one would wait on it. */
export async function prepareUserCode(deps: RegistrationDeps): Promise<PreparedUserCode> {
  const code = generateUserCode();
  return { code, hash: await hashUserCode(deps.db.prisma, code) };
}

type RegistrationRow = Awaited<ReturnType<Tx['agentRegistration']['findUnique']>>;

/** 410 claim_expired for a registration that is gone (unknown, over 24 h, declined); already_claimed once claimed. */
function assertOpenForClaims(deps: RegistrationDeps, registration: RegistrationRow, now: Date): asserts registration is NonNullable<RegistrationRow> {
  if (!registration || registration.expiresAt <= now) {
    throw new ServiceError('claim_expired', 'This registration is gone (unknown, expired after 24 hours, or declined). Register again.', 'claim_token');
  }
  if (registration.status === 'claimed') {
    throw new ServiceError(
      'already_claimed',
      `This registration has been claimed. Poll ${tokenUrl(deps.settings)} with the claim grant to receive the key.`,
      'claim_token',
    );
  }
}

/** Ends the registration's earlier pending attempts and creates a new one, inside `tx`. */
export async function createClaimAttempt(
  deps: RegistrationDeps,
  tx: Tx,
  input: { registrationId: string; email: string; code: PreparedUserCode },
): Promise<ClaimAttemptGrant> {
  const now = deps.now();
  await tx.claimAttempt.updateMany({ where: { registrationId: input.registrationId, status: 'pending', expiresAt: { gt: now } }, data: { expiresAt: now } });
  // Checked again inside the transaction, after the update above: a confirm or deny that
  // holds the earlier attempt makes that update wait (PostgreSQL row lock; SQLite runs one
  // writer at a time), so this read sees its outcome and a claimed or declined registration
  // never gets a fresh code.
  assertOpenForClaims(deps, await tx.agentRegistration.findUnique({ where: { id: input.registrationId } }), now);
  // Codes are looked up per email on the page; two live codes of one email must differ.
  let code = input.code;
  while (await tx.claimAttempt.count({ where: { email: input.email, userCodeHash: code.hash, status: 'pending', expiresAt: { gt: now } } })) {
    code = await prepareUserCode(deps);
  }
  const expiresAt = addMs(now, CODE_TTL_MS);
  const attempt = await tx.claimAttempt.create({
    data: { id: newId('cla'), registrationId: input.registrationId, email: input.email, userCodeHash: code.hash, createdAt: now, expiresAt },
  });
  return {
    attemptId: attempt.id,
    userCode: code.code,
    expiresIn: CODE_TTL_MS / 1000,
    expiresAt,
    verificationUri: verificationUri(deps.settings),
    interval: POLL_INTERVAL_S,
    email: input.email,
  };
}
