// Throttling of what costs a bcrypt hash or sends mail: password sign-in, sign-up and the
// verification mail, per client address and per email, in the gateway's fixed one-minute
// windows (server/rate-limit/rate-limiter.ts: in memory, or shared through Redis when REDIS_URL is
// set, so dashboard replicas count together). Every attempt counts, before any hashing, so a
// flood costs the server a counter, not a bcrypt round.
//
// The address comes from server/config/client-address.ts. The dashboard cannot see the TCP
// peer (Next does not expose it), so without SVC_TRUSTED_PROXIES the address is unknown and
// all such clients share one bucket, larger than one address's: it bounds the CPU a flood
// can take, at the price that a flood also slows honest sign-ins until the minute turns.
import { Redis } from 'ioredis';
import { createMemoryRateLimiter, createRedisRateLimiter, type RateLimiter } from '../rate-limit/rate-limiter.ts';
import { systemClock, type Clock } from '../clock.ts';
import { loadConfig } from '../config/env.ts';
import { ServiceError } from '../services/errors.ts';

export type CredentialAction = 'sign_in' | 'sign_up' | 'verification_mail';

export interface ActionLimits {
  perEmail: number;
  perAddress: number;
  /** All clients whose address is unknown, together. */
  unknownAddresses: number;
}

// Per minute. Sign-in: enough for typos and a password manager's retries; per email it slows
// guessing one account's password to 7,200 tries a day at most.
export const CREDENTIAL_LIMITS: Record<CredentialAction, ActionLimits> = {
  sign_in: { perEmail: 5, perAddress: 20, unknownAddresses: 60 },
  sign_up: { perEmail: 3, perAddress: 5, unknownAddresses: 20 },
  verification_mail: { perEmail: 2, perAddress: 5, unknownAddresses: 20 },
};

const MESSAGES: Record<CredentialAction, string> = {
  sign_in: 'Too many sign-in attempts.',
  sign_up: 'Too many sign-ups.',
  verification_mail: 'Too many verification emails requested.',
};

export interface CredentialSubjects {
  /** The client address (a limiter key from client-address.ts), or null when unknown. */
  address: string | null;
  /** As typed: it is trimmed and lower-cased here, so case does not make a new bucket. */
  email: string;
}

export interface CredentialThrottle {
  /** Counts one attempt; throws rate_limit_exceeded (with the seconds to wait) when any subject is over its limit. */
  take(action: CredentialAction, subjects: CredentialSubjects): Promise<void>;
}

export function createCredentialThrottle(limiter: RateLimiter, options: { limits?: Record<CredentialAction, ActionLimits> } = {}): CredentialThrottle {
  const limits = options.limits ?? CREDENTIAL_LIMITS;
  return {
    async take(action, subjects) {
      const l = limits[action];
      const email = subjects.email.trim().toLowerCase().slice(0, 254);
      const checks: Array<[string, number]> = [
        [`${action}:email:${email}`, l.perEmail],
        subjects.address ? [`${action}:address:${subjects.address}`, l.perAddress] : [`${action}:address:unknown`, l.unknownAddresses],
      ];
      const decisions = await Promise.all(checks.map(([key, limit]) => limiter.consume(key, limit)));
      const refused = decisions.filter((d) => !d.allowed);
      if (refused.length === 0) return;
      const wait = Math.max(...refused.map((d) => d.retryAfterSeconds));
      throw new ServiceError('rate_limit_exceeded', `${MESSAGES[action]} Try again in ${wait} second${wait === 1 ? '' : 's'}.`, 'email', {
        retryAfterSeconds: wait,
      });
    },
  };
}

/** Redis when it answers; this process's memory when it does not (a limit that holds per process beats none). */
export function redisWithFallback(redis: Redis, clock: Clock = systemClock): RateLimiter {
  const shared = createRedisRateLimiter(redis, { prefix: 'svc:auth:', clock });
  const local = createMemoryRateLimiter(clock);
  return {
    consume: (key, limit) => shared.consume(key, limit).catch(() => local.consume(key, limit)),
    close: async () => {
      await local.close();
      redis.disconnect();
    },
  };
}

// One per process, on globalThis: Next may load this module once per route bundle.
const holder = globalThis as typeof globalThis & { __svcCredentialThrottle?: CredentialThrottle };

export function sharedCredentialThrottle(): CredentialThrottle {
  if (holder.__svcCredentialThrottle) return holder.__svcCredentialThrottle;
  const { redisUrl } = loadConfig();
  const limiter = redisUrl
    ? redisWithFallback(new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false }).on('error', () => {}))
    : createMemoryRateLimiter();
  return (holder.__svcCredentialThrottle = createCredentialThrottle(limiter));
}
