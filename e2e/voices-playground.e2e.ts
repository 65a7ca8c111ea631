// Black-box test of the voices, playground, usage and models pages with the gateway, as a user
// would drive them: a migrated throw-away SQLite database, `next start` and `svc gateway` on
// free ports against it, and Debian's Chromium through playwright-core. Sign up (the first
// user is platform admin), grant credit in the page, clone a voice from a recording made by the
// local TTS engine (upload through the dashboard proxy), see it listed, prepare it for a second
// model and watch the job, rename it, synthesize with it in the playground and check the page's
// <audio> holds real audio, transcribe the recording, then usage, keys (the dashboard key),
// models, phone width.
//
//   npx next build && npx tsx e2e/voices-playground.e2e.ts      (E2E_BUILD=1 rebuilds first)
//
// Prints one line per step and "N passed, N failed" last; exits non-zero on any failure.
// Screenshots go to e2e/screenshots/voices-*.png, playground*.png, usage.png, models.png.
// Processes, browser and accounts: e2e/support/.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { grantCredits, PASSWORD, signUp, type Account } from './support/accounts.js';
import { assertPagesFitPhone, audioSeconds, mainNav, openBrowser } from './support/browser.js';
import { startStack } from './support/processes.js';
import { assert, runE2E, step } from './support/runner.js';

const USER: Account = { name: 'Voice Tester', email: 'e2e.voices@example.com', password: PASSWORD };
const VOICE_NAME = 'E2E Clone';
const RENAMED = 'E2E Storyteller';
// Long enough that flite speaks well over the 10 s a clone needs.
const CLIP_TEXT =
  'Good morning, and thank you for calling. This recording is long enough to clone a voice from it. ' +
  'It talks about the weather, the trains that run late on Mondays, and the coffee that is never hot enough. ' +
  'Please stay on the line while we find the right person to help you with your question today.';

/** Seconds of audio in a canonical PCM WAV, read from its header. */
function wavSeconds(bytes: Buffer): number {
  let offset = 12;
  let byteRate = 0;
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString('ascii', offset, offset + 4);
    const size = bytes.readUInt32LE(offset + 4);
    if (id === 'fmt ') byteRate = bytes.readUInt32LE(offset + 16);
    if (id === 'data') return byteRate ? Math.min(size, bytes.length - offset - 8) / byteRate : 0;
    offset += 8 + size + (size % 2);
  }
  return 0;
}

await runE2E({ stepTimeoutMs: 90_000 }, async () => {
  // SVC_HEALTH_CHECK_SECONDS: the models page shows an upstream up within the test's patience.
  const { dash, tmp } = await startStack({ name: 'voices', gatewayEnv: { SVC_HEALTH_CHECK_SECONDS: '2' } });

  // The recording to clone, made by the local engine (as the test's own fixture, not the product).
  const clip = join(tmp, 'clip.wav');
  const flite = spawnSync('flite', ['-voice', 'rms', '-o', clip, CLIP_TEXT], { encoding: 'utf8' });
  if (flite.status !== 0) throw new Error(`flite failed: ${flite.stderr}`);
  const clipSeconds = wavSeconds(readFileSync(clip));
  if (clipSeconds < 10) throw new Error(`the generated clip is only ${clipSeconds.toFixed(1)} s`);

  const browser = await openBrowser({ tmp }, { actionTimeoutMs: 20_000, autoplay: true });
  const { page, shot } = browser;
  const nav = (label: string) => mainNav(page, label);
  let voiceId = '';

  step('signs up as the first user (platform admin) and grants the org credit in the page', async () => {
    await signUp(page, dash, USER);
    await grantCredits(page, '5');
  });

  step('the voices page lists platform voices; the Mine scope is empty', async () => {
    await nav('Voices').click();
    await page.waitForURL(`${dash}/voices`);
    await page.getByRole('heading', { level: 1, name: 'Voices' }).waitFor();
    await page.getByTestId('voice-card').filter({ hasText: 'Sally' }).waitFor();
    const library = page.getByRole('region', { name: 'Voice library' });
    await library.getByRole('button', { name: 'Mine', exact: true }).click();
    await library.getByText('You have no voices of your own yet').waitFor();
    await library.getByRole('button', { name: 'All', exact: true }).click();
    // Filters: French voices only.
    await library.getByLabel('Language').fill('fr');
    await page.getByTestId('voice-card').filter({ hasText: 'Camille' }).waitFor();
    await page.getByTestId('voice-card').filter({ hasText: 'Sally' }).waitFor({ state: 'detached' });
    await library.getByLabel('Language').fill('');
    await page.getByTestId('voice-card').filter({ hasText: 'Sally' }).waitFor();
    await shot('voices');
  });

  step('a clip shorter than 10 s is refused in the page before uploading', async () => {
    const short = join(tmp, 'short.wav');
    spawnSync('flite', ['-voice', 'rms', '-o', short, 'Too short.']);
    const form = page.getByRole('form', { name: 'Clone a voice' });
    await form.getByLabel('Recording (WAV)').setInputFiles(short);
    await form.getByLabel('Voice name').fill(VOICE_NAME);
    await form.getByRole('button', { name: 'Upload and clone' }).click();
    await form.getByText(/a clone needs at least 10 s of speech/).waitFor();
  });

  step(`clones "${VOICE_NAME}" from a ${Math.round(clipSeconds)} s recording through the dashboard proxy, with an upload progress bar`, async () => {
    const form = page.getByRole('form', { name: 'Clone a voice' });
    // Record every value the upload progress bar shows (it can be brief on loopback).
    await page.evaluate(() => {
      const w = window as unknown as { __progress: string[] };
      w.__progress = [];
      new MutationObserver(() => {
        const bar = document.querySelector('[data-testid="upload-progress"]');
        if (bar) w.__progress.push(bar.getAttribute('aria-valuenow') ?? 'indeterminate');
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    });
    await form.getByLabel('Recording (WAV)').setInputFiles(clip);
    await form.getByLabel('Voice name').fill(VOICE_NAME);
    await form.getByLabel('Tags (optional)').fill('e2e, calm');
    await form.getByLabel('TTS model').selectOption('local-flite');
    await form.getByRole('button', { name: 'Upload and clone' }).click();
    // 201 (an engine that can clone is online) or 202 + job: either ends with a link to the voice.
    const ready = form.getByText(`Voice “${VOICE_NAME}” is ready`);
    const queued = form.getByTestId('job-progress');
    await ready.or(queued).waitFor({ timeout: 60_000 });
    if (await queued.isVisible()) await form.locator('[data-testid="job-progress"][data-status="succeeded"]').waitFor({ timeout: 60_000 });
    const progress = await page.evaluate(() => (window as unknown as { __progress: string[] }).__progress);
    assert(progress.length > 0, 'no upload progress bar was shown');
    const link = form.getByRole('link', { name: 'Open the voice' });
    voiceId = decodeURIComponent((await link.getAttribute('href'))!.split('/').pop()!);
    assert(/^voice_/.test(voiceId), `not a voice id: ${voiceId}`);
    await shot('voices-cloned');
  });

  step('the new voice is listed under Mine', async () => {
    const library = page.getByRole('region', { name: 'Voice library' });
    await library.getByRole('button', { name: 'Mine', exact: true }).click();
    const card = page.locator(`[data-testid="voice-card"][data-voice-id="${voiceId}"]`);
    await card.getByText(VOICE_NAME).waitFor();
    await card.getByText('Yours').waitFor();
    await card.getByText('local-flite').waitFor();
  });

  step('the voice page prepares the voice for local-espeak and follows the job to the end', async () => {
    await page.locator(`[data-testid="voice-card"][data-voice-id="${voiceId}"]`).getByRole('link', { name: VOICE_NAME }).click();
    await page.waitForURL(`${dash}/voices/${voiceId}`);
    await page.getByRole('heading', { level: 1, name: VOICE_NAME }).waitFor();
    const profiles = page.getByRole('region', { name: 'Profiles' });
    await profiles.getByTestId('profile-row').filter({ hasText: 'local-flite' }).getByText('ready').waitFor();
    await profiles.getByLabel('Prepare for another model').selectOption('local-espeak');
    await profiles.getByRole('button', { name: 'Prepare profile' }).click();
    await profiles.getByTestId('job-progress').waitFor();
    await profiles.locator('[data-testid="job-progress"][data-status="succeeded"]').waitFor({ timeout: 60_000 });
    await profiles.getByTestId('profile-row').filter({ hasText: 'local-espeak' }).getByText('ready').waitFor();
    await shot('voice-detail');
  });

  step('renames the voice; the heading and the library follow', async () => {
    const edit = page.getByRole('form', { name: 'Edit voice' });
    await edit.getByLabel('Name').fill(RENAMED);
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { level: 1, name: RENAMED }).waitFor();
    await page.getByText('Saved.').waitFor();
  });

  step('synthesizes with the cloned voice in the playground: the page plays real audio and shows the cost', async () => {
    await page.getByRole('link', { name: 'Try in the playground' }).click();
    await page.waitForURL(`${dash}/playground?voice=${voiceId}`);
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    const voice = form.getByLabel('Voice');
    await voice.locator(`option[value="${voiceId}"]`).waitFor({ state: 'attached' });
    // The page picks the first model the voice is ready on, then the voice itself.
    await page.waitForFunction((id) => [...document.querySelectorAll('form[aria-label="Synthesize speech"] select')].some((s) => (s as HTMLSelectElement).value === id), voiceId);
    assert((await voice.inputValue()) === voiceId, `the playground picked ${await voice.inputValue()}, not the cloned voice`);
    await form.getByLabel('Text').fill('Hello from the cloned voice. The dashboard plays this in the page.');
    await form.getByRole('button', { name: 'Synthesize' }).click();
    const audio = page.getByTestId('tts-audio');
    await audio.waitFor();
    const duration = await audioSeconds(audio);
    assert(duration > 1, `the <audio> element holds ${duration} s of audio`);
    const cost = (await page.getByTestId('request-cost').textContent()) ?? '';
    assert(/Cost \$0\.\d{6}/.test(cost) && !cost.includes('$0.000000 ·'), `cost line: ${cost}`);
    assert(/credits left \$4\.\d{6}/.test(cost), `remaining credits: ${cost}`);
    await shot('playground');
  });

  step('a voice without a profile for the model is not offered, and the page says so', async () => {
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    await form.getByLabel('TTS model').selectOption('local-espeak');
    await form.getByLabel('Voice').locator('option[value="espeak-fr-f"]').waitFor({ state: 'attached' });
    assert((await form.getByLabel('Voice').locator('option[value="flite-slt"]').count()) === 0, 'a flite voice is offered for espeak');
    await form.getByText(/Only voices with a ready profile for local-espeak are listed/).waitFor();
  });

  step('transcribes the recording with the STT model', async () => {
    const form = page.getByRole('form', { name: 'Transcribe a recording' });
    await form.getByLabel('Recording (WAV or raw 16-bit PCM)').setInputFiles(clip);
    await form.getByRole('button', { name: 'Transcribe' }).click();
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor({ timeout: 60_000 });
    const text = ((await transcript.textContent()) ?? '').toLowerCase();
    assert(/morning|calling|voice|recording/.test(text), `transcript: ${text}`);
    await shot('playground-transcribed');
  });

  step('usage shows the spend per day, per model and per key (the dashboard key)', async () => {
    await nav('Usage').click();
    await page.waitForURL(`${dash}/usage`);
    const total = (await page.getByTestId('usage-total').textContent()) ?? '';
    assert(/^\$0\.\d{6}$/.test(total.trim()) && total.trim() !== '$0.000000', `total: ${total}`);
    assert((await page.getByTestId('usage-bar').count()) >= 2, 'the chart has no bars for the two models used today');
    await page.getByTestId('usage-model-row').filter({ hasText: 'local-flite' }).waitFor();
    await page.getByTestId('usage-model-row').filter({ hasText: 'local-stt' }).waitFor();
    await page.getByTestId('usage-key-row').filter({ hasText: 'Dashboard (playground)' }).waitFor();
    await shot('usage');
  });

  step('the dashboard key is a real key in the keys list', async () => {
    await nav('API keys').click();
    await page.getByTestId('key-row').filter({ hasText: 'Dashboard (playground)' }).getByTestId('key-status').getByText('Active', { exact: true }).waitFor();
  });

  step('the platform admin sees each model with its upstreams and health', async () => {
    await nav('Models').click();
    await page.waitForURL(`${dash}/models`);
    const flite = page.getByRole('region', { name: 'local-flite' });
    await flite.getByTestId('upstream-row').getByText('local:flite').waitFor();
    await flite.getByTestId('upstream-row').getByText('Up', { exact: true }).waitFor({ timeout: 30_000 });
    await shot('models');
  });

  step('pages fit a phone-width screen', async () => {
    const paths = ['/voices', `/voices/${voiceId}`, '/playground', '/usage', '/models'];
    await assertPagesFitPhone(browser, dash, paths, (path) => `phone${path.startsWith('/voices/') ? '-voice-detail' : path.replace('/', '-')}`);
  });

  step('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
