import type { HotStore } from '../../server/db/hot-store.ts';

/**
 * Collects "last used" stamps in memory and writes them in one batch every few seconds,
 * so the per-request path never writes for bookkeeping.
 */
export function createKeyUsageTracker(store: HotStore, flushMs = 5_000) {
  let pending = new Map<string, Date>();
  const flush = async () => {
    if (pending.size === 0) return;
    const batch = pending;
    pending = new Map();
    await store.touchKeys(batch).catch(() => {
      // Best effort: a stamp lost while the database is down is not worth a retry queue.
    });
  };
  const timer = setInterval(() => void flush(), flushMs);
  timer.unref();
  return {
    mark(keyId: string) {
      pending.set(keyId, new Date());
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
