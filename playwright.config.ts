// The browser stories (e2e/*.e2e.ts): one after another, each a serial chain of steps against
// its own stack (e2e/support/). Debian's Chromium, because Playwright's own browsers cannot be
// downloaded here. Traces and failure screenshots go to e2e/test-results/, the HTML report to
// e2e/report/ (`npx playwright show-report e2e/report`); both are gitignored.
import { existsSync } from 'node:fs';
import { defineConfig } from '@playwright/test';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`);

export default defineConfig({
  testDir: 'e2e',
  testMatch: '*.e2e.ts',
  outputDir: 'e2e/test-results',
  globalSetup: './e2e/support/global-setup.ts',
  // Each story starts its own dashboard and gateway: two at once would oversubscribe 2 cores.
  workers: 1,
  retries: 0,
  forbidOnly: !!process.env.CI,
  // A step's own budget; setting up a story has its own (e2e/support/story.ts).
  timeout: 60_000,
  // Never serve the report at the end of a run: the run would not return.
  reporter: [['list'], ['html', { outputFolder: 'e2e/report', open: 'never' }]],
  use: {
    browserName: 'chromium',
    headless: true,
    // Playwright adds --headless, --no-sandbox, --no-first-run and the background switches itself.
    launchOptions: { executablePath: CHROMIUM, args: ['--disable-gpu', '--disable-quic'] },
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
  },
});
