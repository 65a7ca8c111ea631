// The verification page's side of a claim: the signed-in user enters the 6-digit code, sees
// what they are authorising, then confirms or denies (confirm-claim.ts, deny-claim.ts).
//
// A code only works for a user signed in with the claim's email address. Guessing is bounded:
// - per code: at most MAX_FAILED_GUESSES (5) wrong codes entered by users of the claim's email,
//   then the code is locked and the agent must request a new one; a code is found by a random
//   guess with probability <= 5 / 10^6. An entry by another account is no guess for it (that
//   account could not open it) and costs it nothing;
// - per user and per IP: at most 10 and 30 wrong codes per 10 minutes (guess-throttle.ts).
// Every code that does not open a claim gets the same answer, whatever the reason (mistyped,
// expired, used, locked, or issued for another email), so the page tells nobody whether a
// code is live for someone else. It adds how many wrong entries the user's own pending codes
// have left, which is theirs to know and the same whatever code they typed.
import { addressNetwork } from '../../config/client-address.ts';
import { ServiceError, isServiceError } from '../errors.ts';
import { hashUserCode, userCodeHashesEqual } from './registration-crypto.ts';
import { CODE_TTL_MS, MAX_FAILED_GUESSES, POST_CLAIM_SCOPES, assertEnabled, withStore, type RegistrationDeps } from './registration-rules.ts';
import type { GuessThrottle } from './guess-throttle.ts';

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
  /** What the agent called itself when it registered (`client_name`); null when it gave no name. Its own words. */
  agentName: string | null;
  /** Its User-Agent header then; null without one. */
  userAgent: string | null;
  /** The network it registered from, coarse (/24, /48: server/config/client-address.ts addressNetwork); null when unknown. */
  network: string | null;
  email: string;
  scopes: string[];
  registeredAt: Date;
  codeExpiresAt: Date;
  /** Anonymous registrations that already hold a trial key: the key that will stop working. */
  trialKeyPrefix: string | null;
}

const CODE = /^\d{6}$/;
const OPEN_CODES_READ = 50;

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
  const email = entry.user.email.trim().toLowerCase();
  const { prisma } = deps.db;
  const open = { status: 'pending' as const, expiresAt: { gt: now }, registration: { status: 'pending' as const, expiresAt: { gt: now } } };
  try {
    entry.throttle.take(subjects, now);
  } catch (e) {
    // "Try again in N minutes" would be a false promise when every code of the user is
    // locked: waiting unlocks nothing, only a new code from the agent helps.
    // One small read: a user's open codes are a handful (a new code ends the older ones of its
    // registration); past OPEN_CODES_READ the answer stays the wait.
    if (isServiceError(e) && e.code === 'slow_down') {
      const codes = await withStore('agent_auth_unavailable', () =>
        prisma.claimAttempt.findMany({ where: { email, ...open }, select: { failedGuesses: true }, take: OPEN_CODES_READ }),
      );
      const locked = codes.filter((c) => c.failedGuesses >= MAX_FAILED_GUESSES).length;
      if (locked > 0 && locked === codes.length && codes.length < OPEN_CODES_READ)
        throw new ServiceError('invalid_grant', lockedMessage(email, locked), 'code');
    }
    throw e;
  }
  let wrongCode = false;
  try {
    return await withStore('agent_auth_unavailable', async () => {
      const hash = await hashUserCode(prisma, code);
      const live = { ...open, failedGuesses: { lt: MAX_FAILED_GUESSES } };
      const reserved = await prisma.claimAttempt.updateManyAndReturn({
        where: { email, ...live },
        data: { failedGuesses: { increment: 1 } },
        include: { registration: true },
      });
      // Constant-time comparison against every candidate (no early exit).
      let match: (typeof reserved)[number] | undefined;
      for (const candidate of reserved) if (userCodeHashesEqual(candidate.userCodeHash, hash) && !match) match = candidate;
      if (match) {
        await prisma.claimAttempt.updateMany({ where: { id: { in: reserved.map((c) => c.id) } }, data: { failedGuesses: { decrement: 1 } } });
        return { attempt: { ...match, failedGuesses: match.failedGuesses - 1 }, registration: match.registration };
      }

      wrongCode = true;
      // Nothing left to try: say so when wrong entries locked the user's code (the right code
      // gets this answer too, which is the point: it cannot work any more).
      const locked = reserved.length === 0 ? await prisma.claimAttempt.count({ where: { email, ...open, failedGuesses: { gte: MAX_FAILED_GUESSES } } }) : 0;
      throw new ServiceError('invalid_grant', locked > 0 ? lockedMessage(email, locked) : wrongCodeMessage(email, reserved), 'code');
    });
  } finally {
    // Only wrong codes count against the user and the address (not the right code, nor a
    // store that failed).
    if (!wrongCode) entry.throttle.refund(subjects, now);
  }
}

/** The one answer to a code that opens nothing, whatever the reason. */
export const WRONG_CODE = `That code does not open a claim for your account. Check the digits: a code works only for the email address given to the agent, only once, and for ${CODE_TTL_MS / 60_000} minutes. If it still fails, ask the agent for a new code.`;

/** WRONG_CODE, and what this entry cost the user's own live codes (`charged`, counted after it). */
function wrongCodeMessage(email: string, charged: Array<{ failedGuesses: number }>): string {
  if (charged.length === 0) return WRONG_CODE;
  const left = Math.min(...charged.map((c) => MAX_FAILED_GUESSES - c.failedGuesses));
  const which = charged.length === 1 ? `the code waiting for ${email}` : `one of the codes waiting for ${email}`;
  if (left <= 0) return `${WRONG_CODE} That was the last try: ${which} is now locked. Ask the agent for a new code.`;
  return `${WRONG_CODE} ${left} wrong ${left === 1 ? 'entry' : 'entries'} left before ${which} is locked.`;
}

/** The answer once the user's codes are all locked: no count down, no wait, only the way out. */
function lockedMessage(email: string, locked: number): string {
  const which = locked === 1 ? `The code waiting for ${email} is` : `The codes waiting for ${email} are`;
  return `${which} locked after ${MAX_FAILED_GUESSES} wrong entries, so no code works now, not even the right one. Ask the agent for a new code: it works at once.`;
}

export async function describeClaim(deps: RegistrationDeps, entry: CodeEntry): Promise<ClaimDescription> {
  const { attempt, registration } = await findClaimForUser(deps, entry);
  const trialKey = registration.trialKeyId
    ? await withStore('agent_auth_unavailable', () => deps.db.prisma.apiKey.findUnique({ where: { id: registration.trialKeyId! }, select: { prefix: true } }))
    : null;
  return {
    registrationId: registration.id,
    registrationType: registration.type,
    agentName: registration.clientName,
    userAgent: registration.userAgent,
    network: addressNetwork(registration.clientAddress),
    email: attempt.email ?? entry.user.email,
    scopes: [...POST_CLAIM_SCOPES],
    registeredAt: registration.createdAt,
    codeExpiresAt: attempt.expiresAt,
    trialKeyPrefix: trialKey?.prefix ?? null,
  };
}
