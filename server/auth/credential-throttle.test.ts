// The sign-in / sign-up throttle over the gateway's fixed-window limiter, with a clock held
// inside one window: per email, per address, the shared bucket of unknown addresses, and
// two dashboard processes sharing their counts through Redis.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { WINDOW_MS, createMemoryRateLimiter, createRedisRateLimiter } from '../rate-limit/rate-limiter.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { CREDENTIAL_LIMITS, createCredentialThrottle, redisWithFallback, type CredentialThrottle } from './credential-throttle.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const W = 31_000_000 * WINDOW_MS;

async function attempts(
  throttle: CredentialThrottle,
  n: number,
  subjects: (i: number) => { address: string | null; email: string },
  action: 'sign_in' | 'sign_up' = 'sign_in',
) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    out.push(
      await throttle.take(action, subjects(i)).then(
        () => 'ok',
        (e: { code: string }) => e.code,
      ),
    );
  }
  return out;
}

const allowed = (results: string[]) => results.filter((r) => r === 'ok').length;

describe('credential throttle', () => {
  it('per email, whatever its case and spaces, across addresses', async () => {
    const throttle = createCredentialThrottle(createMemoryRateLimiter(manualClock(W + 1_000)));
    const results = await attempts(throttle, 8, (i) => ({ address: `192.0.2.${i}`, email: i % 2 ? ' Ada@Example.com' : 'ada@example.com' }));
    expect(allowed(results)).toBe(CREDENTIAL_LIMITS.sign_in.perEmail);
    expect(results.slice(CREDENTIAL_LIMITS.sign_in.perEmail).every((r) => r === 'rate_limit_exceeded')).toBe(true);
  });

  it('per address, across emails; another address has its own count', async () => {
    const throttle = createCredentialThrottle(createMemoryRateLimiter(manualClock(W + 1_000)));
    const results = await attempts(throttle, 30, (i) => ({ address: '198.51.100.5', email: `u${i}@example.com` }), 'sign_up');
    expect(allowed(results)).toBe(CREDENTIAL_LIMITS.sign_up.perAddress);
    await expect(throttle.take('sign_up', { address: '198.51.100.6', email: 'other@example.com' })).resolves.toBeUndefined();
  });

  it('unknown addresses share one larger bucket', async () => {
    const throttle = createCredentialThrottle(createMemoryRateLimiter(manualClock(W + 1_000)));
    const results = await attempts(throttle, 40, (i) => ({ address: null, email: `u${i}@example.com` }), 'sign_up');
    expect(allowed(results)).toBe(CREDENTIAL_LIMITS.sign_up.unknownAddresses);
    // A known address is not in that bucket.
    await expect(throttle.take('sign_up', { address: '203.0.113.1', email: 'known@example.com' })).resolves.toBeUndefined();
  });

  it('says when to come back (Retry-After) and lets the next window in', async () => {
    const clock = manualClock(W + 45_500);
    const throttle = createCredentialThrottle(createMemoryRateLimiter(clock));
    const subjects = { address: '192.0.2.1', email: 'ada@example.com' };
    for (let i = 0; i < CREDENTIAL_LIMITS.sign_in.perEmail; i++) await throttle.take('sign_in', subjects);
    await expect(throttle.take('sign_in', subjects)).rejects.toMatchObject({
      code: 'rate_limit_exceeded',
      message: 'Too many sign-in attempts. Try again in 15 seconds.',
      retryAfterSeconds: 15,
    });
    // Sign-in and sign-up count apart.
    await expect(throttle.take('sign_up', subjects)).resolves.toBeUndefined();
    clock.set(W + WINDOW_MS);
    await expect(throttle.take('sign_in', subjects)).resolves.toBeUndefined();
  });

  describe('through Redis', () => {
    const clients: Redis[] = [];
    afterAll(() => {
      for (const c of clients) c.disconnect();
    });

    it('two dashboard processes count together', async () => {
      const prefix = `svc:test:${randomBytes(6).toString('hex')}:`;
      const [a, b] = [new Redis(REDIS_URL), new Redis(REDIS_URL)];
      clients.push(a, b);
      const clock = manualClock(W);
      const processA = createCredentialThrottle(createRedisRateLimiter(a, { prefix, clock }));
      const processB = createCredentialThrottle(createRedisRateLimiter(b, { prefix, clock }));
      const subjects = () => ({ address: '192.0.2.9', email: 'shared@example.com' });
      const results = [...(await attempts(processA, 3, subjects)), ...(await attempts(processB, 3, subjects))];
      expect(results).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'rate_limit_exceeded']);
    });

    it('with Redis unreachable, each process still limits on its own', async () => {
      // A port nothing listens on; without the offline queue every command fails at once.
      const down = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
      down.on('error', () => {});
      const limiter = redisWithFallback(down, manualClock(W));
      const throttle = createCredentialThrottle(limiter);
      const results = await attempts(throttle, 7, () => ({ address: null, email: 'offline@example.com' }));
      expect(allowed(results)).toBe(CREDENTIAL_LIMITS.sign_in.perEmail);
      await limiter.close();
    });
  });
});
