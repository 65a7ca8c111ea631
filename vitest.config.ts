import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', '.tools/**', '.next/**', 'e2e/**', 'data/**'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Black-box tests start real processes; keep the 2-core machine from being oversubscribed.
    maxWorkers: 2,
  },
});
