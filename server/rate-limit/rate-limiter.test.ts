import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../test/support/manual-clock.ts';
import { WINDOW_MS, createMemoryRateLimiter, createRedisRateLimiter, type RateLimiter } from './rate-limiter.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

// A fixed window start far from "now", so that no test depends on the wall clock: the
// limiters read a clock the tests set.
const W = 29_000_000 * WINDOW_MS;
const clock = manualClock(W);

async function consumeN(limiter: RateLimiter, key: string, limit: number, n: number) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await limiter.consume(key, limit));
  return out;
}

/** The decision of one consume at `at` on the tests' clock. */
function consumeAt(limiter: RateLimiter, key: string, limit: number, at: number) {
  clock.set(at);
  return limiter.consume(key, limit);
}

describe('memory rate limiter: fixed one-minute windows', () => {
  const limiters: RateLimiter[] = [];
  const make = () => {
    const l = createMemoryRateLimiter(clock);
    limiters.push(l);
    return l;
  };
  afterAll(async () => {
    await Promise.all(limiters.map((l) => l.close()));
  });

  it('allows exactly `limit` requests in a window, then refuses', async () => {
    clock.set(W + 1_000);
    const decisions = await consumeN(make(), 'k', 3, 5);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(decisions.map((d) => d.remaining)).toEqual([2, 1, 0, 0, 0]);
  });

  it.each([
    // now (offset into the window, ms) -> Retry-After seconds until the window ends
    [0, 60],
    [1, 60],
    [999, 60],
    [1_000, 59],
    [30_500, 30], // 29.5 s left -> rounded up
    [58_999, 2],
    [59_000, 1],
    [59_999, 1], // 1 ms left still says 1 s, never 0
  ])('at %i ms into the window Retry-After is %i s', async (offset, seconds) => {
    const limiter = make();
    clock.set(W + offset);
    const d = await limiter.consume('k', 1);
    expect(d.allowed).toBe(true);
    const refused = await limiter.consume('k', 1);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterSeconds).toBe(seconds);
  });

  it('counts the last millisecond of a window in that window and starts afresh at the next', async () => {
    const limiter = make();
    expect((await consumeAt(limiter, 'k', 2, W)).allowed).toBe(true);
    expect((await consumeAt(limiter, 'k', 2, W + WINDOW_MS - 1)).allowed).toBe(true);
    expect((await consumeAt(limiter, 'k', 2, W + WINDOW_MS - 1)).allowed).toBe(false);
    const next = await consumeAt(limiter, 'k', 2, W + WINDOW_MS);
    expect(next).toEqual({ allowed: true, retryAfterSeconds: 60, remaining: 1 });
    expect((await consumeAt(limiter, 'k', 2, W + WINDOW_MS + 10)).allowed).toBe(true);
    expect((await consumeAt(limiter, 'k', 2, W + WINDOW_MS + 20)).allowed).toBe(false);
  });

  it('is a fixed window aligned to the clock minute, not a sliding one', async () => {
    const limiter = make();
    // Two requests at the very end of one window and two at the very start of the next
    // are all allowed with limit 2.
    const decisions = [
      await consumeAt(limiter, 'k', 2, W + WINDOW_MS - 2),
      await consumeAt(limiter, 'k', 2, W + WINDOW_MS - 1),
      await consumeAt(limiter, 'k', 2, W + WINDOW_MS),
      await consumeAt(limiter, 'k', 2, W + WINDOW_MS + 1),
    ];
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true]);
  });

  it('keeps separate counters per key', async () => {
    const limiter = make();
    clock.set(W);
    expect((await consumeN(limiter, 'a', 2, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
    expect((await consumeN(limiter, 'b', 2, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
    expect((await consumeN(limiter, 'c', 5, 1))[0]).toEqual({ allowed: true, retryAfterSeconds: 60, remaining: 4 });
  });

  it('applies the limit passed with each call (per-key overrides)', async () => {
    const limiter = make();
    clock.set(W);
    await consumeN(limiter, 'k', 10, 3);
    expect((await limiter.consume('k', 3)).allowed).toBe(false); // 4th with limit 3
    expect((await limiter.consume('k', 10)).allowed).toBe(true); // 5th with limit 10
  });

  it('does not share counters between two memory limiter instances', async () => {
    const a = make();
    const b = make();
    clock.set(W);
    await consumeN(a, 'k', 1, 1);
    expect((await a.consume('k', 1)).allowed).toBe(false);
    expect((await b.consume('k', 1)).allowed).toBe(true);
  });
});

describe('Redis rate limiter (real Redis)', () => {
  const prefix = `svc:test:rl:${process.pid}:${randomBytes(6).toString('hex')}:`;
  let redisA: Redis;
  let redisB: Redis;
  let a: RateLimiter;
  let b: RateLimiter;

  beforeAll(async () => {
    redisA = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, connectTimeout: 5_000, lazyConnect: true });
    redisB = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, connectTimeout: 5_000, lazyConnect: true });
    await Promise.all([redisA.connect(), redisB.connect()]);
    a = createRedisRateLimiter(redisA, { prefix, clock });
    b = createRedisRateLimiter(redisB, { prefix, clock });
  });

  async function keysUnderPrefix(): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redisA.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
    return found;
  }

  afterEach(async () => {
    const keys = await keysUnderPrefix();
    if (keys.length) await redisA.del(...keys);
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    redisA?.disconnect();
    redisB?.disconnect();
  });

  it('two limiters on two connections share one window exactly: 2 x 300 concurrent consumes, limit 500 -> 500 allowed', async () => {
    clock.set(W + 30_000);
    const attempts = [...Array.from({ length: 300 }, () => a.consume('key_shared', 500)), ...Array.from({ length: 300 }, () => b.consume('key_shared', 500))];
    const decisions = await Promise.all(attempts);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(500);
    expect(decisions.filter((d) => !d.allowed)).toHaveLength(100);
    // The counter in Redis saw every one of the 600 consumes.
    expect(await redisA.get(`${prefix}key_shared:${W / WINDOW_MS}`)).toBe('600');
  });

  it('refusals from either instance carry Retry-After = seconds to the end of the shared window', async () => {
    clock.set(W + 45_200); // 14.8 s left
    expect((await a.consume('key_ra', 1)).allowed).toBe(true);
    const fromA = await a.consume('key_ra', 1);
    const fromB = await b.consume('key_ra', 1);
    expect(fromA).toEqual({ allowed: false, retryAfterSeconds: 15, remaining: 0 });
    expect(fromB).toEqual({ allowed: false, retryAfterSeconds: 15, remaining: 0 });
  });

  it('starts a new counter in the next window and keeps keys apart', async () => {
    clock.set(W);
    expect((await consumeN(a, 'key_w', 2, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
    expect((await consumeAt(b, 'key_w', 2, W + WINDOW_MS)).allowed).toBe(true);
    expect((await consumeAt(b, 'key_other', 2, W)).allowed).toBe(true);
    expect(await redisA.get(`${prefix}key_w:${W / WINDOW_MS}`)).toBe('3');
    expect(await redisA.get(`${prefix}key_w:${W / WINDOW_MS + 1}`)).toBe('1');
  });

  it('never leaves a window counter without an expiry (at most two windows)', async () => {
    clock.set(W);
    await Promise.all(Array.from({ length: 20 }, () => a.consume('key_ttl', 5)));
    const keys = await keysUnderPrefix();
    expect(keys.length).toBeGreaterThanOrEqual(1);
    for (const k of keys) {
      const ttl = await redisA.pttl(k);
      expect(ttl, k).toBeGreaterThan(0);
      expect(ttl, k).toBeLessThanOrEqual(2 * WINDOW_MS);
    }
  });

  it('rejects (so the caller can fail open) when Redis is unreachable', async () => {
    const dead = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
    dead.on('error', () => {});
    try {
      const limiter = createRedisRateLimiter(dead, { prefix, clock });
      await expect(limiter.consume('key_dead', 5)).rejects.toThrow();
    } finally {
      dead.disconnect();
    }
  });
});
