// Trimming must hand freed malloc memory back, on the Linux the gateway runs on.
import { execFileSync } from 'node:child_process';
import { setTimeout as wait } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { IDLE_EVENT_LOOP_UTILIZATION, idleMemoryRelease } from './release-freed-memory.ts';

describe('releaseFreedMemory', () => {
  it('hands back most of what a freed burst of small allocations left resident', () => {
    // In a fresh process: ~100 MB of 16 KB buffers (malloc'd from the heap, below the mmap
    // threshold), freed except one at the end that keeps the heap's top in use, so that glibc
    // cannot shrink the heap by itself. Measured against what the burst added to this process's
    // RSS, not against a size: page sizes and malloc settings differ between machines.
    // (--single-threaded-gc: the buffers' memory is freed within gc(), not by a helper thread later.)
    const script = `
      const { releaseFreedMemory } = await import(${JSON.stringify(new URL('./release-freed-memory.ts', import.meta.url).pathname)});
      const rss = () => process.memoryUsage.rss();
      globalThis.gc();
      const base = rss();
      let held = Array.from({ length: 6400 }, () => Buffer.allocUnsafeSlow(16 * 1024).fill(1));
      const pin = Buffer.allocUnsafeSlow(16 * 1024).fill(1);
      const peak = rss();
      held = null;
      globalThis.gc(); globalThis.gc();
      const kept = rss();
      const released = releaseFreedMemory();
      console.log(JSON.stringify({ base, peak, kept, released, after: rss(), pinned: pin.length }));
    `;
    const out = execFileSync(process.execPath, ['--expose-gc', '--single-threaded-gc', '--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      env: { ...process.env, MALLOC_ARENA_MAX: '2' },
    });
    const m = JSON.parse(out.trim().split('\n').pop()!) as { base: number; peak: number; kept: number; released: number; after: number };
    const burst = m.peak - m.base;
    // The burst showed in RSS, and freeing it left most of it there: the case trimming is for.
    const seen = JSON.stringify(m);
    expect(burst, seen).toBeGreaterThan(0);
    expect(m.kept - m.base, `malloc gave the freed burst back by itself, leaving nothing to trim: ${seen}`).toBeGreaterThan(burst / 2);
    // Trimming gave back most of it, and the process stayed smaller afterwards.
    expect(m.released, seen).toBeGreaterThan(burst / 2);
    expect(m.kept - m.after, seen).toBeGreaterThan(burst / 2);
  });
});

describe('idleMemoryRelease', () => {
  it('hands memory back after an idle stretch of the event loop, never while it serves load', () => {
    let released = 0;
    const utilizations = [0.9, IDLE_EVENT_LOOP_UTILIZATION, 0.05, IDLE_EVENT_LOOP_UTILIZATION - 0.01, 1];
    const check = idleMemoryRelease(
      () => released++,
      () => utilizations.shift()!,
    );
    expect([check(), check(), check(), check(), check()]).toEqual([false, false, true, true, false]);
    expect(released).toBe(2);
  });

  it("reads the event loop's utilization since the previous check", async () => {
    let released = 0;
    const check = idleMemoryRelease(() => released++);
    // The loop kept busy by synchronous work since the check was made: no release.
    const start = performance.now();
    while (performance.now() - start < 100);
    expect(check()).toBe(false);
    // Then waiting on a timer, nothing else to do: idle.
    await wait(300);
    expect(check()).toBe(true);
    expect(released).toBe(1);
  });
});
