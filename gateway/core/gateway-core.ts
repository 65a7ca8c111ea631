// The gateway core that every keyed route goes through: key verification, the per-key rate
// limit, the credit check before a metered request, the reservation of its cost once the
// route knows it, and the debit that settles it. Routes receive it through the context; the
// benchmark swaps in `createPassThroughCore` to measure it.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { systemClock, type Clock } from '../../server/clock.ts';
import type { BudgetedKey, HotStore, UsageRecord } from '../../server/db/hot-store.ts';
import { chargeUsage } from '../../server/services/credits/charge-usage.ts';
import { formatUsd } from '../../server/money.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { budgetLeft, keyBudgetExceeded, windowStartOf, type KeyBudget } from '../../server/services/keys/key-budget.ts';
import { verifyApiKey, verifyKeyHash } from '../../server/services/keys/verify-api-key.ts';
import type { RateLimiter } from '../../server/rate-limit/rate-limiter.ts';

export interface RequestAuth {
  keyId: string;
  orgId: string;
  /** An anonymous agent's trial key (tighter admission caps). */
  isTrial: boolean;
  /** The org's balance when the request was admitted. */
  balanceMicros: bigint;
  /** Credit the org's running requests had reserved then. */
  heldMicros: bigint;
  /** When the key stops working (ms since the epoch); null: never. Running work is ended then (admission.ts). */
  expiresAt: number | null;
  /** The models the key may use; null: every model (ModelRegistry.resolve checks). */
  allowedModels: ReadonlySet<string> | null;
  /** The key's spend limit and where it stood at admission; null: none. */
  budget: KeyBudget | null;
}

/** The key's part in a reservation, a release or a debit when it has a spend limit (at the time `nowMs`). */
export function budgetedKeyOf(auth: RequestAuth, nowMs: number): BudgetedKey | undefined {
  const b = auth.budget;
  return b ? { keyId: auth.keyId, limitMicros: b.limitMicros, windowStart: windowStartOf(b.window, nowMs) } : undefined;
}

/**
 * Credit reserved for one request (or one streaming session) until it is settled: a debit
 * takes its cost out of the hold, and `release` gives back what is left. Every route releases
 * its hold when its response or socket closes, whatever happened, so a reservation never
 * outlives its request (and a crashed process's reservations expire: HotStore.maintainHolds).
 */
export class CreditHold {
  private released = false;
  /** Why the last extension was refused: the org's balance, or the key's spend limit. */
  private refusedBy: 'org' | 'key' | null = null;

  constructor(
    private readonly store: Pick<HotStore, 'reserve' | 'release'>,
    readonly orgId: string,
    /** Still reserved. */
    public amountMicros: bigint,
    /** The request's key when it has a spend limit: reserved and released with the org (undefined: none). */
    private readonly key?: { auth: RequestAuth; clock: Clock },
  ) {}

  /** Reserves `amountMicros` more (a streaming session's next interval); false when the balance (or the key's spend limit) cannot cover it. */
  async extend(amountMicros: bigint): Promise<boolean> {
    if (this.released) return false;
    if (amountMicros <= 0n) return true;
    let outcome;
    try {
      outcome = await this.store.reserve(this.orgId, amountMicros, this.key && budgetedKeyOf(this.key.auth, this.key.clock.now()));
    } catch {
      throw reserveUnavailable();
    }
    if (outcome !== 'reserved') {
      this.refusedBy = outcome === 'key_short' ? 'key' : 'org';
      return false;
    }
    if (this.released) {
      // Released while the reservation was on its way: give it straight back.
      this.store.release(this.orgId, amountMicros, this.key?.auth.keyId);
      return false;
    }
    this.amountMicros += amountMicros;
    return true;
  }

  /**
   * The error for a session whose next reservation was refused: key_budget_exceeded when the
   * key's spend limit refused it, else insufficient_quota with `orgMessage`.
   */
  refusal(orgMessage: string): ServiceError {
    if (this.refusedBy === 'key' && this.key?.auth.budget) return keyBudgetExceeded(this.key.auth.budget, this.key.clock.now());
    return new ServiceError('insufficient_quota', orgMessage);
  }

  /** Takes up to `amountMicros` out of the hold for a debit that settles it; returns what was taken. */
  take(amountMicros: bigint): bigint {
    const taken = amountMicros < this.amountMicros ? amountMicros : this.amountMicros;
    this.amountMicros -= taken;
    return taken;
  }

  /** Gives back whatever is still reserved; idempotent (a property, to be handed to a 'close' event as it is). */
  readonly release = (): void => {
    if (this.released) return;
    this.released = true;
    const left = this.amountMicros;
    this.amountMicros = 0n;
    this.store.release(this.orgId, left, this.key?.auth.keyId);
  };
}

/** A key as presented (undefined: none was), or the hash of the key a route's credential stands for. */
export type PresentedKey = string | undefined | { keyHash: string };

export interface GatewayCore {
  /**
   * Verifies the key, applies the rate limit and, for metered routes, the credit check. The key
   * is the one presented, or `{ keyHash }`: the key a route's own credential stands for
   * (`FastifyContextConfig.credential`).
   */
  admit(key: PresentedKey, metered: boolean): Promise<RequestAuth>;
  /**
   * Reserves a request's cost (or a bound on it) before any engine work: 402
   * insufficient_quota when the org's balance, less what its running requests reserved,
   * cannot cover it.
   */
  reserve(auth: RequestAuth, amountMicros: bigint): Promise<CreditHold>;
  /**
   * Debits a request; returns the balance after the debit. With a hold, the debit settles it:
   * `settles` micro-USD of it (default: all that is left) are released in the same write.
   */
  charge(auth: RequestAuth, requestId: string, costMicros: bigint, usage: UsageRecord, hold?: CreditHold, settles?: bigint): Promise<bigint>;
}

export const COST_HEADER = 'x-svc-request-cost-usd';
export const REMAINING_HEADER = 'x-svc-credits-remaining-usd';

/** `clock`: what key expiry and spend windows are decided by (the system's unless a test sets one). */
export function createGatewayCore(deps: {
  store: HotStore;
  limiter: RateLimiter;
  defaultRpm: number;
  onKeyUsed: (keyId: string) => void;
  clock?: Clock;
}): GatewayCore {
  const clock = deps.clock ?? systemClock;
  /** The hold's key part, for a key with a spend limit. */
  const keyOf = (auth: RequestAuth) => (auth.budget ? { auth, clock } : undefined);
  return {
    async admit(presented, metered) {
      const now = clock.now();
      const key =
        typeof presented === 'object' ? await verifyKeyHash(deps.store, presented.keyHash, { nowMs: now }) : await verifyApiKey(deps.store, presented, now);
      const limit = key.rateLimitRpm ?? deps.defaultRpm;
      let decision;
      try {
        decision = await deps.limiter.consume(key.keyId, limit);
      } catch {
        // A shared limiter that is down must not take the API down with it: admit and let
        // the next request try again (docs/api-conventions.md, "Rate limits").
        decision = { allowed: true, retryAfterSeconds: 0, remaining: limit };
      }
      if (!decision.allowed) {
        const wait = decision.retryAfterSeconds;
        throw new ServiceError('rate_limit_exceeded', `Rate limit reached: ${limit} requests per minute for this key. Please try again in ${wait}s`, null, {
          retryAfterSeconds: wait,
        });
      }
      if (metered && deps.store.debitsFailing()) {
        // Answered requests whose debits the database has not taken yet: serve no more
        // metered work until they are written (this bounds what a write failure leaves unbilled).
        throw new ServiceError(
          'temporarily_unavailable',
          'Usage cannot be recorded right now (the database refuses writes), so metered requests are paused; retry within a few seconds.',
        );
      }
      if (metered && key.balanceMicros - key.heldMicros <= 0n) throw insufficientQuota(key.balanceMicros, key.heldMicros, 0n);
      const budget = key.budget;
      if (metered && budget && budgetLeft(budget.limitMicros, budget, windowStartOf(budget.window, now)) <= 0n) throw keyBudgetExceeded(budget, now);
      deps.onKeyUsed(key.keyId);
      return key; // a record of its own for each lookup, with the key and org ids and the balance
    },
    async reserve(auth, amountMicros) {
      if (amountMicros > 0n) {
        let outcome;
        try {
          outcome = await deps.store.reserve(auth.orgId, amountMicros, auth.budget ? budgetedKeyOf(auth, clock.now()) : undefined);
        } catch {
          throw reserveUnavailable();
        }
        if (outcome === 'org_short') throw insufficientQuota(auth.balanceMicros, auth.heldMicros, amountMicros);
        if (outcome === 'key_short') throw keyBudgetExceeded(auth.budget!, clock.now(), amountMicros);
      }
      return new CreditHold(deps.store, auth.orgId, amountMicros > 0n ? amountMicros : 0n, keyOf(auth));
    },
    charge(auth, requestId, costMicros, usage, hold, settles) {
      const releaseMicros = hold ? hold.take(settles ?? hold.amountMicros) : 0n;
      const budgetedKey = auth.budget ? budgetedKeyOf(auth, clock.now()) : undefined;
      return chargeUsage(deps.store, { orgId: auth.orgId, apiKeyId: auth.keyId, requestId, costMicros, usage, releaseMicros, budgetedKey }).catch(
        (e: unknown) => {
          // Not debited, so not released either: the reservation goes back on its own.
          deps.store.release(auth.orgId, releaseMicros, budgetedKey?.keyId);
          throw e;
        },
      );
    },
  };
}

const reserveUnavailable = () =>
  new ServiceError(
    'temporarily_unavailable',
    'Credit cannot be reserved right now (the database is unreachable), so nothing more is started; retry within a few seconds.',
  );

function insufficientQuota(balance: bigint, held: bigint, needed: bigint): ServiceError {
  const reserved = held > 0n ? `, of which ${formatUsd(held)} USD is reserved by requests still running` : '';
  const cost = needed > 0n ? ` This request needs up to ${formatUsd(needed)} USD.` : '';
  return new ServiceError(
    'insufficient_quota',
    `You exceeded your current quota: the organization's credit balance is ${formatUsd(balance)} USD${reserved}.${cost} Add credits in the dashboard.`,
  );
}

/**
 * No auth, no limit, no debit: only for measuring the core against its absence (bench/). Every
 * request is admitted as `identity`, a real key of the bench's database, so that the revocation
 * watch and the request log find an existing key and org, as with the real core.
 */
export function createPassThroughCore(identity: { keyId: string; orgId: string }): GatewayCore {
  const auth: RequestAuth = {
    keyId: identity.keyId,
    orgId: identity.orgId,
    isTrial: false,
    balanceMicros: 1_000_000_000n,
    heldMicros: 0n,
    expiresAt: null,
    allowedModels: null,
    budget: null,
  };
  const nowhere = { reserve: async () => 'reserved' as const, release: () => {} };
  return {
    async admit() {
      return auth;
    },
    async reserve(_auth, amountMicros) {
      return new CreditHold(nowhere, auth.orgId, amountMicros);
    },
    async charge() {
      return auth.balanceMicros;
    },
  };
}

// Where a request may carry its API key: the one place for the rule (docs/api-conventions.md,
// "Keys and authentication"). Every client's way is taken: `Authorization: Bearer` (OpenAI,
// most SDKs), `Authorization: Token` (Deepgram's clients), `X-API-Key` (Cartesia's), and on
// WebSocket upgrades, which browsers cannot give headers, `?api_key=` / `?access_token=`, the
// subprotocol `openai-insecure-api-key.<key>` (OpenAI's browser realtime client) and the
// subprotocols `token, <key>` (Deepgram's browser clients).

/** The subprotocol prefix that carries a key (the offered protocol is `openai-insecure-api-key.<key>`). */
const KEY_SUBPROTOCOL = 'openai-insecure-api-key.';

/**
 * Reads the key a request presents; `onUpgrade`: the route is a WebSocket upgrade, which may
 * also carry it in its query or subprotocols. A key given twice the same way counts once; two
 * different keys are refused (401) rather than one picked: which one a client meant to spend
 * is not for the gateway to guess.
 */
export function presentedKey(request: Pick<FastifyRequest, 'headers' | 'query'>, onUpgrade = false): string | undefined {
  const { authorization } = request.headers;
  const apiKeyHeader = request.headers['x-api-key'];
  // ElevenLabs' clients send their key as `xi-api-key`.
  const xiApiKey = request.headers['xi-api-key'];
  // The usual form, without a regular expression's match array.
  if (
    !onUpgrade &&
    apiKeyHeader === undefined &&
    xiApiKey === undefined &&
    authorization?.startsWith('Bearer ') &&
    authorization.charCodeAt(7) > 32 &&
    authorization.charCodeAt(authorization.length - 1) > 32
  ) {
    return authorization.slice(7);
  }
  const found: { key: string; where: string }[] = [];
  const add = (key: string | undefined, where: string) => {
    if (key) found.push({ key, where });
  };
  if (authorization) add(keyOfAuthorization(authorization), 'the Authorization header');
  if (typeof apiKeyHeader === 'string') add(apiKeyHeader.trim(), 'the X-API-Key header');
  if (typeof xiApiKey === 'string') add(xiApiKey.trim(), 'the xi-api-key header');
  if (onUpgrade) {
    const query = request.query as Record<string, unknown> | undefined;
    for (const name of ['api_key', 'access_token']) {
      const value = query?.[name];
      for (const one of Array.isArray(value) ? value : [value]) if (typeof one === 'string') add(one, `the ${name} query parameter`);
    }
    const protocols = request.headers['sec-websocket-protocol'];
    if (protocols) {
      const offered = protocols.split(',').map((p) => p.trim());
      offered.forEach((protocol, i) => {
        if (protocol.startsWith(KEY_SUBPROTOCOL)) add(protocol.slice(KEY_SUBPROTOCOL.length), `the ${KEY_SUBPROTOCOL}… subprotocol`);
        // Deepgram's browser clients offer the key as the protocol after `token` (or `bearer`).
        else if (/^(?:token|bearer)$/i.test(protocol)) add(offered[i + 1], `the ${protocol} subprotocol`);
      });
    }
  }
  const first = found[0];
  const other = found.find((f) => f.key !== first?.key);
  if (first && other) {
    throw new ServiceError(
      'invalid_api_key',
      `Two different API keys were sent, in ${first.where} and in ${other.where}; send one key (it may be repeated, but not differ).`,
    );
  }
  return first?.key;
}

/** `Bearer <key>` or `Token <key>` (any case); a bare key without a scheme is taken as it is; the scheme alone is no key. */
function keyOfAuthorization(header: string): string | undefined {
  const value = header.trim();
  if (/^(?:Bearer|Token)$/i.test(value)) return undefined;
  const m = /^(?:Bearer|Token)\s+(.+)$/i.exec(value);
  return m ? m[1]!.trim() : value;
}

/** The 401 for a request that presents no key: names every way the route takes one. */
export function missingKeyError(onUpgrade: boolean): ServiceError {
  const ways = onUpgrade
    ? 'in the Authorization header ("Bearer sk_svc_..." or "Token sk_svc_..."), the X-API-Key header, the api_key or access_token query parameter, or the WebSocket subprotocol "openai-insecure-api-key.sk_svc_..."'
    : 'in the Authorization header ("Bearer sk_svc_..." or "Token sk_svc_...") or the X-API-Key header';
  return new ServiceError('invalid_api_key', `You did not provide an API key. Pass it ${ways}.`);
}

/**
 * The subprotocol a WebSocket route answers with (`ws`'s handleProtocols; called only when the
 * client offered some): `realtime` when offered (OpenAI's clients), else the first that carries
 * no key. Never one that carries a key (`openai-insecure-api-key.<key>`, or the value after
 * `token`/`bearer`): the 101's headers are what proxies and tools log. A client that offered
 * only its key gets no subprotocol; browsers and `ws` then fail the handshake (they want one of
 * theirs back), so such a client offers one more, as OpenAI's clients offer `realtime`.
 */
export function selectSubprotocol(offered: Set<string>): string | false {
  if (offered.has('realtime')) return 'realtime';
  let afterScheme = false;
  for (const protocol of offered) {
    const carriesKey = afterScheme || protocol.startsWith(KEY_SUBPROTOCOL);
    afterScheme = /^(?:token|bearer)$/i.test(protocol);
    if (!carriesKey) return protocol;
  }
  return false;
}

export function setSpendHeaders(reply: FastifyReply, costMicros: bigint | null, remainingMicros: bigint): void {
  if (costMicros !== null) reply.header(COST_HEADER, formatUsd(costMicros));
  reply.header(REMAINING_HEADER, formatUsd(remainingMicros));
}
