// The verification page's side of a claim: the signed-in user enters the 6-digit code, sees
// what they are authorising, then confirms or denies (confirm-claim.ts, deny-claim.ts).
//
// A code only works for a user signed in with the claim's email address. Guessing is bounded:
// - per code: at most MAX_FAILED_GUESSES (5) wrong codes entered by users of the claim's email
//   (or the right code entered by another account), then the code is locked and the agent
//   must request a new one; a code is found by a random guess with probability <= 5 / 10^6;
// - per user and per IP: at most 10 and 30 wrong codes per 10 minutes (guess-throttle.ts).
import { ServiceError } from '../errors.js';
import { hashUserCode, userCodeHashesEqual } from './registration-crypto.js';
import { MAX_FAILED_GUESSES, POST_CLAIM_SCOPES, assertEnabled, withStore, type RegistrationDeps } from './registration-rules.js';
import type { GuessThrottle } from './guess-throttle.js';

export interface ClaimingUser {
  id: string;
  email: string;
}

export interface CodeEntry {
  code: string;
  user: ClaimingUser;
  ip: string | null;
  throttle: GuessThrottle;
}

export interface ClaimDescription {
  registrationId: string;
  registrationType: 'anonymous' | 'service_auth';
  email: string;
  scopes: string[];
  registeredAt: Date;
  codeExpiresAt: Date;
  /** Anonymous registrations that already hold a trial key: the key that will stop working. */
  trialKeyPrefix: string | null;
}

const CODE = /^\d{6}$/;

/** Digits only: "123 456" and "123-456" are the code 123456. */
export function normalizeUserCode(code: string): string {
  const digits = code.replace(/[\s-]/g, '');
  if (!CODE.test(digits)) throw new ServiceError('invalid_request', 'Enter the 6-digit code the agent showed you.', 'code');
  return digits;
}

/**
 * Finds the pending claim the user's code opens, counting a wrong code against the limits.
 *
 * Every entry first takes one try from each of the email's live codes, in one conditional
 * update (a code at its limit gives none), and only the codes it took a try from are
 * compared. That is what makes MAX_FAILED_GUESSES a hard bound: entries sent at once cannot
 * all read "under the limit" before any of them is counted. A right code gives the tries back.
 */
export async function findClaimForUser(deps: RegistrationDeps, entry: CodeEntry) {
  assertEnabled(deps.settings);
  const now = deps.now();
  const code = normalizeUserCode(entry.code);
  const subjects = { userId: entry.user.id, ip: entry.ip };
  entry.throttle.take(subjects, now);
  let wrongCode = false;
  const wrong = (error: ServiceError) => {
    wrongCode = true;
    return error;
  };
  const email = entry.user.email.trim().toLowerCase();
  const { prisma } = deps.db;
  try {
    return await withStore('agent_auth_unavailable', async () => {
      const hash = await hashUserCode(prisma, code);
      const live = { status: 'pending' as const, expiresAt: { gt: now }, failedGuesses: { lt: MAX_FAILED_GUESSES }, registration: { status: 'pending' as const, expiresAt: { gt: now } } };
      const reserved = await prisma.claimAttempt.updateManyAndReturn({ where: { email, ...live }, data: { failedGuesses: { increment: 1 } }, include: { registration: true } });
      // Constant-time comparison against every candidate (no early exit).
      let match: (typeof reserved)[number] | undefined;
      for (const candidate of reserved) if (userCodeHashesEqual(candidate.userCodeHash, hash) && !match) match = candidate;
      if (match) {
        await prisma.claimAttempt.updateMany({ where: { id: { in: reserved.map((c) => c.id) } }, data: { failedGuesses: { decrement: 1 } } });
        return { attempt: { ...match, failedGuesses: match.failedGuesses - 1 }, registration: match.registration };
      }

      const elsewhere = await prisma.claimAttempt.findFirst({ where: { userCodeHash: hash, email: { not: email }, ...live }, select: { id: true } });
      if (elsewhere) {
        // The right code from the wrong account also uses up one of the code's tries.
        await prisma.claimAttempt.updateMany({ where: { id: elsewhere.id, failedGuesses: { lt: MAX_FAILED_GUESSES } }, data: { failedGuesses: { increment: 1 } } });
        throw wrong(
          new ServiceError('forbidden', `This code was issued for a different email address than ${email}. Sign in with the email address you gave the agent.`, 'code'),
        );
      }
      // The user's own code that no longer works: say why, so they ask the agent for a new one.
      const own = await prisma.claimAttempt.findFirst({ where: { email, userCodeHash: hash }, orderBy: { createdAt: 'desc' } });
      if (own && own.status === 'pending' && own.failedGuesses >= MAX_FAILED_GUESSES) {
        throw wrong(new ServiceError('invalid_grant', 'This code was locked after too many wrong entries. Ask the agent for a new code.', 'code'));
      }
      if (own && own.status !== 'pending') throw wrong(new ServiceError('invalid_grant', 'This code has already been used.', 'code'));
      if (own) throw wrong(new ServiceError('expired_token', 'This code has expired. Ask the agent for a new code.', 'code'));
      throw wrong(new ServiceError('invalid_grant', 'That code is not valid. Check it and try again.', 'code'));
    });
  } finally {
    // Only wrong codes count against the user and the address (not the right code, nor a
    // store that failed).
    if (!wrongCode) entry.throttle.refund(subjects, now);
  }
}

export async function describeClaim(deps: RegistrationDeps, entry: CodeEntry): Promise<ClaimDescription> {
  const { attempt, registration } = await findClaimForUser(deps, entry);
  const trialKey = registration.trialKeyId
    ? await withStore('agent_auth_unavailable', () => deps.db.prisma.apiKey.findUnique({ where: { id: registration.trialKeyId! }, select: { prefix: true } }))
    : null;
  return {
    registrationId: registration.id,
    registrationType: registration.type,
    email: attempt.email ?? entry.user.email,
    scopes: [...POST_CLAIM_SCOPES],
    registeredAt: registration.createdAt,
    codeExpiresAt: attempt.expiresAt,
    trialKeyPrefix: trialKey?.prefix ?? null,
  };
}
