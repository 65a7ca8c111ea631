// Black-box test of the voices, playground, usage and models pages with the gateway, as a user
// would drive them: a migrated throw-away SQLite database, `next start` and `svc gateway` on
// free ports against it, and Debian's Chromium through @playwright/test. Sign up (the first
// user is platform admin), grant credit in the page, clone a voice from a recording made by the
// local TTS engine (upload through the dashboard proxy), see it listed, prepare it for a second
// model and watch the job, rename it, synthesize with it in the playground and check the page's
// <audio> holds real audio, transcribe the recording, then usage, keys (the dashboard key),
// models, phone width. Also: a Play button on every library card and on a voice's page playing
// the voice's free preview (the time from the click to the sample playing is printed), files that are not audio refused as
// such, the source recording's player (length, seeking through byte ranges), human
// validation messages, the playground's autoplay, cleared results and character counter, the
// usage chart's axes and tooltip, the models page's labelled figures and full errors, and the
// confirmation after a voice is deleted.
//
//   npx playwright test e2e/voices-playground.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Each step is a test of one serial chain: after a failure the rest are skipped.
// Screenshots go to e2e/screenshots/voices-*.png, playground*.png, usage.png, models.png.
// Processes, browser and accounts: e2e/support/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type Page } from '@playwright/test';
import { grantCredits, PASSWORD, signUp, type Account } from './support/accounts.ts';
import { assertPagesFitPhone, audioSeconds, DESKTOP, mainNav, PHONE, type BrowserSession } from './support/browser.ts';
import { setUpStory } from './support/story.ts';

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

/** A WAV of `text` in flite's rms voice (flite writes only to a file). */
function speak(text: string): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-flite-'));
  try {
    const flite = spawnSync('flite', ['-voice', 'rms', '-o', join(dir, 'clip.wav'), text], { encoding: 'utf8' });
    if (flite.status !== 0) throw new Error(`flite failed: ${flite.stderr}`);
    return readFileSync(join(dir, 'clip.wav'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The recording to clone, made by the local engine (as the test's own fixture, not the product);
// made as the file loads, because a step's title gives its length.
const CLIP = speak(CLIP_TEXT);
const clipSeconds = wavSeconds(CLIP);
if (clipSeconds < 10) throw new Error(`the generated clip is only ${clipSeconds.toFixed(1)} s`);

// The playground plays its result by itself. A launch option: this file gets a browser of its own.
test.use({
  launchOptions: [
    async ({ launchOptions }, use) => use({ ...launchOptions, args: [...(launchOptions.args ?? []), '--autoplay-policy=no-user-gesture-required'] }),
    { scope: 'worker' },
  ],
});

test.describe.serial('voices and playground', () => {
  test.describe.configure({ timeout: 90_000 });
  // SVC_HEALTH_CHECK_SECONDS: the models page shows an upstream up within the test's patience.
  const story = setUpStory({ name: 'voices', gatewayEnv: { SVC_HEALTH_CHECK_SECONDS: '2' } }, { actionTimeoutMs: 20_000 });
  let dash = '';
  let tmp = '';
  let clip = '';
  let notes = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];
  test.beforeAll(() => {
    ({ dash, tmp } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
    clip = join(tmp, 'clip.wav');
    writeFileSync(clip, CLIP);
    // A text file, named as if it were a recording.
    notes = join(tmp, 'notes.wav');
    writeFileSync(notes, 'Meeting notes: bring the slides on Monday.\n');
  });
  const nav = (label: string) => mainNav(page, label);
  let voiceId = '';
  const openCloneForm = async () => {
    const form = page.getByRole('form', { name: 'Clone a voice' });
    if (!(await form.isVisible())) await page.getByRole('button', { name: 'Clone a voice' }).click();
    await form.waitFor();
    return form;
  };
  /**
   * Clicks a Play button and returns the milliseconds from the click to the sample playing,
   * measured in the page (the click's event time to the <audio>'s "playing" event).
   */
  const playSample = async (button: ReturnType<typeof page.getByRole>) => {
    await button.waitFor();
    await page.evaluate(() => {
      const w = window as unknown as { __sample: Promise<number> };
      const audio = document.querySelector('[data-testid="voice-sample-audio"]')!;
      w.__sample = new Promise<number>((resolve, reject) => {
        let clicked = 0;
        document.addEventListener('click', (e) => (clicked = e.timeStamp), { capture: true, once: true });
        audio.addEventListener('playing', (e) => resolve(e.timeStamp - clicked), { once: true });
        audio.addEventListener('error', () => reject(new Error('the sample could not be played')), { once: true });
      });
    });
    await button.click();
    const ms = await page.evaluate(() => (window as unknown as { __sample: Promise<number> }).__sample);
    // Of which the request through the proxy and the gateway (the rest: the page, decoding, starting the audio).
    const request = await page.evaluate(
      () =>
        performance
          .getEntriesByType('resource')
          .filter((e) => e.name.includes('/api/gateway/voices/') && e.name.includes('/preview'))
          .at(-1)?.duration ?? -1,
    );
    return { ms, request };
  };
  const sampleTimes: Array<[string, number]> = [];

  test('signs up as the first user (platform admin) and grants the org credit in the page', async () => {
    await signUp(page, dash, USER);
    await grantCredits(page, '5');
  });

  test('the voices page lists platform voices; the Mine scope is empty', async () => {
    await nav('Voices').click();
    await page.waitForURL(`${dash}/voices`);
    await page.getByRole('heading', { level: 1, name: 'Voices' }).waitFor();
    await page.getByTestId('voice-card').filter({ hasText: 'Sally' }).waitFor();
    // The library comes first, in the platform list's order (English first, not Hindi); the
    // clone form waits behind its button.
    const first = await page.getByTestId('voice-card').first().getAttribute('data-voice-id');
    assert(first === 'flite-slt', `the library starts with ${first}`);
    assert((await page.getByRole('form', { name: 'Clone a voice' }).count()) === 0, 'the clone form is open before it was asked for');
    const top = await page.getByRole('region', { name: 'Voice library' }).evaluate((el) => el.getBoundingClientRect().top);
    assert(top < 300, `the library starts ${top}px down the page`);
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

  test('a tag on a card filters the library by it, the filters are in the address, and the count is worded right', async () => {
    const library = page.getByRole('region', { name: 'Voice library' });
    const card = page.getByTestId('voice-card').filter({ hasText: 'Sally' });
    const tag = (await card.getByRole('list', { name: 'Tags' }).getByRole('button').first().textContent())!.trim();
    await card.getByRole('button', { name: `Show voices tagged ${tag}` }).click();
    await page.waitForURL((url) => url.searchParams.get('tag') === tag);
    assert((await library.getByRole('searchbox', { name: 'Tag', exact: true }).inputValue()) === tag, 'the Tag field does not show the chosen tag');
    const cards = page.getByTestId('voice-card');
    const tagsOf = await cards.evaluateAll((els) => els.map((el) => [...el.querySelectorAll('[aria-label="Tags"] button')].map((b) => b.textContent)));
    assert(tagsOf.length > 0 && tagsOf.every((tags) => tags.includes(tag)), `a card without the tag ${tag} is shown: ${JSON.stringify(tagsOf)}`);
    // The address keeps the filter: a reload shows the same list.
    await library.getByLabel('Language').fill('fr');
    await page.waitForURL((url) => url.searchParams.get('language') === 'fr' && url.searchParams.get('tag') === tag);
    await page.reload();
    assert(
      (await page.getByRole('region', { name: 'Voice library' }).getByRole('searchbox', { name: 'Tag', exact: true }).inputValue()) === tag,
      'the tag filter is gone after a reload',
    );
    assert(
      (await page.getByRole('region', { name: 'Voice library' }).getByLabel('Language').inputValue()) === 'fr',
      'the language filter is gone after a reload',
    );
    // One voice shown: the count says "1 voice", never "1 voices".
    const reloaded = page.getByRole('region', { name: 'Voice library' });
    await reloaded.getByRole('searchbox', { name: 'Tag', exact: true }).fill('');
    await reloaded.getByLabel('Search').fill('Camille');
    await page.waitForURL((url) => url.searchParams.get('q') === 'Camille' && !url.searchParams.has('tag'));
    await reloaded.getByText('1 voice shown.', { exact: true }).waitFor();
    await shot('voices-filtered');
    await page.goto(`${dash}/voices`);
    await page.getByTestId('voice-card').filter({ hasText: 'Sally' }).waitFor();
  });

  test('Play on a library card plays a sample of the voice (flite and eSpeak); the time from the click is printed', async () => {
    for (const [voice, name] of [
      ['flite-slt', 'Sally'],
      ['espeak-en-us-m', 'Ethan'],
    ] as const) {
      const card = page.locator(`[data-testid="voice-card"][data-voice-id="${voice}"]`);
      const play = card.getByRole('button', { name: `Play a sample of ${name} on ${voice.startsWith('flite') ? 'local-flite' : 'local-espeak'}` });
      const { ms, request } = await playSample(play);
      sampleTimes.push([voice, ms]);
      console.log(`      sample of ${voice}: playing ${ms.toFixed(0)} ms after the click (the request took ${request.toFixed(0)} ms)`);
      await card.locator('[data-testid="play-sample"][data-state="playing"]').or(card.locator('[data-testid="play-sample"][data-state="idle"]')).waitFor();
    }
    await page.locator('[data-testid="voice-card"][data-voice-id="flite-slt"]').getByTestId('play-sample').click();
    await shot('voices-play');
  });

  test("a platform voice's page plays its sample too", async () => {
    await page.locator('[data-testid="voice-card"][data-voice-id="flite-rms"]').getByRole('link', { name: 'Rob' }).click();
    await page.waitForURL(`${dash}/voices/flite-rms`);
    const actions = page.getByRole('region', { name: 'Actions' });
    const { ms, request } = await playSample(actions.getByRole('button', { name: 'Play a sample of Rob on local-flite' }));
    sampleTimes.push(['flite-rms (voice page)', ms]);
    console.log(`      sample of flite-rms on its page: playing ${ms.toFixed(0)} ms after the click (the request took ${request.toFixed(0)} ms)`);
    await shot('voice-detail-platform');
    await page.getByRole('link', { name: '← All voices' }).click();
    await page.waitForURL(`${dash}/voices`);
  });

  test('a text file is refused as "not a WAV file" by the clone form, as the gateway says', async () => {
    const form = await openCloneForm();
    await form.getByLabel('Recording (WAV)').setInputFiles(notes);
    await form.getByLabel('Voice name').fill('Not a voice');
    await form.getByRole('button', { name: 'Upload and clone' }).click();
    const alert = form.getByRole('alert').filter({ hasText: 'The clone was not made' });
    await alert.getByText('The file is not a WAV file: it is text, not audio.', { exact: false }).waitFor();
    assert(!((await alert.textContent()) ?? '').includes('0.0 s'), `the answer still measures the text: ${await alert.textContent()}`);
    await shot('clone-not-audio');
  });

  test('a clip shorter than 10 s is refused in the page before uploading', async () => {
    const short = join(tmp, 'short.wav');
    spawnSync('flite', ['-voice', 'rms', '-o', short, 'Too short.']);
    const form = await openCloneForm();
    await form.getByLabel('Recording (WAV)').setInputFiles(short);
    await form.getByLabel('Voice name').fill(VOICE_NAME);
    await form.getByRole('button', { name: 'Upload and clone' }).click();
    await form.getByText(/a clone needs at least 10 s of speech/).waitFor();
  });

  test('a wrong language is refused under its field, worded for people', async () => {
    const form = await openCloneForm();
    await form.getByLabel('Recording (WAV)').setInputFiles(clip);
    await form.getByLabel('Voice name').fill(VOICE_NAME);
    const language = form.getByLabel('Language');
    await language.fill('english!');
    await form.getByRole('button', { name: 'Upload and clone' }).click();
    await form.getByText('Use a language tag such as en, fr or en-US.', { exact: true }).waitFor();
    assert((await language.getAttribute('aria-invalid')) === 'true', 'the language field is not marked');
    assert(!((await form.textContent()) ?? '').includes('language:'), 'the error still reads "language: …"');
    await shot('clone-language-error');
    await language.fill('en');
  });

  test(`clones "${VOICE_NAME}" from a ${Math.round(clipSeconds)} s recording through the dashboard proxy, with an upload progress bar`, async () => {
    const form = await openCloneForm();
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

  test('the new voice is listed under Mine', async () => {
    const library = page.getByRole('region', { name: 'Voice library' });
    await library.getByRole('button', { name: 'Mine', exact: true }).click();
    const card = page.locator(`[data-testid="voice-card"][data-voice-id="${voiceId}"]`);
    await card.getByText(VOICE_NAME).waitFor();
    await card.getByText('Yours').waitFor();
    await card.getByText('local-flite').waitFor();
  });

  test('the voice page prepares the voice for local-espeak and follows the job to the end', async () => {
    await page.locator(`[data-testid="voice-card"][data-voice-id="${voiceId}"]`).getByRole('link', { name: VOICE_NAME }).click();
    await page.waitForURL(`${dash}/voices/${voiceId}`);
    await page.getByRole('heading', { level: 1, name: VOICE_NAME }).waitFor();
    const profiles = page.getByRole('region', { name: 'Profiles' });
    await profiles.getByTestId('profile-row').filter({ hasText: 'local-flite' }).getByText('ready').waitFor();
    // Every state the page shows while the job works: the job box and the profile's row must agree.
    await page.evaluate(() => {
      const w = window as unknown as { __disagree: string[] };
      w.__disagree = [];
      new MutationObserver(() => {
        const job = document.querySelector('[data-testid="job-progress"]')?.getAttribute('data-status');
        const row = [...document.querySelectorAll('[data-testid="profile-row"]')].find((r) => r.textContent?.includes('local-espeak'));
        const said = row?.querySelector('td:nth-child(2)')?.textContent?.trim();
        if (!row || !said || (job !== 'queued' && job !== 'running')) return;
        if (said !== (job === 'running' ? 'Running…' : 'Queued')) w.__disagree.push(`job ${job}, row ${said}`);
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await profiles.getByLabel('Prepare for another model').selectOption('local-espeak');
    await profiles.getByRole('button', { name: 'Prepare profile' }).click();
    await profiles.getByTestId('job-progress').waitFor();
    await profiles.locator('[data-testid="job-progress"][data-status="succeeded"]').waitFor({ timeout: 60_000 });
    await profiles.getByTestId('profile-row').filter({ hasText: 'local-espeak' }).getByText('ready').waitFor();
    const disagreements = await page.evaluate(() => (window as unknown as { __disagree: string[] }).__disagree);
    assert(disagreements.length === 0, `the row and the job box disagreed: ${disagreements.join('; ')}`);
    // "Add to saved voices" is not a second "Save" beside the edit form's "Save changes".
    await page.getByRole('region', { name: 'Actions' }).getByRole('button', { name: 'Add to saved voices' }).waitFor();
    assert((await page.getByRole('button', { name: 'Save', exact: true }).count()) === 0, 'a bare "Save" button is still there');
    await shot('voice-detail');
  });

  test("the source recording's player knows its length and seeks (the proxy answers byte ranges)", async () => {
    const ranged = page.waitForResponse((r) => r.url().includes('/api/gateway/blobs/') && r.status() === 206);
    await page.reload();
    const audio = page.getByTestId('source-audio');
    const seconds = await audioSeconds(audio);
    assert(Math.abs(seconds - clipSeconds) < 0.5, `the player says ${seconds} s, the clip is ${clipSeconds.toFixed(1)} s`);
    const res = await ranged;
    assert(/^bytes \d+-\d+\/\d+$/.test(res.headers()['content-range'] ?? ''), `Content-Range: ${res.headers()['content-range']}`);
    const seeked = await audio.evaluate(
      (el: HTMLAudioElement) =>
        new Promise<number>((resolve, reject) => {
          el.addEventListener('seeked', () => resolve(el.currentTime), { once: true });
          el.addEventListener('error', () => reject(new Error('the player failed')), { once: true });
          el.currentTime = 5;
        }),
    );
    assert(Math.abs(seeked - 5) < 0.1, `seeked to ${seeked} s`);
    await shot('voice-source-player');
  });

  test('a refused edit is worded for people and marks its field ("Name must not be empty.")', async () => {
    const edit = page.getByRole('form', { name: 'Edit voice' });
    const name = edit.getByLabel('Name');
    await name.fill('   ');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await edit.getByText('Name must not be empty.', { exact: true }).waitFor();
    assert((await name.getAttribute('aria-invalid')) === 'true', 'the name field is not marked');
    assert(await name.evaluate((el) => el === document.activeElement), 'the name field does not have the focus');
    assert(!((await edit.textContent()) ?? '').includes('changes.name'), "the API's field path is shown");
    await shot('voice-edit-error');
    await name.fill(VOICE_NAME);
  });

  test('renames the voice; the heading and the library follow', async () => {
    const edit = page.getByRole('form', { name: 'Edit voice' });
    await edit.getByLabel('Name').fill(RENAMED);
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { level: 1, name: RENAMED }).waitFor();
    await page.getByText('Saved.').waitFor();
  });

  test('synthesizes with the cloned voice in the playground: the page plays real audio and shows the cost', async () => {
    await page.getByRole('link', { name: 'Try in the playground' }).click();
    await page.waitForURL(`${dash}/playground?voice=${voiceId}`);
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    const voice = form.getByLabel('Voice');
    await voice.locator(`option[value="${voiceId}"]`).waitFor({ state: 'attached' });
    // The page picks the first model the voice is ready on, then the voice itself.
    await page.waitForFunction(
      (id) => [...document.querySelectorAll('form[aria-label="Synthesize speech"] select')].some((s) => (s as HTMLSelectElement).value === id),
      voiceId,
    );
    assert((await voice.inputValue()) === voiceId, `the playground picked ${await voice.inputValue()}, not the cloned voice`);
    await form.getByLabel('Text').fill('Hello from the cloned voice. The dashboard plays this in the page.');
    // Which media elements start playing (capture: media events do not bubble).
    await page.evaluate(() => {
      const w = window as unknown as { __played: string[] };
      w.__played = [];
      document.addEventListener('playing', (e) => w.__played.push((e.target as HTMLElement).dataset.testid ?? '?'), true);
    });
    await form.getByRole('button', { name: 'Synthesize' }).click();
    const audio = page.getByTestId('tts-audio');
    await audio.waitFor();
    const duration = await audioSeconds(audio);
    assert(duration > 1, `the <audio> element holds ${duration} s of audio`);
    // It plays by itself.
    await page.waitForFunction(() => (window as unknown as { __played: string[] }).__played.includes('tts-audio'));
    const cost = (await page.getByTestId('request-cost').textContent()) ?? '';
    assert(/Cost \$0\.\d{2,6} /.test(cost) && !cost.includes('$0.00 ·'), `cost line: ${cost}`);
    // $5 less a fraction of a cent, in cents.
    assert(/credits left \$(4\.9\d|5\.00)$/.test(cost.trim()), `remaining credits, in cents: ${cost}`);
    await shot('playground');
  });

  test('a new synthesis clears the previous take while it runs, then plays the new one', async () => {
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    const before = await page.getByTestId('tts-audio').getAttribute('src');
    await form.getByLabel('Text').fill('A second take, different from the first.');
    // From the click on, record in order what the result area holds: "Synthesizing…" and which take.
    await page.evaluate(() => {
      const w = window as unknown as { __seen: string[]; __played: string[] };
      w.__seen = [];
      w.__played = [];
      new MutationObserver(() => {
        const pending = document.querySelector('[data-testid="tts-pending"]') ? 'pending' : '';
        const state = `${pending}|${document.querySelector('[data-testid="tts-audio"]')?.getAttribute('src') ?? ''}`;
        if (w.__seen.at(-1) !== state) w.__seen.push(state);
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    });
    await form.getByRole('button', { name: 'Synthesize' }).click();
    await page.waitForFunction((old) => {
      const src = document.querySelector('[data-testid="tts-audio"]')?.getAttribute('src');
      return src && src !== old;
    }, before);
    await page.waitForFunction(() => (window as unknown as { __played: string[] }).__played.includes('tts-audio'));
    const seen = await page.evaluate(() => (window as unknown as { __seen: string[] }).__seen);
    const srcOf = (state: string) => state.slice(state.indexOf('|') + 1);
    const firstNew = seen.findIndex((x) => srcOf(x) !== '' && srcOf(x) !== before);
    assert(firstNew >= 0, `the new take never showed: ${seen.join(' → ')}`);
    assert(!seen.slice(0, firstNew).some((x) => srcOf(x) === before), `the old take stayed while the new one ran: ${seen.join(' → ')}`);
    assert(
      seen.slice(0, firstNew).some((x) => x.startsWith('pending|')),
      `no "Synthesizing…" while it ran: ${seen.join(' → ')}`,
    );
    await shot('playground-second-take');
  });

  test('the text counts its characters up to 5,000 and says when it is over, instead of cutting it', async () => {
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    const text = form.getByLabel('Text');
    const long = 'a'.repeat(5001);
    await text.fill(long);
    assert((await text.inputValue()).length === 5001, 'the field cut the text');
    await page.getByTestId('char-counter').getByText('5,001 / 5,000 characters').waitFor();
    await form.getByText('1 character over the 5,000-character limit of one request: shorten the text.').waitFor();
    assert(await form.getByRole('button', { name: 'Synthesize' }).isDisabled(), 'Synthesize is offered over the limit');
    await shot('playground-counter');
    await text.fill('Back under the limit.');
    await page.getByTestId('char-counter').getByText('21 / 5,000 characters').waitFor();
  });

  test('a voice without a profile for the model is not offered, and the page says so', async () => {
    const form = page.getByRole('form', { name: 'Synthesize speech' });
    await form.getByLabel('TTS model').selectOption('local-espeak');
    await form.getByLabel('Voice').locator('option[value="espeak-fr-f"]').waitFor({ state: 'attached' });
    assert((await form.getByLabel('Voice').locator('option[value="flite-slt"]').count()) === 0, 'a flite voice is offered for espeak');
    await form.getByText(/Only voices with a ready profile for local-espeak are listed/).waitFor();
  });

  test('transcribes the recording with the STT model', async () => {
    const form = page.getByRole('form', { name: 'Transcribe a recording' });
    await form.getByLabel('Recording (WAV or raw 16-bit PCM)').setInputFiles(clip);
    await form.getByRole('button', { name: 'Transcribe' }).click();
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor({ timeout: 60_000 });
    const text = ((await transcript.textContent()) ?? '').toLowerCase();
    assert(/morning|calling|voice|recording/.test(text), `transcript: ${text}`);
    await shot('playground-transcribed');
  });

  test('a text file to transcribe is refused as "not a WAV file", and the previous transcript goes', async () => {
    const form = page.getByRole('form', { name: 'Transcribe a recording' });
    await form.getByLabel('Recording (WAV or raw 16-bit PCM)').setInputFiles(notes);
    await form.getByRole('button', { name: 'Transcribe' }).click();
    const alert = form.getByRole('alert').filter({ hasText: 'Transcription failed' });
    await alert.getByText('The file is not a WAV file: it is text, not audio.', { exact: false }).waitFor();
    assert((await page.getByTestId('transcript').count()) === 0, 'the previous transcript is still shown');
    await shot('playground-not-audio');
  });

  test('usage shows the spend per day, per model and per key (the dashboard key)', async () => {
    await nav('Usage').click();
    await page.waitForURL(`${dash}/usage`);
    const total = (await page.getByTestId('usage-total').textContent()) ?? '';
    assert(/^\$0\.\d{2,6}$/.test(total.trim()) && total.trim() !== '$0.00', `total: ${total}`);
    assert((await page.getByTestId('usage-bar').count()) >= 2, 'the chart has no bars for the two models used today');
    await page.getByTestId('usage-model-row').filter({ hasText: 'local-flite' }).waitFor();
    await page.getByTestId('usage-model-row').filter({ hasText: 'local-stt' }).waitFor();
    await page.getByTestId('usage-key-row').filter({ hasText: 'Dashboard (playground)' }).waitFor();
    await shot('usage');
  });

  test('the usage chart has a y-axis in dollars with gridlines, dates along the bottom, and a tooltip at once', async () => {
    const chart = page.getByTestId('usage-chart');
    const ticks = await chart.getByTestId('usage-y-tick').allTextContents();
    assert(
      ticks.length >= 3 && /^\$0(\.0+)?$/.test(ticks[0]!) && ticks.slice(1).every((t) => /^\$\d+(\.\d+)?$/.test(t) && Number(t.slice(1)) > 0),
      `y-axis: ${ticks.join(', ')}`,
    );
    assert((await chart.locator('[data-testid="usage-y-tick"] line').count()) === ticks.length, 'no gridline per tick');
    const dates = await chart.getByTestId('usage-x-label').allTextContents();
    assert(dates.length >= 4 && dates.every((d) => /^[A-Z][a-z]{2} \d{1,2}$/.test(d)), `x-axis: ${dates.join(', ')}`);
    // Today's bars are the last; pointing at them shows the day's figures (no native title delay).
    await chart.getByTestId('usage-bar').last().hover();
    const tip = page.getByTestId('usage-tooltip');
    await tip.waitFor({ timeout: 1_000 });
    const text = (await tip.textContent()) ?? '';
    assert(text.includes('local-flite') && text.includes('local-stt') && /\$0\.\d{2,6}/.test(text), `tooltip: ${text}`);
    assert((await chart.locator('title').count()) === 0, 'the slow native tooltips are still there');
    await shot('usage-tooltip');
  });

  test('the dashboard key is a real key in the keys list, and says what it is', async () => {
    await nav('API keys').click();
    const row = page.getByTestId('key-row').filter({ hasText: 'Dashboard (playground)' });
    await row.getByTestId('key-status').getByText('Active', { exact: true }).waitFor();
    await row.getByTestId('key-origin').getByText('Made by the dashboard for the playground', { exact: false }).waitFor();
    await shot('keys-dashboard-key');
  });

  test('the platform admin sees each model with its upstreams and health', async () => {
    await nav('Models').click();
    await page.waitForURL(`${dash}/models`);
    const flite = page.getByRole('region', { name: 'local-flite' });
    await flite.getByTestId('upstream-row').getByText('local:flite').waitFor();
    await flite.getByTestId('upstream-row').getByText('Up', { exact: true }).waitFor({ timeout: 30_000 });
    // Each figure under its label, and an engine's message whole: local-llm has no GGUF here,
    // and its message ends with the command that fixes it.
    await flite.getByText('Latency', { exact: true }).waitFor();
    await flite.getByText('Errors, last 15 min', { exact: true }).waitFor();
    const error = page.getByRole('region', { name: 'local-llm' }).getByTestId('upstream-last-error');
    const text = ((await error.textContent()) ?? '').trim();
    assert(
      text.includes('no GGUF model file at') && text.includes('svc model upsert --id local-llm') && text.endsWith('.gguf'),
      `local-llm's error reads: ${text}`,
    );
    // A down engine has no latency to show: "—", never "0 ms".
    const llm = page.getByRole('region', { name: 'local-llm' });
    await llm.getByTestId('upstream-row').getByText('Down', { exact: true }).waitFor();
    const latency = ((await llm.getByTestId('upstream-latency').textContent()) ?? '').trim();
    assert(latency === '—', `the down engine's latency reads ${latency}`);
    await shot('models');
  });

  test('the bundled engines have no voice list, so no import is offered for them (it could only fail), on a desktop and on a phone', async () => {
    for (const viewport of [DESKTOP, PHONE]) {
      await page.setViewportSize(viewport);
      for (const model of ['local-flite', 'local-espeak']) {
        const region = page.getByRole('region', { name: model });
        await region.getByTestId('upstream-row').first().waitFor();
        const offered = await region.getByRole('button', { name: "Import the engine's voices" }).count();
        assert(offered === 0, `${model} offers an import of its engine's voices at ${viewport.width}px`);
      }
    }
    await shot('models-no-import');
    await page.setViewportSize(DESKTOP);
  });

  test('pages fit a phone-width screen', async () => {
    const paths = ['/voices', `/voices/${voiceId}`, '/playground', '/usage', '/models'];
    await assertPagesFitPhone(browser, dash, paths, (path) => `phone${path.startsWith('/voices/') ? '-voice-detail' : path.replace('/', '-')}`);
  });

  test('deletes the cloned voice after a confirmation; the library says it was deleted', async () => {
    await page.goto(`${dash}/voices/${voiceId}`);
    await page.getByRole('button', { name: 'Delete voice' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this voice?' });
    await dialog.getByRole('button', { name: 'Delete voice' }).click();
    await page.waitForURL(/\/voices\?deleted=/);
    await page.getByTestId('voice-deleted').getByText(`Voice “${RENAMED}” deleted`).waitFor();
    await shot('voices-deleted');
  });

  test('the sample times (click to playing) were printed above', async () => {
    console.log(`      samples: ${sampleTimes.map(([v, ms]) => `${v} ${ms.toFixed(0)} ms`).join(', ')}`);
    assert(sampleTimes.length === 3, 'a sample was not measured');
  });

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
