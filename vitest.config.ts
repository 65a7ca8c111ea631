import { defineConfig } from 'vitest/config';

const EXCLUDE = ['node_modules/**', '.tools/**', '.next/**', 'e2e/**', 'data/**'];

// Unit tests are the files named `*.unit.test.ts`: fast, and they start nothing (no process,
// server, connection or database; test/support/unit-guard.ts refuses the first three).
// `npm run test:unit` runs these; `npm run test:integration` runs every other test file;
// `npx vitest run` runs both, each file once.
const UNIT = ['**/*.unit.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Black-box tests start real processes; keep the 2-core machine from being oversubscribed.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT, exclude: EXCLUDE, setupFiles: ['test/support/unit-guard.ts'] } },
      // Real databases (SQLite, or PostgreSQL with TEST_DB=postgresql), gateways, engines, processes.
      { extends: true, test: { name: 'integration', include: ['**/*.test.ts'], exclude: [...EXCLUDE, ...UNIT] } },
    ],
  },
});
