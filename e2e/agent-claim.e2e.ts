// Black-box test of agent self-registration as an agent and its user would go through it: a
// migrated throw-away SQLite database, `next start` and `svc gateway` on free ports, Debian's
// Chromium through @playwright/test. The agent side speaks HTTP to the gateway's {auth_url}
// routes; the user side is the real dashboard page at the verification_uri.
//   1. anonymous: register (with a name), trial key, start a claim, the user signs up from the
//      claim page, sees who the agent is (name, software, when, network) and confirms the code, the poll gets a new key, the trial key is refused, the new one works;
//   2. service_auth: the code entered from the wrong account gets the answer any wrong code gets
//      (nothing says it is live for someone else), the user switches to (signs up) the right
//      account from the page, makes a second org, chooses which of the two pays and confirms;
//      the key works and is listed in the chosen org;
//   3. a user denies a claim: the agent's poll ends with invalid_grant;
//   4. five wrong entries lock a code: the page counts the tries down, then says the code is
//      locked (even the right one) and to ask the agent for a new code, which works.
// The keys page names an agent's key by its agent and who authorised it.
//
//   npx playwright test e2e/agent-claim.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Each step is a test of one serial chain: after a failure the rest are skipped.
// Processes and temporary directories are removed at the end, also after a failure and on
// Ctrl-C (e2e/support/).
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type Page } from '@playwright/test';
import { fillSignUp, PASSWORD, submitSignUp } from './support/accounts.ts';
import { assertFitsWidth, DESKTOP, PHONE, type BrowserSession } from './support/browser.ts';
import { setUpStory } from './support/story.ts';

const GRANT_JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const GRANT_CLAIM = 'urn:vendor:agent-auth:grant-type:claim';
const ANON_EMAIL = 'anon.agent.owner@example.com';
const SVC_EMAIL = 'service.agent.owner@example.com';
/** The personal org a sign-up without a name gets. */
const SVC_ORG = "service.agent.owner's org";
const BILLING_ORG = 'E2E Agent billing';
const AGENT_NAME = 'E2E Support Bot';

interface Json {
  [key: string]: unknown;
}

test.describe.serial('agent claim', () => {
  // The URLs the services announce are the ones this test reaches them at: the issuer must
  // equal the discovery URL, and verification_uri must open the real dashboard page.
  const story = setUpStory({ name: 'claim', env: ({ dash, api }) => ({ PUBLIC_BASE_URL: api, DASHBOARD_URL: dash }) });
  let dash = '';
  let api = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];
  test.beforeAll(() => {
    ({ dash, api } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
  });

  // The agent's side: plain HTTP, as any agent would do it.
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
    const res = await fetch(`${api}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(params).toString(),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const models = (key: string) => fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  const errorCode = (body: Json) => (body.error as { code?: string } | undefined)?.code;

  let verificationUri = '';
  let anon: { claimToken: string; trialKey: string; code: string; registrationId: string } | undefined;
  let svc: { claimToken: string; code: string } | undefined;

  test('discovery names the dashboard claim page and both identity types', async () => {
    const res = await fetch(`${api}/.well-known/oauth-authorization-server`);
    const body = (await res.json()) as { issuer: string; agent_auth: { verification_uri: string; identity_types_supported: string[] } };
    assert(res.status === 200, `status ${res.status}`);
    assert(body.issuer === api, `issuer ${body.issuer}`);
    assert(body.agent_auth.verification_uri === `${dash}/claim`, `verification_uri ${body.agent_auth.verification_uri}`);
    assert(JSON.stringify(body.agent_auth.identity_types_supported) === '["anonymous","service_auth"]', JSON.stringify(body.agent_auth));
    verificationUri = body.agent_auth.verification_uri;
  });

  test('anonymous agent: registers, exchanges the assertion for a trial key that works, starts a claim', async () => {
    const reg = await postJson('/agent/identity', { type: 'anonymous', client_name: AGENT_NAME });
    assert(reg.status === 200, `register: ${JSON.stringify(reg)}`);
    const trial = await token({ grant_type: GRANT_JWT_BEARER, assertion: reg.body.identity_assertion as string });
    assert(trial.status === 200 && /^sk_svc_/.test(String(trial.body.access_token)), `jwt-bearer: ${JSON.stringify(trial)}`);
    assert((await models(trial.body.access_token as string)).status === 200, 'the trial key is refused');
    const claim = await postJson('/agent/identity/claim', { claim_token: reg.body.claim_token as string, email: ANON_EMAIL });
    const attempt = claim.body.claim_attempt as { user_code: string; verification_uri: string; interval: number; expires_in: number };
    assert(claim.status === 200 && /^\d{6}$/.test(attempt.user_code), `claim: ${JSON.stringify(claim)}`);
    assert(attempt.verification_uri === verificationUri && attempt.interval === 5 && attempt.expires_in === 600, JSON.stringify(attempt));
    anon = {
      claimToken: reg.body.claim_token as string,
      trialKey: trial.body.access_token as string,
      code: attempt.user_code,
      registrationId: reg.body.registration_id as string,
    };
    const pending = await token({ grant_type: GRANT_CLAIM, claim_token: anon.claimToken });
    assert(pending.status === 400 && errorCode(pending.body) === 'authorization_pending', `poll: ${JSON.stringify(pending)}`);
  });

  test('the user opens verification_uri signed out and is offered sign-in or sign-up', async () => {
    await page.goto(verificationUri);
    await page.getByRole('heading', { name: 'Authorise an agent' }).waitFor();
    await page.getByRole('link', { name: 'Sign in' }).waitFor();
    await shot('claim-signed-out');
    await page.getByRole('link', { name: 'Create account' }).click();
    await page.waitForURL(`${dash}/signup?callbackUrl=%2Fclaim`);
  });

  test('signs up with the claim email and comes back to the claim page', async () => {
    await fillSignUp(page, { name: 'Agent Owner', email: ANON_EMAIL, password: PASSWORD });
    await submitSignUp(page);
    await page.waitForURL(`${dash}/claim`);
    await page.getByText(`Signed in as ${ANON_EMAIL}`).waitFor();
  });

  test('a wrong code is refused with a clear message', async () => {
    await page.getByLabel('Code from the agent').fill(String((Number(anon!.code) + 1) % 1_000_000).padStart(6, '0'));
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByText('That code does not open a claim for your account.', { exact: false }).waitFor();
    await page.getByText('4 wrong entries left before the code waiting for', { exact: false }).waitFor();
  });

  test('enters the code and sees who the agent is (its name, its software, when and from which network it registered) and what is authorised: trial registration, email, access, the trial key that stops', async () => {
    await page.getByLabel('Code from the agent').fill(`${anon!.code.slice(0, 3)} ${anon!.code.slice(3)}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Authorise this agent?' }).waitFor();
    const details = page.getByTestId('claim-details');
    assert((await details.getByTestId('claim-agent-name').textContent()) === AGENT_NAME, 'the agent is not named');
    // Node's fetch names itself; the address is shown to its network only (the stack listens on loopback).
    assert(((await details.getByTestId('claim-user-agent').textContent()) ?? '').startsWith('Software: '), 'no software shown');
    assert(
      (await details.getByTestId('claim-network').textContent()) === '127.0.0.0/24',
      `network: ${await details.getByTestId('claim-network').textContent()}`,
    );
    await details.getByText('Registered', { exact: true }).waitFor();
    await details.getByText(anon!.registrationId).waitFor();
    await details.getByText('Anonymous agent on a trial key').waitFor();
    await details.getByText(ANON_EMAIL).waitFor();
    await details.getByText(/Full API access \(api\), billed to Agent Owner's org/).waitFor();
    await page.getByText(`${anon!.trialKey.slice(0, 11)}…`).waitFor();
    await shot('claim-review');
  });

  test('confirms; the page says the agent gets its key', async () => {
    await page.getByRole('button', { name: 'Authorise agent' }).click();
    await page.getByRole('heading', { name: 'Agent authorised' }).waitFor();
    await shot('claim-confirmed');
  });

  test("the agent's poll gets a new key that works; the trial key is refused with 401 api_key_disabled", async () => {
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

  test("the new key is listed on the user's API keys page with its agent and who authorised it, its name whole", async () => {
    await page.getByRole('link', { name: 'Go to API keys' }).click();
    await page.waitForURL(`${dash}/keys`);
    const row = page.getByTestId('key-row').filter({ hasText: `agent (${anon!.registrationId})` });
    await row.waitFor();
    const origin = (await row.getByTestId('key-origin').textContent()) ?? '';
    assert(
      origin.includes(`Anonymous agent for ${ANON_EMAIL}; authorised by ${ANON_EMAIL} on `) && origin.includes(anon!.registrationId),
      `the key's origin reads: ${origin}`,
    );
    // The whole name shows (it used to be cut: "agent (reg_5a65…").
    const name = row.getByTestId('key-name');
    assert((await name.textContent()) === `agent (${anon!.registrationId})`, `name: ${await name.textContent()}`);
    assert(await name.evaluate((el) => el.scrollWidth <= el.clientWidth + 1 && getComputedStyle(el).textOverflow !== 'ellipsis'), 'the name is cut');
    await shot('keys-agent');
  });

  test('service_auth agent: registers with a login_hint and gets the code in the registration record', async () => {
    const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: SVC_EMAIL });
    const claim = reg.body.claim as { user_code: string; verification_uri: string };
    assert(reg.status === 200 && reg.body.registration_type === 'service_auth' && /^\d{6}$/.test(claim.user_code), JSON.stringify(reg));
    assert(claim.verification_uri === verificationUri, claim.verification_uri);
    svc = { claimToken: reg.body.claim_token as string, code: claim.user_code };
  });

  test('the right code from the wrong account gets the uniform wrong-code answer and a way to switch', async () => {
    await page.goto(`${verificationUri}?code=${svc!.code}`);
    const input = page.getByLabel('Code from the agent');
    assert((await input.inputValue()) === svc!.code, 'the code from the link is not filled in');
    await page.getByRole('button', { name: 'Continue' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'That code does not open a claim for your account.' });
    await alert.getByText('only for the email address given to the agent', { exact: false }).waitFor();
    await shot('claim-wrong-account');
    await alert.getByRole('button', { name: 'Sign in with another account' }).click();
    await page.waitForURL(`${dash}/signin?callbackUrl=${encodeURIComponent(`/claim?code=${svc!.code}`)}`);
  });

  test('signs up with the login_hint address from the sign-in page and returns with the code filled in', async () => {
    await page.getByRole('link', { name: 'Create one' }).click();
    await page.waitForURL(`${dash}/signup?callbackUrl=${encodeURIComponent(`/claim?code=${svc!.code}`)}`);
    await fillSignUp(page, { email: SVC_EMAIL, password: PASSWORD });
    await submitSignUp(page);
    await page.waitForURL(`${dash}/claim?code=${svc!.code}`);
    await page.getByText(`Signed in as ${SVC_EMAIL}`).waitFor();
    assert((await page.getByLabel('Code from the agent').inputValue()) === svc!.code, 'the code is not filled in');
  });

  test('with a second org of their own, the user chooses which pays: the one they act for is offered first, the other is chosen', async () => {
    await page.goto(`${dash}/`);
    await page.getByRole('button', { name: 'New organization' }).click();
    const dialog = page.getByRole('dialog', { name: 'New organization' });
    await dialog.getByLabel('Name').fill(BILLING_ORG);
    await dialog.getByRole('button', { name: 'Create organization' }).click();
    await page.getByRole('heading', { level: 1, name: BILLING_ORG }).waitFor();
    await page.goto(`${verificationUri}?code=${svc!.code}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByTestId('claim-details').getByText('Agent registered for your email address').waitFor();
    const payer = page.getByLabel('Organization that pays and gets the key');
    const offered = await payer.locator('option').allTextContents();
    assert(JSON.stringify(offered) === JSON.stringify([BILLING_ORG, SVC_ORG]), `offered: ${JSON.stringify(offered)}`);
    await payer.selectOption({ label: SVC_ORG });
    await page.getByTestId('claim-details').getByText(`billed to ${SVC_ORG}`).waitFor();
    await shot('claim-choose-org');
  });

  test('confirms the service_auth claim for the chosen org; the poll gets a key that works, listed in that org and not the other', async () => {
    await page.getByRole('button', { name: 'Authorise agent' }).click();
    await page.getByRole('heading', { name: 'Agent authorised' }).waitFor();
    await page.getByText(`The key belongs to ${SVC_ORG}`, { exact: false }).waitFor();
    const res = await token({ grant_type: GRANT_CLAIM, claim_token: svc!.claimToken });
    assert(res.status === 200, `poll: ${JSON.stringify(res)}`);
    assert((await models(res.body.access_token as string)).status === 200, 'the key is refused');
    // Acting for the billing org: not there; in the chosen org: there.
    await page.goto(`${dash}/keys`);
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await page.getByText('No keys yet').waitFor();
    await page.getByTestId('org-switcher').selectOption({ label: `${SVC_ORG} (owner)` });
    await page.getByTestId('key-row').filter({ hasText: 'agent (' }).waitFor();
  });

  test('five wrong entries lock the code: the page counts the tries down, then says it is locked (even for the right code); a new code works', async () => {
    // An anonymous agent whose claim is for the signed-in user's address.
    const reg = await postJson('/agent/identity', { type: 'anonymous' });
    const claim = await postJson('/agent/identity/claim', { claim_token: reg.body.claim_token as string, email: SVC_EMAIL });
    const code = (claim.body.claim_attempt as { user_code: string }).user_code;
    await page.goto(verificationUri);
    const input = page.getByLabel('Code from the agent');
    const tries = page.getByTestId('claim-tries');
    const counted: string[] = [];
    for (let i = 1; i <= 5; i++) {
      await input.fill(String((Number(code) + i) % 1_000_000).padStart(6, '0'));
      await page.getByRole('button', { name: 'Continue' }).click();
      const expected =
        i < 5
          ? `${5 - i} wrong ${5 - i === 1 ? 'entry' : 'entries'} left before the code waiting for ${SVC_EMAIL} is locked.`
          : `That was the last try: the code waiting for ${SVC_EMAIL} is now locked.`;
      await tries.getByText(expected).waitFor();
      counted.push(expected);
    }
    await shot('claim-last-try');
    // The right code now: locked, and what to do, not "try again in N minutes".
    await input.fill(code);
    await page.getByRole('button', { name: 'Continue' }).click();
    await tries.getByText(`The code waiting for ${SVC_EMAIL} is locked after 5 wrong entries, so no code works now, not even the right one.`).waitFor();
    await page.getByText('Ask the agent for a new code: it works at once.').waitFor();
    assert(!((await page.getByRole('alert').filter({ hasText: 'is locked' }).textContent()) ?? '').includes('Try again in'), 'the page says to wait');
    await shot('claim-locked');
    // The agent asks for a new code (same registration): it works at once.
    const again = await postJson('/agent/identity/claim', { claim_token: reg.body.claim_token as string });
    const fresh = (again.body.claim_attempt as { user_code: string }).user_code;
    await input.fill(fresh);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Authorise this agent?' }).waitFor();
    await page
      .getByTestId('claim-details')
      .getByText(reg.body.registration_id as string)
      .waitFor();
    await page.getByRole('button', { name: 'Back' }).click();
  });

  test("a denied claim ends the agent's registration (invalid_grant)", async () => {
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

  test('the claim page fits a phone-width screen', async () => {
    await page.setViewportSize(PHONE);
    const reg = await postJson('/agent/identity', { type: 'service_auth', login_hint: SVC_EMAIL });
    await page.goto(`${verificationUri}?code=${(reg.body.claim as { user_code: string }).user_code}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('heading', { name: 'Authorise this agent?' }).waitFor();
    await page.getByLabel('Organization that pays and gets the key').waitFor();
    await assertFitsWidth(page, 'the claim page');
    await shot('phone-claim');
    await page.setViewportSize(DESKTOP);
  });

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
