// The libc bindings the gateway relies on for memory and for the commit watch (which has its own
// tests for the mapping): they must load on the Linux it runs on, and trimming must hand freed
// malloc memory back.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { libc } from './libc.js';

describe('libc', () => {
  it('loads on glibc Linux', () => {
    expect(libc()).not.toBeNull();
  });

  it('releaseFreedMemory hands back what malloc kept after a peak', () => {
    // In a fresh process: ~100 MB of 16 KB buffers (malloc'd from the heap, below the mmap
    // threshold), freed except one at the end that keeps the heap's top in use, so that glibc
    // cannot shrink the heap by itself.
    const script = `
      const { releaseFreedMemory } = await import(${JSON.stringify(new URL('./libc.ts', import.meta.url).pathname)});
      let held = Array.from({ length: 6400 }, () => Buffer.allocUnsafeSlow(16 * 1024).fill(1));
      const pin = Buffer.allocUnsafeSlow(16 * 1024).fill(1);
      held = null;
      globalThis.gc(); globalThis.gc();
      await new Promise((r) => setTimeout(r, 50));
      const kept = process.memoryUsage.rss();
      const released = releaseFreedMemory();
      console.log(JSON.stringify({ kept, released, pinned: pin.length }));
    `;
    const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, MALLOC_ARENA_MAX: '2' } });
    const { released } = JSON.parse(out.trim().split('\n').pop()!) as { released: number };
    expect(released).toBeGreaterThan(50 * 1024 * 1024);
  });
});
