// The gateway core that every keyed route goes through: key verification, the per-key rate
// limit, the credit check before a metered request and the debit after it. Routes receive
// it through the context; the benchmark swaps in `createPassThroughCore` to measure it.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { HotStore, UsageRecord } from '../../server/db/hot-store.js';
import { chargeUsage } from '../../server/services/credits/charge-usage.js';
import { formatUsd } from '../../server/services/credits/money.js';
import { ServiceError } from '../../server/services/errors.js';
import { verifyApiKey } from '../../server/services/keys/verify-api-key.js';
import type { RateLimiter } from './rate-limiter.js';

export interface RequestAuth {
  keyId: string;
  orgId: string;
  /** The org's balance when the request was admitted. */
  balanceMicros: bigint;
}

export interface GatewayCore {
  /** Verifies the key, applies the rate limit and, for metered routes, the credit check. */
  admit(presentedKey: string | undefined, metered: boolean): Promise<RequestAuth>;
  /** Debits a finished request; returns the balance after the debit. */
  charge(auth: RequestAuth, requestId: string, costMicros: bigint, usage: UsageRecord): Promise<bigint>;
}

export const COST_HEADER = 'x-svc-request-cost-usd';
export const REMAINING_HEADER = 'x-svc-credits-remaining-usd';

export function createGatewayCore(deps: {
  store: HotStore;
  limiter: RateLimiter;
  defaultRpm: number;
  onKeyUsed: (keyId: string) => void;
}): GatewayCore {
  return {
    async admit(presentedKey, metered) {
      const key = await verifyApiKey(deps.store, presentedKey);
      const limit = key.rateLimitRpm ?? deps.defaultRpm;
      let decision;
      try {
        decision = await deps.limiter.consume(key.keyId, limit);
      } catch {
        // A shared limiter that is down must not take the API down with it: admit and let
        // the next request try again (README, "Rate limits").
        decision = { allowed: true, retryAfterSeconds: 0, remaining: limit };
      }
      if (!decision.allowed) {
        const wait = decision.retryAfterSeconds;
        throw new ServiceError(
          'rate_limit_exceeded',
          `Rate limit reached: ${limit} requests per minute for this key. Please try again in ${wait}s`,
          null,
          { 'retry-after': String(wait) },
        );
      }
      if (metered && deps.store.debitsFailing()) {
        // Answered requests whose debits the database has not taken yet: serve no more
        // metered work until they are written (this bounds what a write failure leaves unbilled).
        throw new ServiceError('temporarily_unavailable', 'Usage cannot be recorded right now (the database refuses writes), so metered requests are paused; retry within a few seconds.');
      }
      if (metered && key.balanceMicros <= 0n) {
        throw new ServiceError(
          'insufficient_quota',
          `You exceeded your current quota: the organization's credit balance is ${formatUsd(key.balanceMicros)} USD. Add credits in the dashboard.`,
        );
      }
      deps.onKeyUsed(key.keyId);
      return key; // a record of its own for each lookup, with the key and org ids and the balance
    },
    charge(auth, requestId, costMicros, usage) {
      return chargeUsage(deps.store, { orgId: auth.orgId, apiKeyId: auth.keyId, requestId, costMicros, usage });
    },
  };
}

/** No auth, no limit, no debit: only for measuring the core against its absence (bench/). */
export function createPassThroughCore(): GatewayCore {
  const auth: RequestAuth = { keyId: 'bench', orgId: 'bench', balanceMicros: 1_000_000_000n };
  return {
    async admit() {
      return auth;
    },
    async charge() {
      return auth.balanceMicros;
    },
  };
}

/** Reads the key from `Authorization: Bearer`, or from `api_key` where a route allows it (WebSocket upgrades). */
export function presentedKey(request: FastifyRequest, allowQuery = false): string | undefined {
  const header = request.headers.authorization;
  if (header) {
    // The usual form, without a regular expression's match array.
    if (header.startsWith('Bearer ') && header.charCodeAt(7) > 32 && header.charCodeAt(header.length - 1) > 32) return header.slice(7);
    const value = header.trim();
    // "Bearer" alone is no key at all; a bare key without the scheme is accepted.
    if (/^Bearer$/i.test(value)) return undefined;
    const m = /^Bearer\s+(.+)$/i.exec(value);
    return m ? m[1]!.trim() : value;
  }
  if (allowQuery) {
    const q = (request.query as Record<string, unknown> | undefined)?.api_key;
    if (typeof q === 'string' && q) return q;
  }
  return undefined;
}

export function setSpendHeaders(reply: FastifyReply, costMicros: bigint | null, remainingMicros: bigint): void {
  if (costMicros !== null) reply.header(COST_HEADER, formatUsd(costMicros));
  reply.header(REMAINING_HEADER, formatUsd(remainingMicros));
}
