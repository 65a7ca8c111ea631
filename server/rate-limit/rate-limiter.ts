// Fixed one-minute windows per key, aligned to the clock minute so every replica agrees on
// the window without coordination. Written by hand rather than with rate-limiter-flexible
// because each key has its own limit and the whole thing is one counter per window. The
// window is read from the clock the limiter is handed (the system's unless a test sets one).
import type { Redis } from 'ioredis';
import { systemClock, type Clock } from '../clock.ts';

export const WINDOW_MS = 60_000;

export interface RateDecision {
  allowed: boolean;
  /** Seconds until the current window ends (for Retry-After). */
  retryAfterSeconds: number;
  remaining: number;
}

export interface RateLimiter {
  consume(keyId: string, limit: number): Promise<RateDecision>;
  close(): Promise<void>;
}

function decide(count: number, limit: number, now: number): RateDecision {
  const windowEnd = (Math.floor(now / WINDOW_MS) + 1) * WINDOW_MS;
  return {
    allowed: count <= limit,
    retryAfterSeconds: Math.max(1, Math.ceil((windowEnd - now) / 1000)),
    remaining: Math.max(0, limit - count),
  };
}

export function createMemoryRateLimiter(clock: Clock = systemClock): RateLimiter {
  const windows = new Map<string, { window: number; count: number }>();
  // Drop counters of past windows so idle keys do not accumulate.
  const sweep = setInterval(() => {
    const current = Math.floor(clock.now() / WINDOW_MS);
    for (const [k, v] of windows) if (v.window < current) windows.delete(k);
  }, WINDOW_MS);
  sweep.unref();
  return {
    async consume(keyId, limit) {
      const now = clock.now();
      const window = Math.floor(now / WINDOW_MS);
      let entry = windows.get(keyId);
      if (!entry || entry.window !== window) {
        entry = { window, count: 0 };
        windows.set(keyId, entry);
      }
      entry.count += 1;
      return decide(entry.count, limit, now);
    },
    async close() {
      clearInterval(sweep);
    },
  };
}

// INCR and the expiry in one atomic script: no lost counts, no key left without a TTL.
const INCR_WITH_TTL = `local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n`;

type RedisWithWindow = Redis & { svcIncrWindow(key: string, ttlMs: string): Promise<number> };

export function createRedisRateLimiter(redis: Redis, { prefix = 'svc:rl:', clock = systemClock }: { prefix?: string; clock?: Clock } = {}): RateLimiter {
  // defineCommand sends EVALSHA and falls back to EVAL once when the script is not cached.
  redis.defineCommand('svcIncrWindow', { numberOfKeys: 1, lua: INCR_WITH_TTL });
  const r = redis as RedisWithWindow;
  return {
    async consume(keyId, limit) {
      const now = clock.now();
      const window = Math.floor(now / WINDOW_MS);
      const count = await r.svcIncrWindow(`${prefix}${keyId}:${window}`, String(WINDOW_MS * 2));
      return decide(count, limit, now);
    },
    async close() {},
  };
}
