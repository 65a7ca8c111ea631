// Black-box test of the dashboard with the gateway, as a user would drive them: a migrated
// throw-away SQLite database, `next start` and `svc gateway` on free ports against it, and
// Debian's Chromium through @playwright/test. First the first user of a fresh install hears a
// voice's preview at $0 (free), then goes from $0 to a first successful request by following the overview alone (grant credit there, make
// a key from its link, paste the request the page shows into a shell). Then: create a key, use it on the gateway,
// revoke it in the page, see the gateway refuse it; give a key its own rate limit in the page
// (the first user is platform admin) and see the gateway apply it; give a key a spend limit, an
// expiry and a model list and see the gateway enforce them, then change them in the page and see
// the gateway follow; then credits; then roles:
// a second user (another browser, a password account whose email nobody proved) is invited
// with a link, opens it and joins, acts for the owner's org, sees its keys but can neither
// create nor revoke them (in the page, nor by calling the server); then phone width,
// sign-out, and a sign-in whose callbackUrl points elsewhere stays on the dashboard; the member
// switches orgs by choosing one and sees the way to credit a non-admin has at $0; a real 404
// page; a favicon and no failed request on a page load.
//
//   npx playwright test e2e/dashboard.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Each step is a test of one serial chain: after a failure the rest are skipped.
// Processes and temporary directories are removed at the end, also after a failure and on
// Ctrl-C (e2e/support/).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test, type Page } from '@playwright/test';
import { createApiKey, fillSignUp, PASSWORD, signUp, submitSignUp, type Account } from './support/accounts.ts';
import { assertFitsWidth, assertPagesFitPhone, DESKTOP, mainNav, openBrowser, PHONE, type BrowserSession } from './support/browser.ts';
import { setUpStory } from './support/story.ts';

const USER: Account = { name: 'E2E Tester', email: 'e2e.tester@example.com', password: PASSWORD };
const MEMBER: Account = { name: 'E2E Member', email: 'e2e.member@example.com', password: PASSWORD };
const INVITEE = 'e2e.invitee@example.com';
const KEY_NAME = 'e2e voice agent';
const LIMITED_KEY_NAME = 'e2e rate limited';
const BUDGET_KEY_NAME = 'e2e budgeted';

test.describe.serial('dashboard', () => {
  // DASHBOARD_URL: the invite links the members page shows must open the dashboard this test reaches.
  const story = setUpStory({ name: 'dashboard', env: ({ dash }) => ({ DASHBOARD_URL: dash }) });
  let dash = '';
  let api = '';
  let dataDir = '';
  let tmp = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];
  test.beforeAll(() => {
    ({ dash, api, dataDir, tmp } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
  });
  const gatewayModels = (key: string) => fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  let apiKey = '';
  let limitedKey = '';
  let budgetKey = '';

  test('a signed-out visitor is sent to /signin', async () => {
    await page.goto(`${dash}/keys`);
    await page.waitForURL(`${dash}/signin`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await shot('signin');
  });

  test('sign-up refuses a short password before sending it', async () => {
    await page.goto(`${dash}/signup`);
    await fillSignUp(page, { email: USER.email, password: 'short' });
    await submitSignUp(page);
    // The browser's own minlength check or ours; either way no account and a visible reason.
    assert(page.url().endsWith('/signup'), 'left the sign-up page');
  });

  test('signs up and lands on the overview of a personal org with $0.00', async () => {
    await page.goto(`${dash}/signup`);
    await fillSignUp(page, USER);
    await shot('signup');
    await submitSignUp(page);
    await page.waitForURL(`${dash}/`);
    await page.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
    const balance = (await page.getByTestId('balance').textContent())?.trim();
    assert(balance === '$0.00', `balance shows ${balance}`);
    await shot('overview');
  });

  test('$0: the overview lays out the way to a first request, and says honestly what works at $0', async () => {
    const start = page.getByTestId('getting-started');
    await start.getByRole('heading', { name: 'Get started: from $0 to your first request' }).waitFor();
    for (const id of ['step-credit', 'step-key', 'step-request'])
      assert((await start.getByTestId(id).getAttribute('data-done')) === 'false', `${id} is marked done at $0`);
    // The first account is platform admin: it adds credit itself, right here.
    await start.getByTestId('step-credit').getByRole('form', { name: 'Grant credit to this organization' }).waitFor();
    const hint = (await page.getByTestId('zero-balance-hint').textContent()) ?? '';
    assert(hint.includes('only for GET /v1/models') && hint.includes('voices') && hint.includes('402 insufficient_quota'), `the $0 hint says: ${hint}`);
    await shot('overview-zero');
  });

  test('the overview refuses a negative or zero amount, in the page and on the server; the balance stays $0.00', async () => {
    const form = page.getByTestId('step-credit').getByRole('form', { name: 'Grant credit to this organization' });
    const amount = form.getByLabel('Amount (USD)');
    for (const value of ['-5', '0']) {
      await amount.fill(value);
      await form.getByRole('button', { name: 'Grant credit' }).click();
      await form.getByText('Enter an amount above zero.', { exact: true }).waitFor();
      assert((await amount.getAttribute('aria-invalid')) === 'true', `${value}: the amount is not marked`);
    }
    await shot('overview-negative-refused');
    // The server refuses it too: a negative amount is only an explicit, confirmed adjustment (the Credits page).
    const me = await page.request.get(`${dash}/api/trpc/account.me`);
    const org = ((await me.json()) as { result: { data: { org: { id: string } } } }).result.data.org.id;
    const res = await page.request.post(`${dash}/api/trpc/credits.grant`, {
      data: { orgId: org, amountUsd: '-5' },
      headers: { 'content-type': 'application/json' },
    });
    const body = (await res.json()) as { error?: { message?: string } };
    assert(res.status() === 400 && body.error?.message?.startsWith('Enter an amount above zero.'), `-5: ${res.status()} ${JSON.stringify(body)}`);
    await page.reload();
    assert((await page.getByTestId('balance').textContent())?.trim() === '$0.00', 'the refused amounts changed the balance');
  });

  test("$0: Play on the Voices page plays a voice's free preview, on a desktop and on a phone (390×844); the balance stays $0.00", async () => {
    for (const viewport of [DESKTOP, PHONE]) {
      await page.setViewportSize(viewport);
      await page.goto(`${dash}/voices`);
      const card = page.locator('[data-testid="voice-card"][data-voice-id="flite-slt"]');
      const play = card.getByRole('button', { name: 'Play a sample of Sally on local-flite' });
      await play.waitFor();
      // The page's one <audio> reports it plays the preview, some seconds of it.
      const playing = page.evaluate(
        () =>
          new Promise<number>((resolve, reject) => {
            const audio = document.querySelector<HTMLAudioElement>('[data-testid="voice-sample-audio"]')!;
            audio.addEventListener('playing', () => resolve(audio.duration), { once: true });
            audio.addEventListener('error', () => reject(new Error('the preview could not be played')), { once: true });
          }),
      );
      await play.click();
      const seconds = await playing;
      assert(seconds > 1, `the preview lasts ${seconds} s`);
      const refused = card.getByTestId('play-sample-error');
      assert((await refused.count()) === 0, `Play answered: ${(await refused.count()) > 0 ? await refused.textContent() : ''}`);
      await assertFitsWidth(page, `the voices page at ${viewport.width}px`);
      await shot(`voices-preview-at-zero-${viewport.width}`);
    }
    await page.setViewportSize(DESKTOP);
    await page.goto(`${dash}/`);
    assert((await page.getByTestId('balance').textContent())?.trim() === '$0.00', 'playing previews changed the balance');
  });

  test('grants credit from the overview; the amount clears, so a second click grants nothing more', async () => {
    const form = page.getByTestId('step-credit').getByRole('form', { name: 'Grant credit to this organization' });
    await form.getByLabel('Amount (USD)').fill('5');
    await form.getByRole('button', { name: 'Grant credit' }).click();
    await page.getByTestId('balance').getByText('$5.00', { exact: true }).waitFor();
    await page.getByTestId('step-credit').and(page.locator('[data-done="true"]')).waitFor();
    await shot('overview-granted');
    // The grant form is gone with the step done; on the credits page the amount is empty too (below).
    assert((await page.getByRole('form', { name: 'Grant credit to this organization' }).count()) === 0, 'the grant form stays after the credit arrived');
  });

  let firstKey = '';
  test('follows "Create a key" from the overview; the new key comes with a first request to paste', async () => {
    await page.getByTestId('step-key').getByRole('link', { name: 'Create a key' }).click();
    await page.waitForURL(`${dash}/keys`);
    firstKey = await createApiKey(page, 'first key', { dismiss: false });
    const request = page.getByTestId('new-key-request');
    await request.waitFor();
    assert(((await request.textContent()) ?? '').includes(firstKey), 'the first request does not carry the new key');
    await shot('keys-first-request');
  });

  test('the first request, pasted into a shell exactly as the page shows it, succeeds: a WAV file', async () => {
    const command = (await page.getByTestId('new-key-request').textContent()) ?? '';
    const work = join(tmp, 'first-request');
    mkdirSync(work, { recursive: true });
    execFileSync('bash', ['-c', command], { cwd: work, stdio: 'pipe', timeout: 30_000 });
    const wav = readFileSync(join(work, 'hello.wav'));
    assert(
      wav.subarray(0, 4).toString('latin1') === 'RIFF' && wav.length > 8_000,
      `hello.wav is ${wav.length} bytes: ${wav.subarray(0, 120).toString('utf8')}`,
    );
    await page.getByRole('button', { name: 'Done, I have stored it' }).click();
  });

  test('back on the overview: the list is done, and the usage shows the request', async () => {
    await mainNav(page, 'Overview').click();
    await page.waitForURL(`${dash}/`);
    const total = page.getByTestId('overview-usage-total');
    await total.waitFor();
    assert(
      /^\$0\.\d{2,6}$/.test(((await total.textContent()) ?? '').trim()) && (await total.textContent())?.trim() !== '$0.00',
      `overview usage: ${await total.textContent()}`,
    );
    assert((await page.getByTestId('getting-started').count()) === 0, 'the get-started list is still shown after the first request');
    assert((await page.getByTestId('overview-usage').getByTestId('usage-bar').count()) >= 1, 'no bar in the overview chart');
    await shot('overview-started');
  });

  test('the generated session secret is stored with mode 0600', async () => {
    const mode = statSync(join(dataDir, 'nextauth-secret')).mode & 0o777;
    assert(mode === 0o600, `nextauth-secret has mode ${mode.toString(8)}`);
  });

  test('a duplicate sign-up is refused with a clear message', async () => {
    const res = await fetch(`${dash}/api/trpc/auth.signUp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: USER.email.toUpperCase(), password: USER.password }),
    });
    const body = (await res.json()) as { error?: { message?: string } };
    assert(res.status === 409, `status ${res.status}`);
    assert(body.error?.message?.includes('already exists'), `message: ${body.error?.message}`);
  });

  test('creates a key and shows the full key once', async () => {
    await mainNav(page, 'API keys').click();
    await page.waitForURL(`${dash}/keys`);
    apiKey = await createApiKey(page, KEY_NAME, { dismiss: false });
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

  test('the gateway accepts the key: GET /v1/models answers 200', async () => {
    const res = await gatewayModels(apiKey);
    const body = (await res.json()) as { object?: string };
    assert(res.status === 200, `status ${res.status}: ${JSON.stringify(body)}`);
    assert(body.object === 'list', `body ${JSON.stringify(body)}`);
  });

  test('revokes the key in the page after a confirmation', async () => {
    const row = page.getByTestId('key-row').filter({ hasText: KEY_NAME });
    await row.getByRole('button', { name: `Revoke key ${KEY_NAME}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
    await dialog.waitFor();
    await shot('keys-revoke-confirm');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await row.getByTestId('key-status').getByText('Revoked', { exact: true }).waitFor();
    // The date it was revoked sits with its status, not in the Actions column.
    await row.getByTestId('key-status').getByTestId('key-revoked-at').waitFor();
    await shot('keys-revoked');
  });

  test('a long key name wraps inside the revoke dialog, on a desktop and on a phone', async () => {
    const longName = `${'agent-'.repeat(15)}with-no-spaces`.slice(0, 100);
    await createApiKey(page, longName);
    for (const size of [null, { width: 390, height: 844 }]) {
      if (size) await page.setViewportSize(size);
      await page
        .getByTestId('key-row')
        .filter({ hasText: longName })
        .getByRole('button', { name: `Revoke key ${longName}` })
        .click();
      const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
      await dialog.waitFor();
      const overflow = await dialog.evaluate((el) => {
        const box = el.getBoundingClientRect();
        return [...el.querySelectorAll('*')].some((child) => child.getBoundingClientRect().right > box.right + 0.5) || el.scrollWidth > el.clientWidth;
      });
      assert(!overflow, `the long key name runs out of the dialog at ${size ? 'phone' : 'desktop'} width`);
      await shot(size ? 'phone-keys-revoke-long-name' : 'keys-revoke-long-name');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('the gateway refuses the revoked key: 401 api_key_disabled', async () => {
    const res = await gatewayModels(apiKey);
    const body = (await res.json()) as { error?: { code?: string; type?: string } };
    assert(res.status === 401, `status ${res.status}: ${JSON.stringify(body)}`);
    assert(body.error?.code === 'api_key_disabled', `body ${JSON.stringify(body)}`);
  });

  test('a new key is listed on the gateway default rate limit, 600/min (default)', async () => {
    limitedKey = await createApiKey(page, LIMITED_KEY_NAME);
    assert(limitedKey !== apiKey, 'the same key twice');
    const row = page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME });
    await row.getByTestId('key-rate-limit').getByText('600/min (default)', { exact: true }).waitFor();
    // A revoked key keeps showing its limit but offers no control to change it.
    const revoked = page.getByTestId('key-row').filter({ hasText: KEY_NAME }).filter({ hasNotText: LIMITED_KEY_NAME });
    await revoked.getByTestId('key-rate-limit').getByText('600/min (default)', { exact: true }).waitFor();
    assert((await revoked.getByRole('button', { name: /Change rate limit/ }).count()) === 0, 'a revoked key offers a rate limit control');
  });

  test('the platform admin sets the key to 2/min in the page, by keyboard, after an invalid value is refused', async () => {
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

  test('the gateway applies 2/min to the key: the 3rd request within the minute is 429 rate_limit_exceeded', async () => {
    // The gateway (a process of its own, on this machine's clock) counts fixed windows aligned to
    // the clock minute. The key's requests go until the first refusal: they take milliseconds, so
    // they almost always fall in one minute and the refusal is the 3rd; when a minute turned
    // meanwhile, each of the two minutes admits at most 2 before the refusal comes.
    const answers: Array<{ status: number; code?: string; retryAfter: string | null }> = [];
    const firstMinute = Math.floor(Date.now() / 60_000);
    while (answers.length < 5 && answers.at(-1)?.status !== 429) {
      const res = await gatewayModels(limitedKey);
      const body = (await res.json()) as { error?: { code?: string } };
      answers.push({ status: res.status, code: body.error?.code, retryAfter: res.headers.get('retry-after') });
    }
    const minutes = Math.floor(Date.now() / 60_000) - firstMinute + 1;
    const summary = `${JSON.stringify(answers)} within ${minutes} clock minute(s)`;
    const refused = answers.at(-1)!;
    const admitted = answers.slice(0, -1);
    assert(refused.status === 429 && refused.code === 'rate_limit_exceeded', `no request was refused: ${summary}`);
    assert(
      admitted.every((a) => a.status === 200),
      `a request before the refusal was not admitted: ${summary}`,
    );
    assert(admitted.length >= 2 && admitted.length <= 2 * minutes, `not 2 admitted per minute before the refusal: ${summary}`);
    assert(Number(refused.retryAfter) >= 1 && Number(refused.retryAfter) <= 60, `Retry-After: ${refused.retryAfter}`);
  });

  test('resetting the key to the default in the page lifts the limit on its next request', async () => {
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

  test("an owner creates a key with a spend limit of $0.00004 a day, an expiry and one model from the form's limits; the list shows them", async () => {
    await page.getByText('Limits (optional): spend limit, expiry, models').click();
    const form = page.getByTestId('key-limits-form');
    await form.getByLabel('Spend limit (USD)').fill('0.00004');
    await form.getByLabel('Per').selectOption('day');
    // In the browser's time zone, as typed: the list shows the same wall-clock time back.
    await form.getByLabel('Expires').fill('2099-01-31T18:00');
    await form.getByRole('checkbox', { name: /local-flite/ }).check();
    await shot('keys-limits-form');
    budgetKey = await createApiKey(page, BUDGET_KEY_NAME);
    const limits = page.getByTestId('key-row').filter({ hasText: BUDGET_KEY_NAME }).getByTestId('key-limits');
    await limits.getByText('$0.00 of $0.00004 spent today (UTC)', { exact: true }).waitFor();
    await limits.getByText(/^Expires Jan 31, 2099, 6:00\s?PM$/).waitFor();
    await limits.getByText('Models: local-flite', { exact: true }).waitFor();
    // Keys made without limits show none.
    assert(
      (await page.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME }).getByTestId('key-limits').count()) === 0,
      'a key without limits shows some',
    );
    await shot('keys-limits-listed');
  });

  test("the gateway enforces them: another model is 403 model_not_allowed, the second synthesis over the day's limit 402 key_budget_exceeded; the page shows the spend", async () => {
    const tts = (model: string, voice: string) =>
      fetch(`${api}/tts/bytes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${budgetKey}`, 'content-type': 'application/json' },
        // 12 characters at $0.000002: $0.000024 of the $0.00004.
        body: JSON.stringify({
          model_id: model,
          transcript: 'Hello there.',
          voice: { mode: 'id', id: voice },
          output_format: { container: 'wav', sample_rate: 16000 },
        }),
      });
    const other = await tts('local-espeak', 'espeak-en-us-f');
    const otherBody = (await other.json()) as { error?: { code?: string; param?: string } };
    assert(other.status === 403 && otherBody.error?.code === 'model_not_allowed', `another model: ${other.status} ${JSON.stringify(otherBody)}`);
    const first = await tts('local-flite', 'flite-slt');
    const audio = Buffer.from(await first.arrayBuffer());
    assert(first.status === 200 && audio.subarray(0, 4).toString() === 'RIFF', `first synthesis: ${first.status} ${audio.subarray(0, 300).toString()}`);
    const second = await tts('local-flite', 'flite-slt');
    const secondBody = (await second.json()) as { error?: { code?: string; type?: string } };
    assert(second.status === 402 && secondBody.error?.code === 'key_budget_exceeded', `second synthesis: ${second.status} ${JSON.stringify(secondBody)}`);
    const models = (await (await gatewayModels(budgetKey)).json()) as { data?: { id: string }[] };
    assert(JSON.stringify(models.data?.map((m) => m.id)) === '["local-flite"]', `GET /v1/models: ${JSON.stringify(models)}`);
    await page.reload();
    await page
      .getByTestId('key-row')
      .filter({ hasText: BUDGET_KEY_NAME })
      .getByTestId('key-limits')
      .getByText('$0.000024 of $0.00004 spent today (UTC)', { exact: true })
      .waitFor();
    await shot('keys-limits-spent');
  });

  test("the owner edits the key's limits in the page (filled in with the key's): $1 a month, espeak too, no expiry; the list counts the month's spend, and the gateway serves what it refused", async () => {
    const row = page.getByTestId('key-row').filter({ hasText: BUDGET_KEY_NAME });
    await row.getByRole('button', { name: `Edit limits of key ${BUDGET_KEY_NAME}` }).click();
    const editor = page.getByRole('form', { name: `Limits of key ${BUDGET_KEY_NAME}` });
    const limit = editor.getByLabel('Spend limit (USD)');
    assert((await limit.inputValue()) === '0.00004', `the limit field shows ${await limit.inputValue()}`);
    assert((await editor.getByLabel('Per').inputValue()) === 'day', 'the window is not the key’s');
    assert(
      (await editor.getByLabel('Expires').inputValue()) === '2099-01-31T18:00',
      `the expiry field shows ${await editor.getByLabel('Expires').inputValue()}`,
    );
    assert(await editor.getByRole('checkbox', { name: /local-flite/ }).isChecked(), 'local-flite is not ticked');
    await limit.fill('1');
    await editor.getByLabel('Per').selectOption('month');
    await editor.getByLabel('Expires').fill('');
    await editor.getByRole('checkbox', { name: /local-espeak/ }).check();
    await shot('keys-limits-edit');
    await editor.getByRole('button', { name: 'Save limits' }).click();
    await editor.waitFor({ state: 'detached' });
    const limits = row.getByTestId('key-limits');
    // The month's spend is counted from the ledger: the synthesis made under the day's limit.
    await limits.getByText('$0.000024 of $1.00 spent this month (UTC)', { exact: true }).waitFor();
    await limits.getByText('Models: local-espeak, local-flite', { exact: true }).waitFor();
    assert((await limits.getByText(/^Expires/).count()) === 0, 'the key still shows an expiry');
    for (const [model, voice] of [
      ['local-flite', 'flite-slt'],
      ['local-espeak', 'espeak-en-us-f'],
    ]) {
      const res = await fetch(`${api}/tts/bytes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${budgetKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model_id: model,
          transcript: 'Hello there.',
          voice: { mode: 'id', id: voice },
          output_format: { container: 'wav', sample_rate: 16000 },
        }),
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      assert(res.status === 200 && bytes.subarray(0, 4).toString() === 'RIFF', `${model} after the edit: ${res.status} ${bytes.subarray(0, 300).toString()}`);
    }
    // On a phone the editor fits the screen; Escape closes it without saving.
    await page.setViewportSize(PHONE);
    await row.getByRole('button', { name: `Edit limits of key ${BUDGET_KEY_NAME}` }).click();
    await editor.waitFor();
    await assertFitsWidth(page, 'the keys page with the limits editor at 390px');
    await shot('keys-limits-edit-phone');
    await editor.getByLabel('Spend limit (USD)').press('Escape');
    await editor.waitFor({ state: 'detached' });
    await page.setViewportSize(DESKTOP);
  });

  test('the form refuses an expiry in the past with the reason, and makes no key', async () => {
    const rows = await page.getByTestId('key-row').count();
    await page.getByText('Limits (optional): spend limit, expiry, models').click();
    await page.getByTestId('key-limits-form').getByLabel('Expires').fill('2020-01-01T00:00');
    await page.getByLabel('Key name').fill('e2e already expired');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByText(/^The expiry must be in the future/).waitFor();
    assert((await page.getByTestId('key-row').count()) === rows, 'a key was made');
    await page.reload();
  });

  test('the first user is platform admin: grants credit, balance and ledger follow; the form clears, so a second click grants nothing', async () => {
    await mainNav(page, 'Credits').click();
    await page.waitForURL(`${dash}/credits`);
    // The overview's grant and the first request are in the ledger already.
    await page.getByTestId('ledger-row').filter({ hasText: 'first credit (from the overview)' }).waitFor();
    const grant = page.getByRole('region', { name: 'Grant credits' });
    await grant.getByLabel('Amount (USD)').fill('5.25');
    await grant.getByLabel('Note (optional)').fill('e2e grant');
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    const done = grant.getByText(/^Granted \$5\.25 to E2E Tester's org\. New balance: \$(\d+\.\d{2})\.$/);
    await done.waitFor();
    const balance = /New balance: (\$\d+\.\d{2})/.exec((await done.textContent()) ?? '')![1]!;
    await page.getByTestId('credits-balance').getByText(balance).waitFor();
    const row = page.getByTestId('ledger-row').filter({ hasText: 'e2e grant' });
    await row.getByText('+$5.25', { exact: true }).waitFor();
    assert((await grant.getByLabel('Amount (USD)').inputValue()) === '', 'the amount stays filled after the grant');
    assert((await grant.getByLabel('Note (optional)').inputValue()) === '', 'the note stays filled after the grant');
    await shot('credits');
    // A second click has no amount to send: the form stops it (the field is required).
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    assert(
      await grant.getByLabel('Amount (USD)').evaluate((el) => (el as HTMLInputElement).validity.valueMissing),
      'the empty amount is not what stopped the second grant',
    );
    assert((await page.getByTestId('ledger-row').filter({ hasText: 'e2e grant' }).count()) === 1, 'a second click granted again');
    await mainNav(page, 'Overview').click();
    await page.getByTestId('balance').getByText(balance).waitFor();
  });

  test('removing credit is an explicit adjustment: a negative amount asks for a confirmation first', async () => {
    await mainNav(page, 'Credits').click();
    const grant = page.getByRole('region', { name: 'Grant credits' });
    await grant.getByLabel('Amount (USD)').fill('-1');
    await grant.getByLabel('Note (optional)').fill('e2e removal');
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    const dialog = page.getByRole('dialog', { name: 'Remove credit?' });
    await dialog.getByText("This takes $1.00 from E2E Tester's org.").waitFor();
    await shot('credits-remove-confirm');
    // Cancel: nothing removed.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert((await page.getByTestId('ledger-row').filter({ hasText: 'e2e removal' }).count()) === 0, 'cancelling removed credit');
    await grant.getByRole('button', { name: 'Grant credits' }).click();
    await dialog.getByRole('button', { name: 'Remove credit' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await grant.getByText(/^Removed \$1\.00 from E2E Tester's org\. New balance: \$\d+\.\d{2}\.$/).waitFor();
    await page.getByTestId('ledger-row').filter({ hasText: 'e2e removal' }).getByText('-$1.00', { exact: true }).waitFor();
  });

  test('ledger descriptions are shown whole, on a desktop and on a phone', async () => {
    for (const size of [null, { width: 390, height: 844 }]) {
      if (size) await page.setViewportSize(size);
      const description = page.getByTestId('ledger-row').filter({ hasText: 'first credit (from the overview)' }).getByTestId('ledger-description');
      const text = ((await description.textContent()) ?? '').trim();
      assert(text === `first credit (from the overview) (by ${USER.email})`, `the description reads ${text}`);
      const cut = await description.evaluate((el) => el.scrollWidth > el.clientWidth || getComputedStyle(el).textOverflow === 'ellipsis');
      assert(!cut, `the description is cut off at ${size ? 'phone' : 'desktop'} width`);
    }
    await shot('phone-credits-ledger');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('the owner sees themselves as the only member and cannot demote or remove the last owner', async () => {
    await mainNav(page, 'Members').click();
    await page.waitForURL(`${dash}/members`);
    const self = page.getByTestId('member-row').filter({ hasText: USER.email });
    await self.getByTestId('member-role').getByText('Owner', { exact: true }).waitFor();
    await self.getByText('The last owner: make someone else an owner first.').waitFor();
    assert(await self.getByRole('button', { name: /^Make .* a member$/ }).isDisabled(), 'the last owner can be demoted in the page');
    assert(await self.getByRole('button', { name: 'Leave this organization' }).isDisabled(), 'the last owner can leave in the page');
  });

  let member: BrowserSession | undefined;
  test.afterAll(() => member?.close());
  test('a second user signs up in another browser, with a personal org of their own', async ({ browser: chromium }) => {
    member = await openBrowser(chromium, { screenshotPrefix: 'member-' });
    await signUp(member.page, dash, MEMBER);
    await member.page.getByRole('heading', { level: 1, name: "E2E Member's org" }).waitFor();
    // One org: its name, no switch.
    await member.page.getByTestId('active-org').getByText("E2E Member's org").waitFor();
  });

  let inviteUrl = '';
  test('the owner adds the second user by email: their address is unproven, so they get an invite link, not a membership', async () => {
    const add = page.getByRole('region', { name: 'Add a member' });
    await add.getByLabel('Email').fill(MEMBER.email.toUpperCase());
    await add.getByLabel('Role').selectOption('member');
    await add.getByRole('button', { name: 'Add', exact: true }).click();
    const result = add.getByTestId('add-member-result');
    await result.getByText(`Invitation for ${MEMBER.email}`).waitFor();
    inviteUrl = await result.getByTestId('invite-link').inputValue();
    assert(inviteUrl.startsWith(`${dash}/invite/`), `invite link: ${inviteUrl}`);
    assert((await page.getByTestId('member-row').filter({ hasText: MEMBER.email }).count()) === 0, 'the unverified account joined without the link');
    await page.getByTestId('invitation-row').filter({ hasText: MEMBER.email }).waitFor();
    await shot('members-invite-link');

    await add.getByLabel('Email').fill(INVITEE);
    await add.getByRole('button', { name: 'Add', exact: true }).click();
    await result.getByText(`Invitation for ${INVITEE}`).waitFor();
    await page.getByTestId('invitation-row').filter({ hasText: INVITEE }).waitFor();
    await shot('members');
  });

  test('the second user opens the link signed in, sees the offer and joins', async () => {
    const m = member!.page;
    await m.goto(inviteUrl);
    await m.getByTestId('invitation-offer').getByText("E2E Tester's org").waitFor();
    await m.getByText(`Signed in as ${MEMBER.email}`).waitFor();
    await member!.shot('invite');
    await m.getByRole('button', { name: "Join E2E Tester's org" }).click();
    await m.getByRole('heading', { name: "You joined E2E Tester's org" }).waitFor();
    // Single use: opening it again says so.
    await m.goto(inviteUrl);
    await m.getByText(/This invite link is not valid/).waitFor();
    await page.reload();
    const row = page.getByTestId('member-row').filter({ hasText: MEMBER.email });
    await row.getByTestId('member-role').getByText('Member', { exact: true }).waitFor();
    await row.getByText('E2E Member').waitFor();
  });

  let ownerKeyId = '';
  test("the member acts for the owner's org (joining switched to it) and sees its keys, without create or revoke", async () => {
    const m = member!.page;
    await m.goto(`${dash}/keys`);
    const switcher = m.getByTestId('org-switcher');
    const chosen = await switcher.locator('option:checked').textContent();
    assert(chosen === "E2E Tester's org (member)", `the switcher shows ${chosen}`);
    await m.getByTestId('keys-member-note').getByText('Only owners can create or revoke keys').waitFor();
    const row = m.getByTestId('key-row').filter({ hasText: LIMITED_KEY_NAME });
    await row.getByTestId('key-status').getByText('Active', { exact: true }).waitFor();
    ownerKeyId = (await row.getAttribute('data-key-id')) ?? '';
    assert(ownerKeyId.startsWith('key_'), `key id ${ownerKeyId}`);
    assert((await m.getByRole('button', { name: 'Create key' }).count()) === 0, 'a member is offered Create key');
    assert((await m.getByRole('button', { name: /^Revoke key/ }).count()) === 0, 'a member is offered Revoke');
    assert((await m.getByTestId('new-api-key').count()) === 0, 'a member sees a new-key panel');
    await member!.shot('keys');
  });

  test('the server refuses the member as well: keys.create and keys.revoke answer 403, the key keeps working', async () => {
    // The member's own browser session and org cookie, calling the procedures the page hides.
    const request = member!.context.request;
    for (const [procedure, input] of [
      ['keys.create', { name: 'sneaky' }],
      ['keys.revoke', { id: ownerKeyId }],
    ] as const) {
      const res = await request.post(`${dash}/api/trpc/${procedure}`, { data: input, headers: { 'content-type': 'application/json' } });
      const body = (await res.json()) as { error?: { message?: string; data?: { code?: string } } };
      assert(res.status() === 403 && body.error?.data?.code === 'FORBIDDEN', `${procedure}: ${res.status()} ${JSON.stringify(body)}`);
      assert(body.error?.message?.startsWith("Only owners of E2E Tester's org can do this."), `${procedure}: ${body.error?.message}`);
    }
    const res = await gatewayModels(limitedKey);
    assert(res.status === 200, `the owner's key answers ${res.status} after the member's attempt`);
    await page.goto(`${dash}/keys`);
    assert((await page.getByTestId('key-row').filter({ hasText: 'sneaky' }).count()) === 0, 'the member created a key');
  });

  test('choosing an org in the switcher switches at once: the header and the page name the same org', async () => {
    const m = member!.page;
    await m.goto(`${dash}/`);
    await m.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
    await m.getByTestId('org-switcher').selectOption({ label: "E2E Member's org (owner)" });
    // No separate "Switch" button: the page reloads for the chosen org.
    await m.getByRole('heading', { level: 1, name: "E2E Member's org" }).waitFor();
    assert(
      (await m.getByTestId('org-switcher').locator('option:checked').textContent()) === "E2E Member's org (owner)",
      'the header names another org than the page',
    );
    assert((await m.getByRole('button', { name: 'Switch' }).count()) === 0, 'a Switch button is still there');
    await member!.shot('org-switched');
  });

  test('a non-admin at $0 is told who adds credit and what to send them', async () => {
    const m = member!.page;
    const path = m.getByTestId('no-credit-path');
    await path.getByText('Credit is added by an operator of this instance (a platform admin)').waitFor();
    const orgId = await path.getByTestId('org-id').inputValue();
    assert(/^org_/.test(orgId), `the org id shown is ${orgId}`);
    assert((await m.getByRole('form', { name: 'Grant credit to this organization' }).count()) === 0, 'a non-admin is offered a grant form');
    await member!.shot('overview-zero-non-admin');
    // Back to the owner's org for what follows.
    await m.getByTestId('org-switcher').selectOption({ label: "E2E Tester's org (member)" });
    await m.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
  });

  test('the member sees the members page without the owner controls', async () => {
    const m = member!.page;
    await mainNav(m, 'Members').click();
    await m.waitForURL(`${dash}/members`);
    await m.getByTestId('members-member-note').waitFor();
    await m.getByTestId('member-row').filter({ hasText: USER.email }).waitFor();
    assert((await m.getByRole('region', { name: 'Add a member' }).count()) === 0, 'a member is offered Add a member');
    assert((await m.getByRole('button', { name: /^(Remove|Make) / }).count()) === 0, 'a member is offered role or removal buttons');
    await member!.shot('members');
    assert(member!.errors.length === 0, member!.errors.join('\n'));
  });

  test('"New organization" in the header makes an org the user owns and switches to it', async () => {
    const m = member!.page;
    await m.getByRole('button', { name: 'New organization' }).click();
    const dialog = m.getByRole('dialog', { name: 'New organization' });
    await dialog.getByRole('button', { name: 'Create organization' }).click();
    // An empty name is stopped before it is sent.
    assert(await dialog.getByLabel('Name').evaluate((el) => (el as HTMLInputElement).validity.valueMissing), 'an empty name was sent');
    await dialog.getByLabel('Name').fill('E2E Side project');
    await member!.shot('new-org');
    await dialog.getByRole('button', { name: 'Create organization' }).click();
    await m.getByRole('heading', { level: 1, name: 'E2E Side project' }).waitFor();
    const chosen = await m.getByTestId('org-switcher').locator('option:checked').textContent();
    assert(chosen === 'E2E Side project (owner)', `the switcher shows ${chosen}`);
    await mainNav(m, 'Members').click();
    const self = m.getByTestId('member-row').filter({ hasText: MEMBER.email });
    await self.getByTestId('member-role').getByText('Owner', { exact: true }).waitFor();
    assert((await m.getByTestId('member-row').count()) === 1, 'the new org has other members');
    // Back to the owner's org for what follows.
    await m.getByTestId('org-switcher').selectOption({ label: "E2E Tester's org (member)" });
    await m.getByTestId('member-row').filter({ hasText: USER.email }).waitFor();
  });

  test('an unknown address is a real 404 page with the way back', async () => {
    const res = await page.goto(`${dash}/no-such-page`);
    assert(res?.status() === 404, `status ${res?.status()}`);
    await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
    const pages = page.getByRole('navigation', { name: 'Pages' });
    await pages.getByRole('link', { name: 'Voices →' }).waitFor();
    // The same pages as the header's nav: Models too, for a platform admin (and not for a member).
    await pages.getByRole('link', { name: 'Models →' }).waitFor();
    const memberPage = member!.page;
    await memberPage.goto(`${dash}/no-such-page`);
    await memberPage.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Voices →' }).waitFor();
    await memberPage.waitForLoadState('networkidle');
    assert((await memberPage.getByRole('link', { name: 'Models →' }).count()) === 0, 'a member is offered Models');
    await shot('not-found');
    await pages.getByRole('link', { name: 'API keys →' }).click();
    await page.waitForURL(`${dash}/keys`);
  });

  test('a favicon: the page names it, it is served, and loading a page fails no request', async () => {
    const failed: string[] = [];
    const onResponse = (r: { status(): number; url(): string }) => void (r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
    page.on('response', onResponse);
    await page.goto(`${dash}/`);
    await page.waitForLoadState('networkidle');
    page.off('response', onResponse);
    assert(failed.length === 0, `failed requests: ${failed.join(', ')}`);
    const icons = await page.locator('link[rel="icon"]').evaluateAll((links) => links.map((l) => (l as HTMLLinkElement).href));
    assert(icons.some((h) => h.endsWith('/favicon.svg')) && icons.some((h) => h.endsWith('/favicon.ico')), `icons: ${icons.join(', ')}`);
    for (const [path, type] of [
      ['/favicon.ico', /^image\/(x-icon|vnd\.microsoft\.icon)/],
      ['/favicon.svg', /^image\/svg\+xml/],
    ] as const) {
      const res = await fetch(`${dash}${path}`);
      assert(res.status === 200 && type.test(res.headers.get('content-type') ?? ''), `${path}: ${res.status} ${res.headers.get('content-type')}`);
    }
    await shot('favicon-overview');
  });

  test('on a phone the header is one row with a Menu button that opens every page', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${dash}/`);
      const header = page.getByRole('banner');
      const menu = header.getByRole('button', { name: 'Menu' });
      await menu.waitFor();
      const height = await header.evaluate((el) => el.getBoundingClientRect().height);
      assert(height <= 64, `the closed header is ${height}px tall: more than one row`);
      assert(!(await mainNav(page, 'Overview').isVisible()), 'the page list shows before the menu is opened');
      assert((await menu.getAttribute('aria-expanded')) === 'false', 'the menu says it is open');
      await shot('phone-header');
      await menu.click();
      assert((await menu.getAttribute('aria-expanded')) === 'true', 'the menu does not say it is open');
      const labels = ['Overview', 'API keys', 'Phone', 'Credits', 'Dictionaries', 'Voices', 'Playground', 'Usage', 'Logs', 'Members', 'Models'];
      for (const label of labels) {
        const link = mainNav(page, label);
        await link.waitFor();
        const box = (await link.boundingBox())!;
        assert(box.x >= 0 && box.x + box.width <= 390, `${label} is off-screen: ${JSON.stringify(box)}`);
      }
      await header.getByRole('button', { name: 'Sign out' }).waitFor();
      await shot('phone-menu-open');
      await mainNav(page, 'Usage').click();
      await page.waitForURL(`${dash}/usage`);
      await mainNav(page, 'Usage').waitFor({ state: 'hidden' });
      assert((await menu.getAttribute('aria-expanded')) === 'false', 'the menu stays open after choosing a page');
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  test('pages fit a phone-width screen', async () => {
    await assertPagesFitPhone(browser, dash, ['/', '/keys', '/credits', '/members'], (path) => `phone${path === '/' ? '-overview' : path.replace('/', '-')}`);
  });

  test('signs out, and the dashboard is closed again', async () => {
    await page.goto(`${dash}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${dash}/signin`);
    await page.goto(`${dash}/credits`);
    await page.waitForURL(`${dash}/signin`);
  });

  test('a wrong password is refused; the right one signs in, and a callbackUrl to another site lands on the dashboard', async () => {
    // %2F%09%2Fevil.example is "/<tab>/evil.example": a browser drops the tab and reads //evil.example.
    await page.goto(`${dash}/signin?callbackUrl=%2F%09%2Fevil.example`);
    await page.getByLabel('Email').fill(USER.email);
    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Incorrect email or password.').waitFor();
    await page.getByLabel('Password').fill(USER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${dash}/`);
    await page.getByRole('heading', { level: 1, name: "E2E Tester's org" }).waitFor();
  });

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
