import { defineConfig } from 'vitest/config';

const EXCLUDE = ['node_modules/**', '.tools/**', '.next/**', 'e2e/**', 'data/**'];

// Unit tests: fast, and they start nothing (no process, server, connection or database;
// test/support/unit-guard.ts refuses the first three). `npm run test:unit` runs these;
// `npm run test:integration` runs every other test file; `npx vitest run` runs both, each
// file once.
const UNIT = [
  'gateway/audio/convert.test.ts',
  'gateway/audio/pcm.test.ts',
  'gateway/audio/resample.test.ts',
  'gateway/audio/volume.test.ts',
  'gateway/errors.test.ts',
  'gateway/llm/responses-via-chat.test.ts',
  'gateway/metrics/request-series.test.ts',
  'gateway/redact-url.test.ts',
  'gateway/sessions/session-life.unit.test.ts',
  'gateway/request-logger.test.ts',
  'gateway/routes/transcription-formats.test.ts',
  'gateway/sse.test.ts',
  'gateway/tts/text-spans.test.ts',
  'gateway/upstreams/slots.test.ts',
  'gateway/voices/voice-clip.test.ts',
  'server/api/errors.test.ts',
  'server/auth/callback-url.test.ts',
  'server/auth/nextauth-secret.test.ts',
  'server/auth/oauth-providers.test.ts',
  'server/config/client-address.test.ts',
  'server/db/ids.test.ts',
  'server/error-envelope.test.ts',
  'server/money.test.ts',
  'server/services/dicts/apply-pronunciation.test.ts',
  'server/services/dicts/case-fold.test.ts',
  'server/services/keys/api-key-format.test.ts',
  'server/services/logs/present-request-log.test.ts',
  'server/services/logs/request-log-stats.test.ts',
  'ops/ops-files.test.ts',
  'test/docs-links.test.ts',
  'test/lint-boundaries.test.ts',
];

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
